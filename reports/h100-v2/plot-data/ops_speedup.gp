set datafile missing NaN
set title 'forward ops: speedup, GPU over CPU (>1: GPU faster)'
set xlabel 'elements'
set ylabel 'speedup'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'reports/h100-v2/plot-data/ops_speedup-0.dat' using 1:2 with linespoints lw 2 title 'add', \
     'reports/h100-v2/plot-data/ops_speedup-1.dat' using 1:2 with linespoints lw 2 title 'sum_rows', \
     'reports/h100-v2/plot-data/ops_speedup-2.dat' using 1:2 with linespoints lw 2 title 'softmax', \
     'reports/h100-v2/plot-data/ops_speedup-3.dat' using 1:2 with linespoints lw 2 title 'softmax_ce', \
     1 with lines dt 3 lw 2 title 'break-even'
