set datafile missing NaN
set title 'conv2d bwd-weight: each implementation at its largest batch'
set xlabel 'layer shape (# in summary.md)'
set ylabel 'GFLOP/s'
set grid
set key outside right
set logscale y 10
plot 'plot-data/conv_gflops_bwd-weight-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu-im2col', \
     'plot-data/conv_gflops_bwd-weight-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu-im2col-batch', \
     'plot-data/conv_gflops_bwd-weight-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-im2col', \
     'plot-data/conv_gflops_bwd-weight-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-im2col incl. transfers', \
     'plot-data/conv_gflops_bwd-weight-4.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-implicit', \
     'plot-data/conv_gflops_bwd-weight-5.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-cudnn', \
     'plot-data/conv_gflops_bwd-weight-6.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-cudnn-bench', \
     'plot-data/conv_gflops_bwd-weight-7.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-cpu', \
     'plot-data/conv_gflops_bwd-weight-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/conv_gflops_bwd-weight-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/conv_gflops_bwd-weight-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/conv_gflops_bwd-weight-3.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/conv_gflops_bwd-weight-4.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/conv_gflops_bwd-weight-5.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/conv_gflops_bwd-weight-6.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/conv_gflops_bwd-weight-7.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     1223.35 with lines dt 3 lw 2 title 'CPU sgemm ceiling (OpenBLAS)', \
     51387.1 with lines dt 3 lw 2 title 'GPU sgemm ceiling (cuBLAS fp32)'
