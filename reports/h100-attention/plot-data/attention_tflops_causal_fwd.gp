set datafile missing NaN
set title 'attention (causal mask), forward, B=16 H=8 Dh=64: TFLOP/s (convention of core/ops.c)'
set xlabel 'T (sequence length)'
set ylabel 'TFLOP/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/attention_tflops_causal_fwd-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu-composed-fwd', \
     'plot-data/attention_tflops_causal_fwd-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu-fused-fwd', \
     'plot-data/attention_tflops_causal_fwd-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-composed-fwd', \
     'plot-data/attention_tflops_causal_fwd-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-fused-fwd', \
     'plot-data/attention_tflops_causal_fwd-4.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-graph-composed-fwd', \
     'plot-data/attention_tflops_causal_fwd-5.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-graph-fused-fwd', \
     'plot-data/attention_tflops_causal_fwd-6.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-math-fwd', \
     'plot-data/attention_tflops_causal_fwd-7.dat' using 1:2:3:4 with yerrorlines lw 2 title 'torch-efficient-fwd', \
     'plot-data/attention_tflops_causal_fwd-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/attention_tflops_causal_fwd-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_causal_fwd-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_causal_fwd-3.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_causal_fwd-4.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_causal_fwd-5.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_causal_fwd-6.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/attention_tflops_causal_fwd-7.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     1.21083 with lines dt 3 lw 2 title 'CPU sgemm ceiling (OpenBLAS)', \
     51.4214 with lines dt 3 lw 2 title 'GPU sgemm ceiling (cuBLAS fp32)'
