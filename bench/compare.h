/* compare.h: `bench compare`: two result folders, row by row. */
#ifndef DG_BENCH_COMPARE_H
#define DG_BENCH_COMPARE_H
#include <stdio.h>
/* Matches the rows of two result folders and prints (and writes to
 * DIR_B/compare.md) the ratio of medians B/A per case; a difference smaller
 * than either row's own spread (max - min) is marked as noise. */
int bench_compare(const char *dir_a, const char *dir_b, FILE *out);
/* `bench compare ARGS...` (argv[0] = "compare"): its exit code */
int bench_compare_main(int argc, char **argv);
#endif
