/* test_util.h: seeds and assertion helpers shared by the suites. */
#ifndef DG_TEST_UTIL_H
#define DG_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/check/harness.h"
#include "core/dtype_convert.h"
#include "core/graph_internal.h" /* the suites make backward-op nodes directly */

/* DG_TEST_SEED overrides the default seed; every failure message prints it. */
static inline uint64_t test_seed(void) {
    const char *s = getenv("DG_TEST_SEED");
    return s ? strtoull(s, NULL, 0) : 20261121u;
}

#define ASSERT_OK(expr)                                                                        \
    do {                                                                                       \
        dg_status st_ = (expr);                                                                \
        cr_assert_eq(st_, DG_OK, "%s -> %s: %s", #expr, dg_status_name(st_), dg_last_error()); \
    } while (0)

/* node n's values from plan p as float32 (16-bit storage widened); the
 * caller frees them */
static inline float *plan_values_f32(dg_plan *p, const dg_node *n) {
    int64_t k = dg_node_numel(n);
    float *v = malloc((size_t)k * sizeof *v);
    uint16_t *h = malloc((size_t)k * sizeof *h);
    cr_assert(v && h);
    if (n->dtype == DG_F32) {
        ASSERT_OK(dg_plan_get(p, n, v, (size_t)k * sizeof *v));
    } else {
        ASSERT_OK(dg_plan_get(p, n, h, (size_t)k * sizeof *h));
        for (int64_t i = 0; i < k; i++) v[i] = n->dtype == DG_BF16 ? dg__bf16_to_f32(h[i]) : dg__f16_to_f32(h[i]);
    }
    free(h);
    return v;
}

/* fails with the worst element when a comparison exceeds tol */
#define ASSERT_CLOSE(stats, tol, what, name, seed)                                                     \
    cr_assert((stats).max_rel <= (tol),                                                                \
              "%s [%s, seed %llu]: max rel err %.3g > %.3g (nmse %.3g); worst element %lld: got %.9g, " \
              "want %.9g", what, name, (unsigned long long)(seed), (stats).max_rel, (double)(tol),     \
              (stats).nmse, (long long)(stats).worst, (stats).got, (stats).want)

/* A gradient's comparison s held against the incoming gradient's scale
 * (max |w|, the loss weights) where that is larger than the reference
 * gradient's own (max |ref|): where an op's Jacobian nearly cancels (w -
 * sum(w y) of a saturated softmax), the float32 rounding of y decides the
 * small difference. A NaN or infinite error stays so. */
static inline cmp_stats grad_vs_dy(cmp_stats s, const double *ref, int64_t n, const float *w, int64_t nw) {
    double scale = 0, dy = 0;
    for (int64_t j = 0; j < n; j++) scale = fmax(scale, fabs(ref[j]));
    for (int64_t j = 0; j < nw; j++) dy = fmax(dy, fabs((double)w[j]));
    if (dy > scale) s.max_rel *= scale / dy;
    return s;
}

#endif
