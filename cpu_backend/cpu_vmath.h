/* cpu_vmath.h: exp and tanh over float arrays, vectorised with SLEEF, and
 * the kernels built on them (sigmoid, gelu and its derivative, the pieces of
 * a log-sum-exp). libm's scalar expf/tanhf cost 15-60 cycles per element;
 * SLEEF's vector versions about 1.5 on AVX-512, which makes these ops
 * memory-bound like the plain ones.
 *
 * One table per instruction-set tier: AVX-512F, AVX2 + FMA (each compiled
 * in its own file with those -m flags, SLEEF's functions of that width) and
 * baseline x86-64 (SSE2 code, SLEEF's 4-wide dispatcher, which itself picks
 * SSE2, SSE4.1 or AVX2 at load time). dg__vmath() picks the widest tier
 * the CPU runs, so the build needs no -march and runs on any x86-64.
 *
 * Error, against the exact value (double-precision libm; tests/
 * test_cpu_math.c checks every bound on every tier this CPU runs, over a
 * sweep of every 1021st float and every float near each edge): exp 1 ulp
 * (SLEEF's u10 bound; 0.95 seen), tanh 1.0001 ulp (SLEEF's; it returns the
 * float after a tiny x), sigmoid 3 ulp (2.14 seen), gelu and its
 * derivative: see below. ulp: the spacing of floats at the exact value,
 * 2^-149 in the subnormal range. The tiers give the same bits. NaN in
 * gives NaN out; exp(-inf) = 0, exp(+inf) = inf, tanh(+-inf) = +-1.
 *
 * Every function takes any n >= 0 and lets y be x (in place); none keeps
 * state, so threads may call them on disjoint ranges. */
#ifndef DG_CPU_VMATH_H
#define DG_CPU_VMATH_H

#include <stdbool.h>
#include <stdint.h>

typedef struct dg_vmath {
    const char *name; /* "avx512", "avx2", "sse2" */
    void (*exp)(float *y, const float *x, int64_t n);
    void (*tanh)(float *y, const float *x, int64_t n);
    /* 1 / (1 + exp(-x)) as (x >= 0 ? 1 : a) / (1 + a), a = exp(-|x|) in
     * (0, 1]: no overflow, and full relative accuracy far into the
     * negative tail, where the plain form rounds to 0 */
    void (*sigmoid)(float *y, const float *x, int64_t n);
    /* gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
     * computed as x sigmoid(2u), which has no cancellation in 1 + tanh(u)
     * for x < 0 (the tanh form loses all relative accuracy past x = -5).
     * Error: |y - gelu(x)| <= 2^-24 |gelu(x)| (6 + 14 |u| sigmoid(-2u))
     * + (1 + |x|) 2^-149 (first order: the exp and 4 roundings, and 7
     * roundings in u, which gelu amplifies by 2 |u| sigmoid(-2u) in the
     * negative tail; the last term for a subnormal exp): seen 3 ulp for
     * |x| <= 1, 16 on [-3, -1], 250 on [-10.5, -8], where the tanh form
     * is 100% off. gelu(+inf) = +inf; gelu(-inf) is NaN, as the formula
     * gives it (-inf * 0) in the float64 reference and on the GPU. */
    void (*gelu)(float *y, const float *x, int64_t n);
    /* dx = dy gelu'(x), gelu'(x) = s + t, s = sigmoid(2u), t = 2 x u'(x)
     * a / (1 + a)^2 with a = exp(-2|u|); 0 and 1 in the tails, never NaN
     * there. Error <= 2^-24 (16 + 14 |u|) (|s| + |t|) + (1 + |x|) 2^-149
     * (before the product with dy) */
    void (*gelu_backward)(float *dx, const float *dy, const float *x, int64_t n);
    /* max_j a x[j] (n >= 1); with a NaN in x the result may or may not be
     * NaN, but the sum of exp(a x[j] - max) that follows is NaN either way */
    float (*max)(const float *x, int64_t n, float a);
    /* sum_j exp(a x[j] - b), accumulated in double; the terms are also
     * stored in y unless y is NULL */
    double (*exp_sum)(float *y, const float *x, int64_t n, float a, float b);
    /* y[j] = s exp(a x[j] - b) */
    void (*exp_scaled)(float *y, const float *x, int64_t n, float a, float b, float s);
    /* y[j] *= s, at the tier's width (softmax's normalisation) */
    void (*scale)(float *y, int64_t n, float s);
} dg_vmath;

extern const dg_vmath dg__vmath_avx512, dg__vmath_avx2, dg__vmath_sse2;

/* the widest tier this CPU runs */
const dg_vmath *dg__vmath(void);
/* whether this CPU (and its OS) runs tier m's instructions */
bool dg__vmath_runs(const dg_vmath *m);

#endif
