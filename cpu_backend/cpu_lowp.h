/* cpu_lowp.h: loads and stores of float32, bf16 or f16 storage for the CPU
 * kernels that compute in float32 (elementwise, reductions, softmax, layer
 * norm, a matmul's rounded output). Serial: each is called by one thread
 * on its own block or row. Widening is exact; narrowing rounds to nearest
 * even (dtype_convert.h, the GPU's __float2bfloat16_rn/__float2half_rn).
 * The bulk loads and stores go through cpu_convert.h's vector code, the
 * same bits. */
#ifndef DG_CPU_LOWP_H
#define DG_CPU_LOWP_H

#include <stdint.h>

#include "../core/dtype_convert.h"
#include "../core/graph.h"
#include "cpu_convert.h"

/* element i of a tensor of dtype t (f32, bf16 or f16) at p, as float32 */
static inline float dg__lp_ld(dg_dtype t, const void *p, int64_t i) {
    switch (t) {
    case DG_BF16: return dg__bf16_to_f32(((const uint16_t *)p)[i]);
    case DG_F16:  return dg__f16_to_f32(((const uint16_t *)p)[i]);
    case DG_F32: case DG_I32: break;
    }
    return ((const float *)p)[i];
}

/* element i of a tensor of dtype t at p = v, rounded to t */
static inline void dg__lp_st(dg_dtype t, void *p, int64_t i, float v) {
    switch (t) {
    case DG_BF16: ((uint16_t *)p)[i] = dg__f32_to_bf16(v); return;
    case DG_F16:  ((uint16_t *)p)[i] = dg__f32_to_f16(v); return;
    case DG_F32: case DG_I32: break;
    }
    ((float *)p)[i] = v;
}

/* elements [off, off + n) of p (dtype t) as float32: p's own floats for
 * f32, else widened into buf (n floats) */
static inline const float *dg__lp_load(dg_dtype t, const void *p, int64_t off, int64_t n, float *buf) {
    if (t == DG_F32) return (const float *)p + off;
    dg__cvt_widen(t, (const uint16_t *)p + off, buf, n);
    return buf;
}

/* where a kernel writes elements [off, off + n) of p (dtype t) in float32:
 * p's own floats for f32, else buf, which dg__lp_store then rounds into p */
static inline float *dg__lp_dst(dg_dtype t, void *p, int64_t off, float *buf) {
    return t == DG_F32 ? (float *)p + off : buf;
}

static inline void dg__lp_store(dg_dtype t, void *p, int64_t off, int64_t n, const float *buf) {
    if (t == DG_F32) return; /* written in place (dg__lp_dst) */
    dg__cvt_narrow(t, buf, (uint16_t *)p + off, n);
}

#endif
