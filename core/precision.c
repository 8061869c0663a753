/* precision.c: the precisions' names and operand dtypes (precision.h). */
#include "precision.h"

#include <string.h>

#include "status_internal.h"

const char *dg_precision_name(dg_precision p) {
    switch (p) {
    case DG_PREC_FP32: return "fp32";
    case DG_PREC_TF32: return "tf32";
    case DG_PREC_BF16: return "bf16";
    case DG_PREC_FP16: return "fp16";
    }
    return "?";
}

dg_status dg_precision_parse(const char *s, dg_precision *out) {
    if (!s || !out) return dg__fail(DG_ERR_INVALID, "dg_precision_parse: NULL argument");
    for (int p = 0; p < DG_PREC_COUNT; p++)
        if (strcmp(s, dg_precision_name((dg_precision)p)) == 0) {
            *out = (dg_precision)p;
            return DG_OK;
        }
    return dg__fail(DG_ERR_INVALID, "unknown precision '%s' (fp32, tf32, bf16 or fp16)", s);
}

dg_dtype dg_precision_dtype(dg_precision p) {
    switch (p) {
    case DG_PREC_BF16: return DG_BF16;
    case DG_PREC_FP16: return DG_F16;
    case DG_PREC_FP32: case DG_PREC_TF32: break;
    }
    return DG_F32;
}
