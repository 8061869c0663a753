set datafile missing NaN
set title 'sgemm throughput against measured ceilings'
set xlabel 'n'
set ylabel 'GFLOP/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'reports/h100-v2/before/plot-data/gemm_gflops-0.dat' using 1:2 with linespoints lw 2 title 'cpu-naive', \
     'reports/h100-v2/before/plot-data/gemm_gflops-1.dat' using 1:2 with linespoints lw 2 title 'cpu-omp', \
     'reports/h100-v2/before/plot-data/gemm_gflops-2.dat' using 1:2 with linespoints lw 2 title 'cpu-openblas', \
     'reports/h100-v2/before/plot-data/gemm_gflops-3.dat' using 1:2 with linespoints lw 2 title 'gpu-naive', \
     'reports/h100-v2/before/plot-data/gemm_gflops-4.dat' using 1:2 with linespoints lw 2 title 'gpu-tiled', \
     'reports/h100-v2/before/plot-data/gemm_gflops-5.dat' using 1:2 with linespoints lw 2 title 'gpu-cublas', \
     'reports/h100-v2/before/plot-data/gemm_gflops-6.dat' using 1:2 with linespoints lw 2 title 'gpu-cublas-tf32', \
     1226.54 with lines dt 3 lw 2 title 'CPU ceiling (OpenBLAS)', \
     51987 with lines dt 3 lw 2 title 'GPU ceiling (cuBLAS fp32)', \
     411689 with lines dt 3 lw 2 title 'GPU ceiling (cuBLAS TF32)'
