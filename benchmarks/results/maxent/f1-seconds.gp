set grid
set xlabel 'training time (s), one thread'
set ylabel 'test F1 (after each iteration)'
set key outside right
set title 'Maxent on CoNLL-2000, σ² = 10 (seed 001, Figure 2)'
set yrange [80:95]
set terminal pngcairo size 900,540
set output 'f1-seconds.png'
plot 'lbfgs-f1-seconds.dat' using 1:2 with lines lw 2 title 'lbfgs', 'cd-f1-seconds.dat' using 1:2 with lines lw 2 title 'cd', 'scgis-f1-seconds.dat' using 1:2 with lines lw 2 title 'scgis', 'gis-f1-seconds.dat' using 1:2 with lines lw 2 title 'gis', 'iis-f1-seconds.dat' using 1:2 with lines lw 2 title 'iis'
set terminal svg size 900,540
set output 'f1-seconds.svg'
plot 'lbfgs-f1-seconds.dat' using 1:2 with lines lw 2 title 'lbfgs', 'cd-f1-seconds.dat' using 1:2 with lines lw 2 title 'cd', 'scgis-f1-seconds.dat' using 1:2 with lines lw 2 title 'scgis', 'gis-f1-seconds.dat' using 1:2 with lines lw 2 title 'gis', 'iis-f1-seconds.dat' using 1:2 with lines lw 2 title 'iis'
