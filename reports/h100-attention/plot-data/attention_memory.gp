set datafile missing NaN
set title 'attention plan arena, B=16 H=8 Dh=64: composed O(T^2), fused O(T)'
set xlabel 'T (sequence length)'
set ylabel 'arena MB'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
plot 'plot-data/attention_memory-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'composed fwd', \
     'plot-data/attention_memory-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'composed fwdbwd', \
     'plot-data/attention_memory-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'fused fwd', \
     'plot-data/attention_memory-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'fused fwdbwd'
