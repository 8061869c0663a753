set datafile missing NaN
set title 'forward ops: bandwidth against measured copy ceilings'
set xlabel 'elements'
set ylabel 'GB/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'reports/cpu-2core/plot-data/ops_gbps-0.dat' using 1:2 with linespoints lw 2 title 'cpu add', \
     'reports/cpu-2core/plot-data/ops_gbps-1.dat' using 1:2 with linespoints lw 2 title 'cpu relu', \
     'reports/cpu-2core/plot-data/ops_gbps-2.dat' using 1:2 with linespoints lw 2 title 'cpu sum_rows', \
     'reports/cpu-2core/plot-data/ops_gbps-3.dat' using 1:2 with linespoints lw 2 title 'cpu softmax', \
     27.338 with lines dt 3 lw 2 title 'CPU copy ceiling'
