/* stats.h: the statistics `bench compare` decides with: a two-sided
 * Mann-Whitney U test of two runs' repetitions, and the geometric mean of
 * time ratios. The test follows scipy.stats.mannwhitneyu (method 'auto'),
 * which Google Benchmark's compare.py calls, so both tools give one p-value
 * for the same samples. */
#ifndef DG_BENCH_STATS_H
#define DG_BENCH_STATS_H

#include <stdbool.h>

#include "core/status.h"

/* compare.py's limits: no test below 2 repetitions a side
 * (UTEST_MIN_REPETITIONS); below 9 the result is flagged unreliable
 * (UTEST_OPTIMAL_REPETITIONS) */
#define BENCH_UTEST_MIN_REPS  2
#define BENCH_UTEST_GOOD_REPS 9

typedef struct bench_utest {
    double u;     /* U of the first sample: its rank sum - na (na + 1) / 2 */
    double p;     /* two-sided p-value in [0, 1]                           */
    bool   exact; /* p from the exact null distribution, not the normal one */
} bench_utest;

/* a[0..na) against b[0..nb), both at least BENCH_UTEST_MIN_REPS long
 * (DG_ERR_INVALID otherwise). As scipy's 'auto' method: the exact
 * distribution of U when either side has at most 8 values and no value is
 * tied; otherwise the normal approximation with the tie correction and a
 * continuity correction of 0.5. */
dg_status bench_mann_whitney(const double *a, int na, const double *b, int nb, bench_utest *out);

/* exp(mean(log v[i])); NaN when n is 0 or any value is not finite and > 0 */
double bench_geomean(const double *v, int n);

#endif
