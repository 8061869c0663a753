set datafile missing NaN
set title 'MLP training step: hand-written vs autodiff graph'
set xlabel 'batch'
set ylabel 'median ms'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/autodiff_time-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu manual', \
     'plot-data/autodiff_time-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu graph', \
     'plot-data/autodiff_time-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/autodiff_time-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle
