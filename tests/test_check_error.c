/* test_check_error.c: the checks' error measure (core/check/error.h). Where
 * the reference is nonzero it is the plain max |x - ref| / max |ref|; where
 * the reference is exactly zero it measures against 1e-3 of the inputs'
 * scale, so float32 rounding of a zero output is no `wrong` (the attention
 * check at T = 1, issue 38) while a real error there still is. */
#include <math.h>
#include <string.h>

#include "core/check/attention_check.h"
#include "core/check/error.h"
#include "core/check/step_check.h"
#include "core/rng.h"
#include "test_util.h"

Test(check_error, the_plain_relative_error_where_the_reference_is_nonzero) {
    cr_assert_float_eq(dg_check_rel_err(1e-6, 2.0, 100.0), 5e-7, 1e-20, "the floor 0.1 is below max|ref| 2");
    cr_assert_float_eq(dg_check_rel_err(1e-6, 2.0, 0.0), 5e-7, 1e-20);
    cr_assert_eq(dg_check_rel_err(0, 0, 0), 0, "an exact zero against a zero reference");
    cr_assert(isinf(dg_check_rel_err(NAN, 1, 1)) && isinf(dg_check_rel_err(INFINITY, 1, 1)));
}

Test(check_error, a_zero_reference_is_measured_against_the_inputs_scale) {
    /* 1.18e-7 off a zero reference, terms of size 8: 1.5e-5, not 1e+293 */
    double e = dg_check_rel_err(1.18e-7, 0, 8);
    cr_assert_float_eq(e, 1.18e-7 / 8e-3, 1e-12, "%g", e);
    cr_assert(isinf(dg_check_rel_err(1e-30, 0, 0)), "no scale: any difference from zero is infinite");
    /* the same through the ops harness: an all-zero gradient beside a sibling of size 2 */
    const double ref[3] = {0, 0, 0};
    const float x[3] = {1e-7f, 0, -2e-7f}, big[3] = {0.01f, 0, 0};
    cr_assert_lt(cmp_f32_scaled(x, ref, 3, 2.0).max_rel, 1e-3);
    cr_assert_gt(cmp_f32_scaled(big, ref, 3, 2.0).max_rel, 1.0, "an error of 1/200 of the scale is wrong");
    cr_assert(isinf(cmp_f32(x, ref, 3).max_rel), "cmp_f32 has no scale");
}

/* the attention check at T = 1: dq and dk are exactly zero (a softmax over
 * one key does not move); a float32 result with rounding there is ok, one
 * with an error of 1e-3 of its terms is not */
Test(check_error, attention_at_one_position_has_zero_dq_and_a_meaningful_error) {
    enum { DH = 64 };
    att_dims d = {1, 1, 1, DH, 0.125f, false};
    float q[DH], k[DH], v[DH], g[DH], x[DH];
    dg_rng r = dg_rng_new(test_seed());
    for (int i = 0; i < DH; i++) {
        q[i] = (float)(2 * dg_rng_uniform(&r) - 1);
        k[i] = (float)(2 * dg_rng_uniform(&r) - 1);
        v[i] = (float)(2 * dg_rng_uniform(&r) - 1);
        g[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    }
    att_sample s;
    ASSERT_OK(att_sample_new(&s, d, q, k, v, g, 1));
    ASSERT_OK(att_sample_keys(&s, q, k, v, g));
    for (int c = 0; c < DH; c++) cr_assert_eq(s.ref[ATT_DQ][0][c], 0.0, "dq[%d] = %g at T = 1", c, s.ref[ATT_DQ][0][c]);
    /* rounding: one float32 ulp of 1 in every entry */
    for (int c = 0; c < DH; c++) x[c] = c & 1 ? 1.2e-7f : -1.2e-7f;
    double e = att_sample_error(&s, ATT_DQ, x);
    cr_assert_lt(e, ATT_CHECK_TOL, "rounding at T = 1 reads %g (seed %llu)", e, (unsigned long long)test_seed());
    x[3] = 1e-3f * (float)s.scale[ATT_DQ];
    e = att_sample_error(&s, ATT_DQ, x);
    cr_assert_gt(e, ATT_CHECK_TOL, "an entry off by 1e-3 of the scale reads %g", e);
    /* o = v exactly: the plain relative error */
    memcpy(x, v, sizeof x);
    x[0] += 1e-3f;
    e = att_sample_error(&s, ATT_O, x);
    double vmax = 0;
    for (int c = 0; c < DH; c++) vmax = fmax(vmax, fabs(v[c]));
    cr_assert_float_eq(e, fabs((double)x[0] - v[0]) / vmax, 1e-9, "%g", e);
}

/* A training step's check, each tensor on its own (ResNet's): a parameter
 * whose reference update is exactly zero (no example reached it) is
 * measured against the step's other updates, so float32 rounding there is
 * no failure, and an update of the size of the others there still is. */
typedef struct fake_step { const dg_node *w[2]; float *now[2]; } fake_step;

static dg_status fake_fetch(void *arg, const dg_node *param, float *host, size_t bytes) {
    const fake_step *f = arg;
    memcpy(host, f->now[param == f->w[1]], bytes);
    return DG_OK;
}

Test(check_error, a_tensor_with_a_zero_update_is_measured_against_the_steps_updates) {
    enum { N = 64 };
    dg_graph *g = dg_graph_new();
    dg_init init = {DG_INIT_FILL, 0.5f, 0, 0};
    dg_model m = {.n_params = 2};
    m.params[0] = dg_param(g, "moved", DG_SHAPE(N), init);
    m.params[1] = dg_param(g, "still", DG_SHAPE(N), init);
    ASSERT_OK(dg_graph_status(g));
    double d0[N], d1[N];
    float now0[N], now1[N];
    for (int i = 0; i < N; i++) {
        d0[i] = i % 2 ? 1e-3 : -1e-3; /* an lr 1e-3 step */
        d1[i] = 0;
        now0[i] = (float)(0.5 + d0[i]);
        now1[i] = 0.5f + (i == 7 ? 6e-8f : 0); /* one ulp of 0.5 off zero */
    }
    /* the loss 2 is exact: only the updates are measured here */
    bench_step_ref ref = {.done = true, .loss = 2.0, .n_params = 2, .numel = {N, N}, .delta = {d0, d1}};
    fake_step f = {{m.params[0], m.params[1]}, {now0, now1}};
    bench_step_tol tol = {1e-4, 5e-2, 1e-4, true};
    double err;
    bool ok;
    ASSERT_OK(bench_step_error(&m, fake_fetch, &f, 2.0f, &ref, tol, &err, &ok));
    cr_assert(ok && err < tol.update, "rounding in a tensor whose update is zero reads %g", err);
    now1[7] = 0.5f + 1e-3f; /* an update where none belongs, as large as the others */
    ASSERT_OK(bench_step_error(&m, fake_fetch, &f, 2.0f, &ref, tol, &err, &ok));
    cr_assert(!ok && err > 1, "a wrong update in a tensor whose update is zero reads %g", err);
    dg_graph_free(g);
}
