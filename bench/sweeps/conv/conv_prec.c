/* conv_prec.c: the conv sweep's error and tolerance per precision
 * (conv_prec.h). */
#include "sweeps/conv/conv_prec.h"

#include <math.h>

#include "core/check/round.h"

static float widen(dg_dtype t, uint16_t h) { return dg_check_widen(t, h); }

/* Half the step from |v| to the next value of t away from zero: every
 * value within it of v rounds to v (below a power of two the step down is
 * half as large, so this errs by at most a factor 2 on the generous side) */
static double half_step(dg_dtype t, uint16_t h) {
    uint16_t a = (uint16_t)(h & 0x7fffu);
    return 0.5 * ((double)widen(t, (uint16_t)(a + 1)) - (double)widen(t, a));
}

double conv_prec_error(const conv_sample *s, int n, const void *out, dg_dtype t) {
    if (t != DG_BF16 && t != DG_F16) return conv_check_error(s, n, out);
    const uint16_t *o = out;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        uint16_t h = o[s[i].index];
        double v = (double)widen(t, h);
        if (!isfinite(v)) return INFINITY;
        double e = fmax(0, fabs(v - s[i].exact) - half_step(t, h));
        double rel = s[i].abs_sum > 0 ? e / s[i].abs_sum : e;
        worst = rel > worst ? rel : worst;
    }
    return worst;
}

/* fp32: the float32 tolerance (conv_check.h). tf32: the tensor cores
 * round both operands of each product to a 10-bit significand (unit
 * roundoff 2^-11 each), so each term is off by at most 2^-10 of itself
 * and the sum by 2^-10 of sum|terms|, on top of the float32 sums.
 * bf16, fp16: the operands are exact after rounding and so are their
 * products in float32; what is left is the float32 accumulation, as in
 * fp32 on the CPU (round to nearest). The GPU's tensor cores need not
 * round each partial sum to nearest: errors biased one way grow with the
 * partial sums (~ sqrt(j) of a term at the j-th), ~ sqrt(K) u of sum|terms|
 * over K terms (u = 2^-24; 7.5e-5 at backward-weight's K = 1.6M), the GPU
 * rows' tolerance where that is larger. An unrounded reference is off by
 * ~ u_dtype / sqrt(K) of sum|terms| (bf16 2^-8, fp16 2^-11: 2.3e-4 and
 * 2.9e-5 at K = 288), a missing tap or chunk by ~ 1 / sqrt(K). */
#define UNIT_ROUNDOFF_F32 0x1p-24
#define TF32_TERM_ERR     0x1p-10

double conv_prec_tol(dg_precision p, int64_t terms, bool gpu) {
    switch (p) {
    case DG_PREC_FP32: return CONV_CHECK_TOL;
    case DG_PREC_TF32: return CONV_CHECK_TOL + TF32_TERM_ERR;
    case DG_PREC_BF16: case DG_PREC_FP16: break;
    }
    return gpu ? fmax(CONV_CHECK_TOL, sqrt((double)terms) * UNIT_ROUNDOFF_F32) : CONV_CHECK_TOL;
}
