cd '/work/main/benchmarks/results/convergence'
set logscale y
set format y '10^{%L}'
set grid
set xlabel 'effective passes'
set ylabel '(f(w) − f*) / |f*|'
set key outside right
set title 'CoNLL-2000, L2, λ = 1/n'
set terminal pngcairo size 960,540
set output 'l2-passes.png'
plot 'l2-lbfgs-passes.dat' using 1:2 with linespoints title 'l2-lbfgs', 'l2-sgd-passes.dat' using 1:2 with linespoints title 'l2-sgd', 'l2-sag-uniform-passes.dat' using 1:2 with linespoints title 'l2-sag-uniform', 'l2-sag-lipschitz-passes.dat' using 1:2 with linespoints title 'l2-sag-lipschitz', 'l2-sag-mixed-passes.dat' using 1:2 with linespoints title 'l2-sag-mixed', 'l2-saga-passes.dat' using 1:2 with linespoints title 'l2-saga', 'l2-adf-passes.dat' using 1:2 with linespoints title 'l2-adf', 'l2-adf-beta0.9-passes.dat' using 1:2 with linespoints title 'l2-adf-beta0.9'
set terminal svg size 960,540
set output 'l2-passes.svg'
plot 'l2-lbfgs-passes.dat' using 1:2 with linespoints title 'l2-lbfgs', 'l2-sgd-passes.dat' using 1:2 with linespoints title 'l2-sgd', 'l2-sag-uniform-passes.dat' using 1:2 with linespoints title 'l2-sag-uniform', 'l2-sag-lipschitz-passes.dat' using 1:2 with linespoints title 'l2-sag-lipschitz', 'l2-sag-mixed-passes.dat' using 1:2 with linespoints title 'l2-sag-mixed', 'l2-saga-passes.dat' using 1:2 with linespoints title 'l2-saga', 'l2-adf-passes.dat' using 1:2 with linespoints title 'l2-adf', 'l2-adf-beta0.9-passes.dat' using 1:2 with linespoints title 'l2-adf-beta0.9'
