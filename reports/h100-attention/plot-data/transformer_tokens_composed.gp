set datafile missing NaN
set title 'char-LM training step, composed attention: tokens/s'
set xlabel 'context T'
set ylabel 'tokens/s'
set grid
set key outside right
set logscale x 2
set format x '%.0s%c'
set logscale y 10
set arrow from 64, graph 0 to 64, graph 1 nohead dt 2 lc rgb 'red'
set label 'crossover 64' at 64, graph 0.95 tc rgb 'red' offset 0.5,0
plot 'plot-data/transformer_tokens_composed-0.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu, batch 8', \
     'plot-data/transformer_tokens_composed-1.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu, batch 8', \
     'plot-data/transformer_tokens_composed-2.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-graph, batch 8', \
     'plot-data/transformer_tokens_composed-3.dat' using 1:2:3:4 with yerrorlines lw 2 title 'cpu, batch 32', \
     'plot-data/transformer_tokens_composed-4.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu, batch 32', \
     'plot-data/transformer_tokens_composed-5.dat' using 1:2:3:4 with yerrorlines lw 2 title 'gpu-graph, batch 32', \
     'plot-data/transformer_tokens_composed-0.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' title 'noisy (cv above --max-cv)', \
     'plot-data/transformer_tokens_composed-1.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/transformer_tokens_composed-2.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/transformer_tokens_composed-3.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/transformer_tokens_composed-4.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'plot-data/transformer_tokens_composed-5.dat' using 1:($5 > 0 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle
