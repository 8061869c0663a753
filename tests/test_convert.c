/* test_convert.c: the vector conversions of cpu_backend/cpu_convert.h
 * against the scalar ones of core/dtype_convert.h, bit for bit, on every
 * path this CPU runs, under MXCSR's defaults and under DAZ+FTZ with
 * rounding toward zero (which the conversions must ignore). Inputs: all
 * 65536 16-bit patterns widened; narrowed, every bf16 pattern with low
 * halves at and around its ties (every exponent, subnormals, inf, NaNs
 * with payloads), every f16 midpoint and its neighbours (the subnormal
 * ties, the overflow threshold 65520), and random bit patterns. Arrays
 * start one value off alignment and have odd lengths, so each path's
 * scalar tail runs too. Catches a vector path that truncates, rounds ties
 * away, follows MXCSR's rounding, flushes subnormals (as vcvtneps2bf16
 * does), keeps NaN payloads (as vcvtps2ph does), mixes lanes, or drops
 * the tail. Then the cast op on each backend against the same rule: on
 * the GPU that checks the rule is __float2half_rn's and
 * __float2bfloat16_rn's (NaN included), on the CPU the threads' blocks. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <xmmintrin.h>

#include "core/dtype_convert.h"
#include "core/rng.h"
#include "cpu_backend/cpu_convert.h"
#include "gpu_util.h"
#include "test_util.h"

enum { N_RANDOM = 1 << 20 };

static const dg_cvt_path paths[] = {DG_CVT_AVX2, DG_CVT_AVX512};
enum { N_PATHS = sizeof paths / sizeof paths[0] };

/* the floats narrowed, n_random random ones last; their count in *n */
static float *narrow_inputs(int n_random, int64_t *n) {
    static const uint16_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    int64_t cap = 65536 * 6 + 2 * 32768 * 3 + n_random, k = 0;
    float *x = malloc((size_t)cap * sizeof *x);
    cr_assert_not_null(x);
    for (uint32_t hi = 0; hi < 65536; hi++) /* bf16 ties at every exponent, NaN payloads */
        for (size_t j = 0; j < sizeof lows / sizeof lows[0]; j++) x[k++] = dg__f32_of_bits(hi << 16 | lows[j]);
    for (uint32_t h = 0; h < 0x7c00; h++) { /* f16 midpoints (exact in float32) and neighbours */
        double lo = dg__f16_to_f32((uint16_t)h), up = h == 0x7bff ? 65536.0 : dg__f16_to_f32((uint16_t)(h + 1));
        float mid = (float)((lo + up) / 2); /* 0x7bff: 65520, the overflow threshold */
        for (int s = 0; s < 2; s++) {
            float m = s ? -mid : mid;
            x[k++] = m;
            x[k++] = nextafterf(m, INFINITY);
            x[k++] = nextafterf(m, -INFINITY);
        }
    }
    dg_rng r = dg_rng_new(39);
    for (int i = 0; i < n_random; i++) x[k++] = dg__f32_of_bits((uint32_t)dg_rng_u64(&r));
    cr_assert_leq(k, cap);
    *n = k;
    return x;
}

static void check_path(dg_cvt_path p) {
    /* widening: every pattern, from an odd offset */
    uint16_t *h = malloc((65536 + 1) * sizeof *h);
    float *y = malloc((65536 + 1) * sizeof *y);
    cr_assert(h && y);
    for (uint32_t b = 0; b < 65536; b++) h[b + 1] = (uint16_t)b;
    for (int d = 0; d < 2; d++) {
        dg_dtype t = d ? DG_F16 : DG_BF16;
        dg__cvt_widen_on(p, t, h + 1, y + 1, 65536);
        for (uint32_t b = 0; b < 65536; b++) {
            float want = d ? dg__f16_to_f32((uint16_t)b) : dg__bf16_to_f32((uint16_t)b);
            cr_assert_eq(dg__f32_bits(y[b + 1]), dg__f32_bits(want), "%s: %s 0x%04x widened to 0x%08x, want 0x%08x",
                         dg__cvt_path_name(p), d ? "f16" : "bf16", b, dg__f32_bits(y[b + 1]), dg__f32_bits(want));
        }
    }
    free(h);
    free(y);
    /* narrowing */
    int64_t n;
    float *x = narrow_inputs(N_RANDOM, &n);
    h = malloc((size_t)(n + 1) * sizeof *h);
    cr_assert_not_null(h);
    for (int d = 0; d < 2; d++) {
        dg_dtype t = d ? DG_F16 : DG_BF16;
        dg__cvt_narrow_on(p, t, x + 1, h + 1, n - 1);
        for (int64_t i = 1; i < n; i++) {
            uint16_t want = d ? dg__f32_to_f16(x[i]) : dg__f32_to_bf16(x[i]);
            cr_assert_eq(h[i], want, "%s: 0x%08x narrowed to %s 0x%04x, want 0x%04x", dg__cvt_path_name(p),
                         dg__f32_bits(x[i]), d ? "f16" : "bf16", h[i], want);
        }
    }
    free(h);
    free(x);
}

