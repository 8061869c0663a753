set datafile missing NaN
set title 'cnn: training loss per epoch'
set xlabel 'epoch'
set ylabel 'loss'
set grid
set key outside right
plot 'plot-data/train_cnn_loss-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu', \
     'plot-data/train_cnn_loss-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu'
