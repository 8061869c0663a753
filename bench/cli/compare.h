/* compare.h: `bench compare`: two result folders, row by row, with a
 * Mann-Whitney U test of each row's repetitions and an exit code for CI. */
#ifndef DG_BENCH_COMPARE_H
#define DG_BENCH_COMPARE_H

#include <stdbool.h>
#include <stdio.h>

/* the exit code when a row of B is slower than A beyond the threshold and
 * significantly so (0: no such row; 1: an error; 2: a usage error) */
#define BENCH_COMPARE_REGRESSION 3

typedef struct bench_compare_opts {
    double threshold_pct; /* a change within +-this many percent is "same" (default 5) */
    double alpha;         /* significance level of the U test (default 0.05)           */
    bool   across_machines; /* runs of different machines are compared, not refused */
} bench_compare_opts;

/* Matches the rows of each registered sweep in DIR_A and DIR_B (NAME.json,
 * and the rows of NAME.csv it lacks, the peers': medians only, no test),
 * and of the peers' own files, and writes the markdown report to out.
 * Runs whose metadata names different machines (CPU model, cores, GPU
 * model, OpenBLAS core) are refused with exit 2 and a message naming both,
 * unless o->across_machines: then the report's first line says so.
 * Returns the exit code: 0, 1, 2 or BENCH_COMPARE_REGRESSION. Writes
 * nothing into either folder. */
int bench_compare(const char *dir_a, const char *dir_b, const bench_compare_opts *o, FILE *out);

/* `bench compare [--threshold PCT] [--alpha A] [--out FILE] DIR_A DIR_B`
 * (argv[0] = "compare"): its exit code. --out writes FILE.partial and
 * renames it over FILE when the report is complete. */
int bench_compare_main(int argc, char **argv);

#endif
