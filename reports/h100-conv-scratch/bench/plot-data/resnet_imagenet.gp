set datafile missing NaN
set title 'ResNet-18 training step, imagenet stem: images/s'
set xlabel 'batch'
set ylabel 'images/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/resnet_imagenet-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu', \
     'plot-data/resnet_imagenet-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-graph'
