cd '/work/main/benchmarks/results/convergence'
set logscale y
set format y '10^{%L}'
set grid
set xlabel 'effective passes'
set ylabel '(f(w) − f*) / |f*|'
set key outside right
set title 'CoNLL-2000, L1, c1 = 1'
set terminal pngcairo size 960,540
set output 'l1-passes.png'
plot 'l1-owlqn-passes.dat' using 1:2 with linespoints title 'l1-owlqn', 'l1-sgd-passes.dat' using 1:2 with linespoints title 'l1-sgd', 'l1-two-stage-passes.dat' using 1:2 with linespoints title 'l1-two-stage'
set terminal svg size 960,540
set output 'l1-passes.svg'
plot 'l1-owlqn-passes.dat' using 1:2 with linespoints title 'l1-owlqn', 'l1-sgd-passes.dat' using 1:2 with linespoints title 'l1-sgd', 'l1-two-stage-passes.dat' using 1:2 with linespoints title 'l1-two-stage'
