/* round.h: float32 values as a 2-byte dtype holds them, rounded to
 * nearest, ties to even: the rounding of dg_cast and of the backends'
 * conversions (core/dtype_convert.h, which stays behind the installed
 * headers). For checks whose inputs are rounded before the kernel reads
 * them: the float64 side starts from the very values the kernel got (the
 * gemm sweep's bf16 and fp16 rows). */
#ifndef DG_CHECK_ROUND_H
#define DG_CHECK_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include "../graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DG_BF16, DG_F16: each x[i] rounded to t, its 2 bytes into lo[i] (lo
 * NULL: not kept) and its value (exact in float32) back into x[i]; any
 * other dtype: nothing */
void dg_check_round(dg_dtype t, float *x, uint16_t *lo, size_t n);
/* The value of the 2 bytes h of a DG_BF16 (else DG_F16) element, exact in
 * float32 */
float dg_check_widen(dg_dtype t, uint16_t h);

#ifdef __cplusplus
}
#endif
#endif
