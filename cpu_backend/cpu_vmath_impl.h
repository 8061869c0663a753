/* cpu_vmath_impl.h: the kernels of cpu_vmath.h, written once and compiled
 * once per instruction-set tier. The including file defines
 *   VM_VEC             the vector type (__m512, __m256, __m128)
 *   VM_EXP, VM_TANH    SLEEF's u10 (1-ulp) functions of that width
 *   VM_TABLE, VM_NAME  the dg_vmath it defines, and its name
 * and is compiled with the tier's -m flags, so the plain loops around the
 * SLEEF calls vectorise at the same width. Arrays are walked in chunks of
 * CHUNK floats, which stay in L1: every pass over a chunk is one simple
 * loop, and only the SLEEF calls see the vector type. */
#include <math.h>
#include <sleef.h>
#include <string.h>

#include "../core/scalar_math.h"
#include "cpu_vmath.h"

#define VM_W    ((int64_t)(sizeof(VM_VEC) / sizeof(float)))
#define CHUNK   512
#define GELU_K  0.044715f

static inline int64_t chunk_len(int64_t n, int64_t i) { return n - i < CHUNK ? n - i : CHUNK; }

/* y[i] = f(x[i]), i < n, a vector at a time; the tail through one
 * zero-padded vector */
static inline void map(VM_VEC (*f)(VM_VEC), float *y, const float *x, int64_t n) {
    int64_t i = 0;
    VM_VEC v;
    for (; i + VM_W <= n; i += VM_W) {
        memcpy(&v, x + i, sizeof v);
        v = f(v);
        memcpy(y + i, &v, sizeof v);
    }
    if (i < n) {
        float t[VM_W];
        memset(t, 0, sizeof t);
        memcpy(t, x + i, (size_t)(n - i) * sizeof *t);
        memcpy(&v, t, sizeof v);
        v = f(v);
        memcpy(t, &v, sizeof v);
        memcpy(y + i, t, (size_t)(n - i) * sizeof *t);
    }
}

static void vm_exp(float *y, const float *x, int64_t n) { map(VM_EXP, y, x, n); }
static void vm_tanh(float *y, const float *x, int64_t n) { map(VM_TANH, y, x, n); }

static void vm_sigmoid(float *y, const float *x, int64_t n) {
    _Alignas(64) float a[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = chunk_len(n, i);
        const float *xc = x + i;
        for (int64_t j = 0; j < m; j++) a[j] = -fabsf(xc[j]);
        map(VM_EXP, a, a, m);
        for (int64_t j = 0; j < m; j++) y[i + j] = (xc[j] >= 0.0f ? 1.0f : a[j]) / (1.0f + a[j]);
    }
}

/* gelu's u, which has the sign of x */
static inline float gelu_u(float x) { return DG_GELU_C * (x + GELU_K * x * x * x); }

/* a[j] = exp(-2 |u(x[j])|), j < m: the one exponential gelu and its
 * derivative are built from */
static void gelu_exp(float *a, const float *x, int64_t m) {
    for (int64_t j = 0; j < m; j++) a[j] = -2.0f * fabsf(gelu_u(x[j]));
    map(VM_EXP, a, a, m);
}

static void vm_gelu(float *y, const float *x, int64_t n) {
    _Alignas(64) float a[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = chunk_len(n, i);
        const float *xc = x + i;
        gelu_exp(a, xc, m);
        for (int64_t j = 0; j < m; j++) {
            float v = xc[j];
            y[i + j] = (v >= 0.0f ? v : v * a[j]) / (1.0f + a[j]);
        }
    }
}

static void vm_gelu_backward(float *dx, const float *dy, const float *x, int64_t n) {
    _Alignas(64) float a[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = chunk_len(n, i);
        const float *xc = x + i;
        gelu_exp(a, xc, m);
        for (int64_t j = 0; j < m; j++) {
            float v = xc[j], e = a[j], r = 1.0f / (1.0f + e); /* one division: the slow part */
            float s = v >= 0.0f ? r : e * r, q = e * r * r;
            float du = DG_GELU_C * (1.0f + 3.0f * GELU_K * v * v);
            /* q is 0 once |u| is past ~52, where x u' may be inf: 0 * inf
             * would be NaN where the derivative is 0 or 1 */
            dx[i + j] = dy[i + j] * (s + (q == 0.0f ? 0.0f : 2.0f * v * du * q));
        }
    }
}

static float vm_max(const float *x, int64_t n, float a) {
    float mx = a * x[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 1; j < n; j++) {
        float v = a * x[j];
        mx = v > mx ? v : mx;
    }
    return mx;
}

/* the sum of t[0, m), m <= CHUNK, which it overwrites: zero-padded to a
 * power of two, folded in halves down to one vector's width (pairwise
 * summation, at most log2(CHUNK / 4) = 7 roundings per term), the last
 * lanes added in double. A running sum, in float or double, would be one
 * long chain of dependent additions (3-4 cycles each, per vector). */
static inline double chunk_sum(float *t, int64_t m) {
    int64_t p = VM_W;
    while (p < m) p *= 2;
    for (int64_t j = m; j < p; j++) t[j] = 0.0f;
    for (; p > VM_W; p /= 2)
        for (int64_t j = 0; j < p / 2; j++) t[j] += t[j + p / 2];
    double sum = 0.0;
    for (int64_t j = 0; j < VM_W; j++) sum += t[j];
    return sum;
}

static double vm_exp_sum(float *y, const float *x, int64_t n, float a, float b) {
    _Alignas(64) float t[CHUNK];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = chunk_len(n, i);
        for (int64_t j = 0; j < m; j++) t[j] = a * x[i + j] - b;
        map(VM_EXP, t, t, m);
        if (y) memcpy(y + i, t, (size_t)m * sizeof *t);
        sum += chunk_sum(t, m);
    }
    return sum;
}

static void vm_exp_scaled(float *y, const float *x, int64_t n, float a, float b, float s) {
    _Alignas(64) float t[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = chunk_len(n, i);
        for (int64_t j = 0; j < m; j++) t[j] = a * x[i + j] - b;
        map(VM_EXP, t, t, m);
        for (int64_t j = 0; j < m; j++) y[i + j] = s * t[j];
    }
}

static void vm_scale(float *y, int64_t n, float s) {
    for (int64_t j = 0; j < n; j++) y[j] *= s;
}

const dg_vmath VM_TABLE = {
    .name = VM_NAME,
    .exp = vm_exp,
    .tanh = vm_tanh,
    .sigmoid = vm_sigmoid,
    .gelu = vm_gelu,
    .gelu_backward = vm_gelu_backward,
    .max = vm_max,
    .exp_sum = vm_exp_sum,
    .exp_scaled = vm_exp_scaled,
    .scale = vm_scale,
};
