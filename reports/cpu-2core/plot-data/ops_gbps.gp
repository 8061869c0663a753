set datafile missing NaN
set title 'forward ops: bandwidth against measured copy ceilings'
set xlabel 'elements'
set ylabel 'GB/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/ops_gbps-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu add', \
     'plot-data/ops_gbps-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu relu', \
     'plot-data/ops_gbps-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu sum_rows', \
     'plot-data/ops_gbps-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu softmax', \
     'plot-data/ops_gbps-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/ops_gbps-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/ops_gbps-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/ops_gbps-3.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     37.1836 with lines dt 3 lw 2 title 'CPU copy ceiling'
