set datafile missing NaN
set title 'MLP 784-1024-1024-10 training step time (Adam)'
set xlabel 'batch'
set ylabel 'median ms'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/mlp_time_1-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu'
