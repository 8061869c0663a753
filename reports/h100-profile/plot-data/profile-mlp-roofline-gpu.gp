set title 'profile-mlp on gpu: roofline, one point per node (0 nodes without FLOPs not shown)'
set logscale xy
set xlabel 'arithmetic intensity (FLOP per byte moved)'
set ylabel 'GFLOP/s'
set xrange [0.0311284:153.914]
set key bottom right
set grid
set samples 400
roof(x) = x * 2992.32 < 51621.3 ? x * 2992.32 : 51621.3
plot roof(x) with lines lw 2 lc 'black' title 'ceiling (2992 GB/s, 51621 GFLOP/s)', 'plot-data/profile-mlp-roofline-gpu.dat' index 0 using 1:2 with points pt 7 ps 0.8 title 'forward', '' index 1 using 1:2 with points pt 5 ps 0.8 title 'backward', '' index 2 using 1:2 with points pt 9 ps 0.9 title 'optimizer'
