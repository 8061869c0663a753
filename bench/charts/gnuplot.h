/* gnuplot.h: running gnuplot with no shell in between, and writing text
 * into its scripts so that no character of it can be read as code. */
#ifndef DG_BENCH_GNUPLOT_H
#define DG_BENCH_GNUPLOT_H

#include <stdbool.h>
#include <stdio.h>

/* whether an executable gnuplot is on PATH */
bool bench_gnuplot_found(void);

/* s as one single-quoted gnuplot string: a ' is doubled (gnuplot's own
 * escape); control characters, newlines included, become '?'. Inside single
 * quotes gnuplot expands neither backquotes nor macros. */
void bench_gnuplot_quote(FILE *f, const char *s);

/* Whether a name read from a file (a profile's model, ...) may become part
 * of a file name in a result folder: 1 to 63 characters of [A-Za-z0-9._-],
 * the first not '.': no folder, no "..", nothing a shell or gnuplot would
 * read as more than a name. */
bool bench_file_name_ok(const char *s);

/* s as one token of a gnuplot data file: characters other than
 * [A-Za-z0-9._+:/()[]@=-] (blanks, quotes, '#', control characters ...)
 * become '_', an empty s '-'; a name from a file cannot split a row into
 * columns, start a comment or add rows. */
void bench_gnuplot_word(FILE *f, const char *s);

/* Runs `gnuplot -e "<PNG terminal>; load SCRIPT; <SVG terminal>; replot"`
 * inside dir (the child changes into it: the folder's name reaches neither
 * a shell nor a script). script and chart are names relative to dir made of
 * [A-Za-z0-9._/-] only, with no empty, "." or ".." component and no leading
 * '/' (everything gnuplot writes stays inside dir); the charts are
 * dir/CHART.png and dir/CHART.svg.
 * Returns 0, or 1 with a message on stderr. */
int bench_gnuplot_run(const char *dir, const char *script, const char *chart);

#endif
