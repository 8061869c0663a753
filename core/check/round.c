/* round.c: see round.h. */
#include "core/check/round.h"

#include "../dtype_convert.h"

void dg_check_round(dg_dtype t, float *x, uint16_t *lo, size_t n) {
    for (size_t i = 0; i < n && (t == DG_BF16 || t == DG_F16); i++) {
        uint16_t h = t == DG_BF16 ? dg__f32_to_bf16(x[i]) : dg__f32_to_f16(x[i]);
        if (lo) lo[i] = h;
        x[i] = dg_check_widen(t, h);
    }
}

float dg_check_widen(dg_dtype t, uint16_t h) { return t == DG_BF16 ? dg__bf16_to_f32(h) : dg__f16_to_f32(h); }
