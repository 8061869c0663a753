set datafile missing NaN
set title 'logreg: test accuracy per epoch'
set xlabel 'epoch'
set ylabel 'test accuracy %'
set grid
set key outside right
plot 'reports/cpu-2core/plot-data/train_logreg_acc-0.dat' using 1:2 with linespoints lw 2 title 'cpu'
