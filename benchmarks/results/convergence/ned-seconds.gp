cd '/work/main/benchmarks/results/convergence'
set logscale y
set format y '10^{%L}'
set grid
set xlabel 'seconds'
set ylabel '(f(w) − f*) / |f*|'
set key outside right
set title 'CoNLL-2002 Dutch, L2, λ = 1/n'
set terminal pngcairo size 960,540
set output 'ned-seconds.png'
plot 'ned-lbfgs-seconds.dat' using 1:2 with linespoints title 'ned-lbfgs', 'ned-sag-mixed-seconds.dat' using 1:2 with linespoints title 'ned-sag-mixed'
set terminal svg size 960,540
set output 'ned-seconds.svg'
plot 'ned-lbfgs-seconds.dat' using 1:2 with linespoints title 'ned-lbfgs', 'ned-sag-mixed-seconds.dat' using 1:2 with linespoints title 'ned-sag-mixed'
