set datafile missing NaN
set title 'sgemm speedup, GPU over CPU (>1: GPU faster)'
set xlabel 'n'
set ylabel 'speedup'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
set arrow from 512, graph 0 to 512, graph 1 nohead dt 2 lc rgb 'red'
set label 'crossover 512' at 512, graph 0.95 tc rgb 'red' offset 0.5,0
plot 'plot-data/gemm_speedup-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-cublas / cpu-openblas', \
     'plot-data/gemm_speedup-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'incl. transfers, pageable host', \
     'plot-data/gemm_speedup-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'incl. transfers, pinned host', \
     'plot-data/gemm_speedup-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/gemm_speedup-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/gemm_speedup-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     1 with lines dt 3 lw 2 title 'break-even'