static void check_all_paths(void) {
    int ran = 0;
    for (int i = 0; i < N_PATHS; i++) {
        if (!dg__cvt_runs(paths[i])) continue;
        check_path(paths[i]);
        ran++;
    }
    cr_log_info("vector paths checked: %d (best here: %s)", ran, dg__cvt_path_name(dg__cvt_best()));
}

Test(convert, vector_paths_give_the_scalar_bits) { check_all_paths(); }

Test(convert, vector_paths_ignore_daz_ftz_and_the_rounding_mode) {
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u | 0x6000u); /* FTZ (bit 15), DAZ (bit 6), rounding toward zero (bits 13-14) */
    check_all_paths();
    _mm_setcsr(csr);
}

/* the scalar rule itself where hardware differs: the GPU's canonical NaN,
 * bf16's subnormals kept, an f16 NaN widened quiet with its payload */
Test(convert, the_scalar_rule_where_hardware_differs) {
    cr_assert_eq(dg__f32_to_bf16(dg__f32_of_bits(0xffc12345u)), 0x7fffu);
    cr_assert_eq(dg__f32_to_f16(dg__f32_of_bits(0x7f800001u)), 0x7fffu);
    cr_assert_eq(dg__f32_to_bf16(dg__f32_of_bits(0x00012345u)), 0x0001u);
    cr_assert_eq(dg__f32_to_bf16(dg__f32_of_bits(0x8040c000u)), 0x8041u);
    cr_assert_eq(dg__f32_bits(dg__f16_to_f32(0xfd55u)), 0xffeaa000u);
}

/* the best path is the widest this CPU has: a choice that ignored the
 * hardware would leave the scalar code running everywhere */
Test(convert, the_best_path_is_the_widest_that_runs) {
    dg_cvt_path want = dg__cvt_runs(DG_CVT_AVX512) ? DG_CVT_AVX512
                       : dg__cvt_runs(DG_CVT_AVX2) ? DG_CVT_AVX2
                                                    : DG_CVT_SCALAR;
    cr_assert_eq(dg__cvt_best(), want);
    if (__builtin_cpu_supports("avx512bf16")) cr_assert_eq(want, DG_CVT_AVX512);
}

/* x (the narrowing inputs) cast to f16 and bf16 and each back to float32
 * by the backend's cast op, every bit against the scalar rule. The round
 * trips widen every finite f16 and every bf16 the inputs round to. */
static void check_cast_op(bool gpu) {
    dg_backend *be = test_backend_open(gpu);
    int64_t n;
    float *x = narrow_inputs(4096, &n);
    dg_graph *g = dg_graph_new();
    cr_assert_not_null(g);
    dg_node *in = dg_input(g, "x", DG_SHAPE(n));
    dg_node *out[4];
    out[0] = dg_cast(g, in, DG_F16);
    out[1] = dg_cast(g, in, DG_BF16);
    out[2] = dg_cast(g, out[0], DG_F32);
    out[3] = dg_cast(g, out[1], DG_F32);
    dg_plan *p = NULL;
    ASSERT_OK(dg_plan_new(&p, g, be, out, 4, NULL));
    ASSERT_OK(dg_plan_set(p, in, x, (size_t)n * sizeof *x));
    ASSERT_OK(dg_plan_run(p));
    uint16_t *h[2] = {malloc((size_t)n * 2), malloc((size_t)n * 2)};
    float *w[2] = {malloc((size_t)n * 4), malloc((size_t)n * 4)};
    cr_assert(h[0] && h[1] && w[0] && w[1]);
    for (int d = 0; d < 2; d++) {
        ASSERT_OK(dg_plan_get(p, out[d], h[d], (size_t)n * 2));
        ASSERT_OK(dg_plan_get(p, out[2 + d], w[d], (size_t)n * 4));
    }
    const char *be_name = gpu ? "gpu" : "cpu";
    for (int64_t i = 0; i < n; i++) {
        uint16_t want16 = dg__f32_to_f16(x[i]), wantb = dg__f32_to_bf16(x[i]);
        cr_assert_eq(h[0][i], want16, "%s: 0x%08x cast to f16 0x%04x, want 0x%04x", be_name, dg__f32_bits(x[i]), h[0][i],
                     want16);
        cr_assert_eq(h[1][i], wantb, "%s: 0x%08x cast to bf16 0x%04x, want 0x%04x", be_name, dg__f32_bits(x[i]),
                     h[1][i], wantb);
        cr_assert_eq(dg__f32_bits(w[0][i]), dg__f32_bits(dg__f16_to_f32(want16)), "%s: f16 0x%04x widened to 0x%08x",
                     be_name, want16, dg__f32_bits(w[0][i]));
        cr_assert_eq(dg__f32_bits(w[1][i]), dg__f32_bits(dg__bf16_to_f32(wantb)), "%s: bf16 0x%04x widened to 0x%08x",
                     be_name, wantb, dg__f32_bits(w[1][i]));
    }
    for (int d = 0; d < 2; d++) {
        free(h[d]);
        free(w[d]);
    }
    dg_plan_free(p);
    dg_graph_free(g);
    free(x);
    dg_backend_free(be);
}

Test(convert, the_cpu_cast_op_gives_the_scalar_bits) { check_cast_op(false); }
Test(convert, gpu_the_cast_op_gives_the_scalar_bits) { check_cast_op(true); }
