set datafile missing NaN
set title 'host-device transfer rate'
set xlabel 'floats moved'
set ylabel 'GB/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
plot 'plot-data/transfer_gbps-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'h2d gpu-pinned', \
     'plot-data/transfer_gbps-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'd2h gpu-pinned', \
     'plot-data/transfer_gbps-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'h2d gpu-pageable', \
     'plot-data/transfer_gbps-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'd2h gpu-pageable', \
     'plot-data/transfer_gbps-4.dat' using 1:2:3:4 with yerrorlines lw 2 title 'h2d gpu-pageable-driver', \
     'plot-data/transfer_gbps-5.dat' using 1:2:3:4 with yerrorlines lw 2 title 'd2h gpu-pageable-driver', \
     'plot-data/transfer_gbps-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/transfer_gbps-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/transfer_gbps-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/transfer_gbps-3.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/transfer_gbps-4.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/transfer_gbps-5.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle
