/* stats.c: see stats.h. */
#include "runner/stats.h"

#include <math.h>
#include <stdlib.h>

#include "core/status.h"

typedef struct ranked {
    double v;
    bool   in_a;
} ranked;

static int by_value(const void *x, const void *y) {
    double a = ((const ranked *)x)->v, b = ((const ranked *)y)->v;
    return (a > b) - (a < b);
}

/* P(U >= u) under the null hypothesis for samples of k and m values: the
 * count of rank arrangements with U = j is the coefficient of q^j in the
 * Gaussian binomial [m+k choose k]_q = prod_{i=1..k} (1 - q^(m+i)) / (1 - q^i),
 * a polynomial of degree k m, built factor by factor (each partial product
 * is again a Gaussian binomial, with counts >= 0). */
static dg_status exact_sf(int k, int m, double u, double *sf) {
    int deg = k * m;
    double *c = calloc((size_t)deg + 1, sizeof *c);
    if (!c) return dg_fail(DG_ERR_OOM, "Mann-Whitney U: out of memory (%d x %d samples)", k, m);
    c[0] = 1;
    for (int i = 1; i <= k; i++) {
        for (int j = deg; j >= m + i; j--) c[j] -= c[j - (m + i)];
        for (int j = i; j <= deg; j++) c[j] += c[j - i];
    }
    double total = 0, tail = 0;
    for (int j = 0; j <= deg; j++) {
        total += c[j];
        if (j >= u) tail += c[j];
    }
    free(c);
    *sf = tail / total;
    return DG_OK;
}

dg_status bench_mann_whitney(const double *a, int na, const double *b, int nb, bench_utest *out) {
    if (na < BENCH_UTEST_MIN_REPS || nb < BENCH_UTEST_MIN_REPS)
        return dg_fail(DG_ERR_INVALID, "Mann-Whitney U: %d and %d values; the test needs %d a side", na, nb,
                        BENCH_UTEST_MIN_REPS);
    int n = na + nb;
    ranked *r = malloc((size_t)n * sizeof *r);
    if (!r) return dg_fail(DG_ERR_OOM, "Mann-Whitney U: out of memory (%d samples)", n);
    for (int i = 0; i < na; i++) r[i] = (ranked){a[i], true};
    for (int i = 0; i < nb; i++) r[na + i] = (ranked){b[i], false};
    qsort(r, (size_t)n, sizeof *r, by_value);
    /* tied values share the mean of their ranks (1-based); tie_term sums
     * t^3 - t over each group of t tied values */
    double rank_sum_a = 0, tie_term = 0;
    for (int i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && r[j].v == r[i].v; j++) {}
        double t = j - i, mid_rank = 0.5 * (i + 1 + j);
        tie_term += t * t * t - t;
        for (int q = i; q < j; q++)
            if (r[q].in_a) rank_sum_a += mid_rank;
    }
    free(r);
    double u_a = rank_sum_a - 0.5 * na * (na + 1.0), u = fmax(u_a, (double)na * nb - u_a);
    *out = (bench_utest){.u = u_a, .exact = (na <= 8 || nb <= 8) && tie_term == 0};
    double sf = 1;
    if (out->exact) {
        dg_status st = exact_sf(na < nb ? na : nb, na < nb ? nb : na, u, &sf);
        if (st != DG_OK) return st;
    } else {
        double mu = 0.5 * na * nb, s = sqrt(na * (double)nb / 12 * ((n + 1) - tie_term / ((double)n * (n - 1))));
        /* every value equal: no evidence of a difference */
        sf = s > 0 ? 0.5 * erfc((u - mu - 0.5) / s / sqrt(2.0)) : 0.5;
    }
    out->p = fmin(1.0, 2 * sf);
    return DG_OK;
}

double bench_geomean(const double *v, int n) {
    if (n < 1) return NAN;
    double log_sum = 0;
    for (int i = 0; i < n; i++) {
        if (!(isfinite(v[i]) && v[i] > 0)) return NAN;
        log_sum += log(v[i]);
    }
    return exp(log_sum / n);
}
