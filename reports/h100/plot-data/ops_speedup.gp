set datafile missing NaN
set title 'forward ops: speedup, GPU over CPU (>1: GPU faster)'
set xlabel 'elements'
set ylabel 'speedup'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/ops_speedup-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'add', \
     'plot-data/ops_speedup-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'sum_rows', \
     'plot-data/ops_speedup-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'softmax', \
     'plot-data/ops_speedup-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'softmax_ce', \
     'plot-data/ops_speedup-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/ops_speedup-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/ops_speedup-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/ops_speedup-3.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     1 with lines dt 3 lw 2 title 'break-even'
