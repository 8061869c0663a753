set datafile missing NaN
set title 'mlp: training loss per epoch'
set xlabel 'epoch'
set ylabel 'loss'
set grid
set key outside right
plot 'plot-data/train_mlp_loss-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu'
