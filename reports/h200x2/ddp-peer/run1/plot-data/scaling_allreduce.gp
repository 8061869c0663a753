set datafile missing NaN
set title 'all-reduce (average, fp32): bus bandwidth per message size'
set xlabel 'message bytes per GPU'
set ylabel 'bus GB/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
plot 'plot-data/scaling_allreduce-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'nccl, 2 GPUs', \
     'plot-data/scaling_allreduce-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'node, 2 GPUs', \
     'plot-data/scaling_allreduce-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/scaling_allreduce-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle
