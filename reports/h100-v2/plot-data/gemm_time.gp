set datafile missing NaN
set title 'sgemm time, square n x n x n'
set xlabel 'n'
set ylabel 'median ms'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'reports/h100-v2/plot-data/gemm_time-0.dat' using 1:2 with linespoints lw 2 title 'cpu-naive', \
     'reports/h100-v2/plot-data/gemm_time-1.dat' using 1:2 with linespoints lw 2 title 'cpu-omp', \
     'reports/h100-v2/plot-data/gemm_time-2.dat' using 1:2 with linespoints lw 2 title 'cpu-openblas', \
     'reports/h100-v2/plot-data/gemm_time-3.dat' using 1:2 with linespoints lw 2 title 'gpu-naive', \
     'reports/h100-v2/plot-data/gemm_time-4.dat' using 1:2 with linespoints lw 2 title 'gpu-tiled', \
     'reports/h100-v2/plot-data/gemm_time-5.dat' using 1:2 with linespoints lw 2 title 'gpu-cublas', \
     'reports/h100-v2/plot-data/gemm_time-6.dat' using 1:2 with linespoints lw 2 title 'gpu-cublas-tf32', \
     'reports/h100-v2/plot-data/gemm_time-7.dat' using 1:2 with linespoints lw 2 title 'gpu-cublas incl. transfers'
