set title 'profile-resnet18-cifar: arena memory alive over the step (batch 32)'
set xlabel 'node, in the order the step runs them'
set ylabel 'MiB'
set grid
set key top right
plot 'plot-data/profile-resnet18-cifar-live.dat' index 0 using 1:2 with steps lw 2 title 'cpu alive', 326.537 with lines dt 2 title 'cpu arena (326.5 MiB)', 'plot-data/profile-resnet18-cifar-live.dat' index 1 using 1:2 with steps lw 2 title 'gpu alive', 326.537 with lines dt 2 title 'gpu arena (326.5 MiB)'
