/* error.c: see error.h */
#include "core/check/error.h"

#include <float.h>
#include <math.h>

double dg_check_rel_err(double abs_err, double ref_max, double scale) {
    if (!(abs_err <= DBL_MAX)) return INFINITY; /* NaN or infinite */
    if (abs_err == 0) return 0;
    double den = fmax(fabs(ref_max), DG_CHECK_ABS_FLOOR * fabs(scale));
    return den > 0 ? abs_err / den : INFINITY;
}
