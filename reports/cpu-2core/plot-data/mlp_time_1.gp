set datafile missing NaN
set title 'MLP 784-1024-1024-10 training step time (Adam)'
set xlabel 'batch'
set ylabel 'median ms'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/mlp_time_1-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu', \
     'plot-data/mlp_time_1-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'numpy', \
     'plot-data/mlp_time_1-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-cpu', \
     'plot-data/mlp_time_1-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/mlp_time_1-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/mlp_time_1-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle
