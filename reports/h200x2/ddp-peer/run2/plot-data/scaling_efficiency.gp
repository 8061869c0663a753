set datafile missing NaN
set title 'scaling efficiency against one GPU'
set xlabel 'GPUs'
set ylabel 'efficiency %'
set grid
set key outside right
plot 'plot-data/scaling_efficiency-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'mlp weak', \
     'plot-data/scaling_efficiency-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'mlp strong', \
     'plot-data/scaling_efficiency-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'resnet18-cifar weak', \
     'plot-data/scaling_efficiency-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'resnet18-cifar strong', \
     'plot-data/scaling_efficiency-4.dat' using 1:2:3:4 with yerrorlines lw 2 title 'charlm weak', \
     'plot-data/scaling_efficiency-5.dat' using 1:2:3:4 with yerrorlines lw 2 title 'charlm strong', \
     100 with lines dt 3 lw 2 title 'linear'
