set datafile missing NaN
set title 'char-LM: loss per step'
set xlabel 'step'
set ylabel 'loss (nats per character)'
set grid
set key outside right
plot 'plot-data/train_charlm_loss-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu train', \
     'plot-data/train_charlm_loss-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu held-out', \
     'plot-data/train_charlm_loss-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu train', \
     'plot-data/train_charlm_loss-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu held-out', \
     3.16996 with lines dt 3 lw 2 title 'unigram entropy'
