set datafile missing NaN
set title 'attention (full mask), forward + backward, B=16 H=8 Dh=64: TFLOP/s (convention of core/ops.c)'
set xlabel 'T (sequence length)'
set ylabel 'TFLOP/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/attention_tflops_full_fwdbwd-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu-composed-fwdbwd', \
     'plot-data/attention_tflops_full_fwdbwd-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu-fused-fwdbwd', \
     'plot-data/attention_tflops_full_fwdbwd-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-composed-fwdbwd', \
     'plot-data/attention_tflops_full_fwdbwd-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-fused-fwdbwd', \
     'plot-data/attention_tflops_full_fwdbwd-4.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-graph-composed-fwdbwd', \
     'plot-data/attention_tflops_full_fwdbwd-5.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-graph-fused-fwdbwd', \
     'plot-data/attention_tflops_full_fwdbwd-6.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-math-fwdbwd', \
     'plot-data/attention_tflops_full_fwdbwd-7.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-efficient-fwdbwd', \
     'plot-data/attention_tflops_full_fwdbwd-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/attention_tflops_full_fwdbwd-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_full_fwdbwd-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_full_fwdbwd-3.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_full_fwdbwd-4.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_full_fwdbwd-5.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_full_fwdbwd-6.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_full_fwdbwd-7.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     1.21083 with lines dt 3 lw 2 title 'CPU sgemm ceiling (OpenBLAS)', \
     51.4214 with lines dt 3 lw 2 title 'GPU sgemm ceiling (cuBLAS fp32)'
