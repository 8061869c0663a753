/* rng.h: a small seeded generator (splitmix64), identical on every machine,
 * used for parameter initialisation, data shuffling and test inputs. A NULL
 * generator draws 0 and sets the last error. */
#ifndef DG_RNG_H
#define DG_RNG_H

#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_rng { uint64_t s; } dg_rng;

static inline dg_rng dg_rng_new(uint64_t seed) {
    dg_rng r; /* no compound literal: the header compiles as C++ too */
    r.s = seed ^ 0x9E3779B97F4A7C15ull;
    return r;
}

static inline uint64_t dg_rng_u64(dg_rng *r) {
    if (!r) {
        dg_fail(DG_ERR_INVALID, "dg_rng: NULL generator");
        return 0;
    }
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) with 53 random bits; 2^-53 written as a quotient (a
 * hexadecimal float is C++17 and later) */
static inline double dg_rng_uniform(dg_rng *r) {
    return (double)(dg_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* standard normal (Box-Muller, one value per call) */
double dg_rng_normal(dg_rng *r);

#ifdef __cplusplus
}
#endif
#endif
