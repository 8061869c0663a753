#include "rng.h"

#include <math.h>

#include "status_internal.h"

double dg_rng_normal(dg_rng *r) {
    if (!r) {
        dg__fail(DG_ERR_INVALID, "dg_rng: NULL generator");
        return 0;
    }
    double u1 = dg_rng_uniform(r), u2 = dg_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
