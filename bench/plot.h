/* plot.h: charts (gnuplot, PNG + SVG) and summary.md from the CSV files of
 * a result folder. Works on any folder bench wrote, on any machine. */
#ifndef DG_BENCH_PLOT_H
#define DG_BENCH_PLOT_H

#include <stdio.h>

/* Draws every chart the folder's CSV files allow and writes summary.md
 * (crossover sizes, peaks). Returns 0, 1 on failure (message on stderr). The
 * summary is also printed to `out` when it is not NULL. */
int bench_plot(const char *dir, FILE *out);

#endif
