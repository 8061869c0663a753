/* cpu_convert.h: float32 <-> bf16 / f16 over whole arrays, by vector
 * instructions where the CPU has them, bit for bit the scalar conversions
 * of core/dtype_convert.h (round to nearest even, NaN rules included).
 * Paths, chosen at run time (the build stays baseline x86-64):
 *   avx512: AVX512-BF16 (vcvtneps2bf16) for bf16 narrowing, AVX512F's
 *           vcvtps2ph/vcvtph2ps for f16, 16 floats a step;
 *   avx2:   F16C for f16, AVX2 integer rounding for bf16, 8 a step;
 *   scalar: dtype_convert.h, also the tails of the others.
 * Serial: callers split the work over threads. */
#ifndef DG_CPU_CONVERT_H
#define DG_CPU_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/graph.h"

typedef enum dg_cvt_path { DG_CVT_SCALAR, DG_CVT_AVX2, DG_CVT_AVX512 } dg_cvt_path;

bool        dg__cvt_runs(dg_cvt_path p); /* the CPU (and OS) has p's instructions */
dg_cvt_path dg__cvt_best(void);
const char *dg__cvt_path_name(dg_cvt_path p);

/* n values of dtype t (bf16 or f16) at h widened into y (exact); n floats
 * of x rounded to t into h. _on takes the path (one that runs). */
void dg__cvt_widen_on(dg_cvt_path p, dg_dtype t, const uint16_t *h, float *y, int64_t n);
void dg__cvt_narrow_on(dg_cvt_path p, dg_dtype t, const float *x, uint16_t *h, int64_t n);
void dg__cvt_widen(dg_dtype t, const uint16_t *h, float *y, int64_t n);
void dg__cvt_narrow(dg_dtype t, const float *x, uint16_t *h, int64_t n);

#endif
