set datafile missing NaN
set title 'ResNet-18 training step, cifar stem: images/s'
set xlabel 'batch'
set ylabel 'images/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
set arrow from 8, graph 0 to 8, graph 1 nohead dt 2 lc rgb 'red'
set label 'crossover 8' at 8, graph 0.95 tc rgb 'red' offset 0.5,0
plot 'plot-data/resnet_cifar-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu', \
     'plot-data/resnet_cifar-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu', \
     'plot-data/resnet_cifar-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-graph', \
     'plot-data/resnet_cifar-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-eager', \
     'plot-data/resnet_cifar-4.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-eager-cudnn-bench', \
     'plot-data/resnet_cifar-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/resnet_cifar-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/resnet_cifar-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/resnet_cifar-3.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/resnet_cifar-4.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle
