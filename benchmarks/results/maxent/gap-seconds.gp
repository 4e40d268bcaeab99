set grid
set xlabel 'training time (s), one thread'
set ylabel '(f(w) − f*) / f*'
set key outside right
set title 'Maxent on CoNLL-2000, σ² = 10 (seed 001, Figure 2)'
set logscale y
set format y '10^{%L}'
set terminal pngcairo size 900,540
set output 'gap-seconds.png'
plot 'lbfgs-gap-seconds.dat' using 1:2 with lines lw 2 title 'lbfgs', 'cd-gap-seconds.dat' using 1:2 with lines lw 2 title 'cd', 'scgis-gap-seconds.dat' using 1:2 with lines lw 2 title 'scgis', 'gis-gap-seconds.dat' using 1:2 with lines lw 2 title 'gis', 'iis-gap-seconds.dat' using 1:2 with lines lw 2 title 'iis'
set terminal svg size 900,540
set output 'gap-seconds.svg'
plot 'lbfgs-gap-seconds.dat' using 1:2 with lines lw 2 title 'lbfgs', 'cd-gap-seconds.dat' using 1:2 with lines lw 2 title 'cd', 'scgis-gap-seconds.dat' using 1:2 with lines lw 2 title 'scgis', 'gis-gap-seconds.dat' using 1:2 with lines lw 2 title 'gis', 'iis-gap-seconds.dat' using 1:2 with lines lw 2 title 'iis'
