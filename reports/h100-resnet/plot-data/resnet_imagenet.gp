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
     'plot-data/resnet_imagenet-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-graph', \
     'plot-data/resnet_imagenet-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-eager', \
     'plot-data/resnet_imagenet-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-eager-cudnn-bench', \
     'plot-data/resnet_imagenet-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/resnet_imagenet-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/resnet_imagenet-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/resnet_imagenet-3.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle
