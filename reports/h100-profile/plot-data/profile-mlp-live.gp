set title 'profile-mlp: arena memory alive over the step (batch 128)'
set xlabel 'node, in the order the step runs them'
set ylabel 'MiB'
set grid
set key top right
plot 'plot-data/profile-mlp-live.dat' index 0 using 1:2 with steps lw 2 title 'cpu alive', 1.34033 with lines dt 2 title 'cpu arena (1.3 MiB)', 'plot-data/profile-mlp-live.dat' index 1 using 1:2 with steps lw 2 title 'gpu alive', 1.34033 with lines dt 2 title 'gpu arena (1.3 MiB)'
