set title 'profile-charlm-composed: step time by op type (sum of node medians, batch 16)'
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.5
set key outside right
set yrange [0:100]
set ylabel 'share of the step (%)'
set grid ytics
plot for [i=2:9] 'plot-data/profile-charlm-composed-ops.dat' using i:xtic(1) title columnheader(i), '' using 10 title columnheader(10) lc rgb 'grey70'
