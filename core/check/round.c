/* round.c: see round.h. */
#include "core/check/round.h"

#include "../dtype_convert.h"

void dg_check_round(dg_dtype t, float *x, uint16_t *lo, size_t n) {
    if (t == DG_BF16)
        for (size_t i = 0; i < n; i++) x[i] = dg__bf16_to_f32(lo[i] = dg__f32_to_bf16(x[i]));
    else if (t == DG_F16)
        for (size_t i = 0; i < n; i++) x[i] = dg__f16_to_f32(lo[i] = dg__f32_to_f16(x[i]));
}
