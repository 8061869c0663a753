set title 'profile-charlm-composed: arena memory alive over the step (batch 16)'
set xlabel 'node, in the order the step runs them'
set ylabel 'MiB'
set grid
set key top right
plot 'plot-data/profile-charlm-composed-live.dat' index 0 using 1:2 with steps lw 2 title 'cpu alive', 348.031 with lines dt 2 title 'cpu arena (348.0 MiB)', 'plot-data/profile-charlm-composed-live.dat' index 1 using 1:2 with steps lw 2 title 'gpu alive', 348.031 with lines dt 2 title 'gpu arena (348.0 MiB)'
