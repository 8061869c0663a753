set title 'profile-charlm-composed on gpu: roofline, one point per node (33 nodes without FLOPs not shown)'
set logscale xy
set xlabel 'arithmetic intensity (FLOP per byte moved)'
set ylabel 'GFLOP/s'
set xrange [0.0208333:390.095]
set key bottom right
set grid
set samples 400
roof(x) = x * 2988.19 < 51395.3 ? x * 2988.19 : 51395.3
plot roof(x) with lines lw 2 lc 'black' title 'ceiling (2988 GB/s, 51395 GFLOP/s)', 'plot-data/profile-charlm-composed-roofline-gpu.dat' index 0 using 1:2 with points pt 7 ps 0.8 title 'forward', '' index 1 using 1:2 with points pt 5 ps 0.8 title 'backward', '' index 2 using 1:2 with points pt 9 ps 0.9 title 'optimizer'
