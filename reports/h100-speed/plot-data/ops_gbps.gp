set datafile missing NaN
set title 'forward ops: bandwidth against measured copy ceilings'
set xlabel 'elements'
set ylabel 'GB/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/ops_gbps-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu sum_rows', \
     'plot-data/ops_gbps-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu softmax'
