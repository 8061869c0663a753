set title 'profile-resnet18 on cpu: roofline, one point per node (1 nodes without FLOPs not shown)'
set logscale xy
set xlabel 'arithmetic intensity (FLOP per byte moved)'
set ylabel 'GFLOP/s'
set xrange [0.0104167:1685.01]
set key bottom right
set grid
set samples 400
roof(x) = x * 108.424 < 1240.75 ? x * 108.424 : 1240.75
plot roof(x) with lines lw 2 lc 'black' title 'ceiling (108 GB/s, 1241 GFLOP/s)', 'plot-data/profile-resnet18-roofline-cpu.dat' index 0 using 1:2 with points pt 7 ps 0.8 title 'forward', '' index 1 using 1:2 with points pt 5 ps 0.8 title 'backward', '' index 2 using 1:2 with points pt 9 ps 0.9 title 'optimizer'
