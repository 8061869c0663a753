/* scalar_math.h: the per-element formulas of the elementwise ops, written
 * once for the CPU kernels and the CUDA kernels (compiled as __host__
 * __device__ there). The float64 reference in tests/ keeps its own. */
#ifndef DG_SCALAR_MATH_H
#define DG_SCALAR_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define DG_HD __host__ __device__ __forceinline__
#else
#define DG_HD static inline
#endif

#define DG_GELU_C 0.7978845608028654f /* sqrt(2/pi) */

DG_HD float dg_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* gelu(x) = 0.5 x (1 + tanh(c (x + 0.044715 x^3))) */
DG_HD float dg_geluf(float x) {
    float u = DG_GELU_C * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

DG_HD float dg_gelu_gradf(float x) {
    float u = DG_GELU_C * (x + 0.044715f * x * x * x);
    float t = tanhf(u), s = 1.0f - t * t;
    float du = DG_GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
    /* once tanh saturates s is 0, and past |x| = 1.8e19 du is inf: 0 * inf
     * would be NaN where the derivative is 0 or 1 */
    return 0.5f * (1.0f + t) + (s == 0.0f ? 0.0f : 0.5f * x * s * du);
}

#endif
