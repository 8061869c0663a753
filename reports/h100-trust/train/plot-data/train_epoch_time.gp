set datafile missing NaN
set title 'Fashion-MNIST: time of one training epoch'
set xlabel 'batch'
set ylabel 'epoch ms'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/train_epoch_time-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'logreg cpu', \
     'plot-data/train_epoch_time-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'logreg gpu', \
     'plot-data/train_epoch_time-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'mlp cpu', \
     'plot-data/train_epoch_time-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'mlp gpu'
