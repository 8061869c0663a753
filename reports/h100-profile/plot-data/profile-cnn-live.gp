set title 'profile-cnn: arena memory alive over the step (batch 128)'
set xlabel 'node, in the order the step runs them'
set ylabel 'MiB'
set grid
set key top right
plot 'plot-data/profile-cnn-live.dat' index 0 using 1:2 with steps lw 2 title 'cpu alive', 79.7561 with lines dt 2 title 'cpu arena (79.8 MiB)', 'plot-data/profile-cnn-live.dat' index 1 using 1:2 with steps lw 2 title 'gpu alive', 79.7561 with lines dt 2 title 'gpu arena (79.8 MiB)'
