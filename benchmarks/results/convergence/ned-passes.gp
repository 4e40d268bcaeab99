cd '/work/main/benchmarks/results/convergence'
set logscale y
set format y '10^{%L}'
set grid
set xlabel 'effective passes'
set ylabel '(f(w) − f*) / |f*|'
set key outside right
set title 'CoNLL-2002 Dutch, L2, λ = 1/n'
set terminal pngcairo size 960,540
set output 'ned-passes.png'
plot 'ned-lbfgs-passes.dat' using 1:2 with linespoints title 'ned-lbfgs', 'ned-sag-mixed-passes.dat' using 1:2 with linespoints title 'ned-sag-mixed'
set terminal svg size 960,540
set output 'ned-passes.svg'
plot 'ned-lbfgs-passes.dat' using 1:2 with linespoints title 'ned-lbfgs', 'ned-sag-mixed-passes.dat' using 1:2 with linespoints title 'ned-sag-mixed'
