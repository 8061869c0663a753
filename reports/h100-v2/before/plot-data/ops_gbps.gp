set datafile missing NaN
set title 'forward ops: bandwidth against measured copy ceilings'
set xlabel 'elements'
set ylabel 'GB/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'reports/h100-v2/before/plot-data/ops_gbps-0.dat' using 1:2 with linespoints lw 2 title 'gpu add', \
     'reports/h100-v2/before/plot-data/ops_gbps-1.dat' using 1:2 with linespoints lw 2 title 'cpu add', \
     'reports/h100-v2/before/plot-data/ops_gbps-2.dat' using 1:2 with linespoints lw 2 title 'gpu relu', \
     'reports/h100-v2/before/plot-data/ops_gbps-3.dat' using 1:2 with linespoints lw 2 title 'cpu relu', \
     'reports/h100-v2/before/plot-data/ops_gbps-4.dat' using 1:2 with linespoints lw 2 title 'gpu sum_rows', \
     'reports/h100-v2/before/plot-data/ops_gbps-5.dat' using 1:2 with linespoints lw 2 title 'cpu sum_rows', \
     'reports/h100-v2/before/plot-data/ops_gbps-6.dat' using 1:2 with linespoints lw 2 title 'gpu softmax', \
     'reports/h100-v2/before/plot-data/ops_gbps-7.dat' using 1:2 with linespoints lw 2 title 'cpu softmax', \
     135.141 with lines dt 3 lw 2 title 'CPU copy ceiling', \
     2993.59 with lines dt 3 lw 2 title 'GPU copy ceiling'
