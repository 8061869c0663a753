set datafile missing NaN
set title 'sgemm time, square n x n x n'
set xlabel 'n'
set ylabel 'median ms'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'reports/cpu-2core/plot-data/gemm_time-0.dat' using 1:2 with linespoints lw 2 title 'cpu-naive', \
     'reports/cpu-2core/plot-data/gemm_time-1.dat' using 1:2 with linespoints lw 2 title 'cpu-omp', \
     'reports/cpu-2core/plot-data/gemm_time-2.dat' using 1:2 with linespoints lw 2 title 'cpu-openblas'
