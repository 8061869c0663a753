set datafile missing NaN
set title 'sgemm throughput against measured ceilings'
set xlabel 'n'
set ylabel 'GFLOP/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/gemm_gflops-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu-naive', \
     'plot-data/gemm_gflops-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu-omp', \
     'plot-data/gemm_gflops-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu-openblas', \
     'plot-data/gemm_gflops-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/gemm_gflops-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/gemm_gflops-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     169.151 with lines dt 3 lw 2 title 'CPU ceiling (OpenBLAS)'
