cd '/work/main/benchmarks/results/convergence'
set logscale y
set format y '10^{%L}'
set grid
set xlabel 'seconds'
set ylabel '(f(w) − f*) / |f*|'
set key outside right
set title 'CoNLL-2000, L2, λ = 1/n'
set terminal pngcairo size 960,540
set output 'l2-seconds.png'
plot 'l2-lbfgs-seconds.dat' using 1:2 with linespoints title 'l2-lbfgs', 'l2-sgd-seconds.dat' using 1:2 with linespoints title 'l2-sgd', 'l2-sag-uniform-seconds.dat' using 1:2 with linespoints title 'l2-sag-uniform', 'l2-sag-lipschitz-seconds.dat' using 1:2 with linespoints title 'l2-sag-lipschitz', 'l2-sag-mixed-seconds.dat' using 1:2 with linespoints title 'l2-sag-mixed', 'l2-saga-seconds.dat' using 1:2 with linespoints title 'l2-saga', 'l2-adf-seconds.dat' using 1:2 with linespoints title 'l2-adf', 'l2-adf-beta0.9-seconds.dat' using 1:2 with linespoints title 'l2-adf-beta0.9'
set terminal svg size 960,540
set output 'l2-seconds.svg'
plot 'l2-lbfgs-seconds.dat' using 1:2 with linespoints title 'l2-lbfgs', 'l2-sgd-seconds.dat' using 1:2 with linespoints title 'l2-sgd', 'l2-sag-uniform-seconds.dat' using 1:2 with linespoints title 'l2-sag-uniform', 'l2-sag-lipschitz-seconds.dat' using 1:2 with linespoints title 'l2-sag-lipschitz', 'l2-sag-mixed-seconds.dat' using 1:2 with linespoints title 'l2-sag-mixed', 'l2-saga-seconds.dat' using 1:2 with linespoints title 'l2-saga', 'l2-adf-seconds.dat' using 1:2 with linespoints title 'l2-adf', 'l2-adf-beta0.9-seconds.dat' using 1:2 with linespoints title 'l2-adf-beta0.9'
