set datafile missing NaN
set title 'mlp: test accuracy against training time'
set xlabel 'training seconds'
set ylabel 'test accuracy %'
set grid
set key outside right
plot 'plot-data/train_mlp_acc_time-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu'
