/* dtype_convert.h: float32 <-> bfloat16 and IEEE binary16, scalar, on the
 * host. Rounding to nearest, ties to even, as the GPU's conversions
 * (__float2bfloat16_rn, __float2half_rn) do: a value past the largest
 * finite one rounds to inf, subnormals are kept (no flush, whatever
 * MXCSR says), a NaN narrows to the canonical 0x7fff (sign and payload
 * dropped, as CUDA's conversions give). Widening is exact; an f16 NaN
 * widens quiet with its payload (as IEEE 754 and F16C's vcvtph2ps do).
 * Used by the CPU backend's cast and matmul, the float64 check and the
 * tests; cpu_backend/cpu_convert.h gives the same bits by vector
 * instructions over whole arrays. */
#ifndef DG_DTYPE_CONVERT_H
#define DG_DTYPE_CONVERT_H

#include <stdint.h>
#include <string.h>

static inline uint32_t dg__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float dg__f32_of_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t dg__f32_to_bf16(float f) {
    uint32_t u = dg__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu; /* NaN: canonical */
    u += 0x7fffu + (u >> 16 & 1u); /* the 16 bits dropped, rounded to even */
    return (uint16_t)(u >> 16);
}

static inline float dg__bf16_to_f32(uint16_t h) { return dg__f32_of_bits((uint32_t)h << 16); }

static inline uint16_t dg__f32_to_f16(float f) {
    uint32_t u = dg__f32_bits(f), sign = u >> 16 & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return 0x7fffu;                     /* NaN: canonical */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (halfway past 65504): inf */
    if (a < 0x38800000u) {                                   /* below 2^-14: subnormal in f16 */
        if (a <= 0x33000000u) return (uint16_t)sign;         /* <= 2^-25: 0 (2^-25 ties to even 0) */
        /* |f| = m 2^(e - 150); in units of f16's least step 2^-24: m >> (126 - e) */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)e; /* 14..24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r); /* r = 0x400 is the least normal: the right bits */
    }
    uint32_t r = a - 0x38000000u; /* exponent rebased from 127 to 15 */
    uint32_t low = r & 0x1fffu;
    r >>= 13;
    if (low > 0x1000u || (low == 0x1000u && (r & 1u))) r++; /* a carry into the exponent is right */
    return (uint16_t)(sign | r);
}

static inline float dg__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return dg__f32_of_bits(sign | 0x7f800000u | (m ? 0x400000u : 0) | m << 13); /* NaN quiet */
    if (e) return dg__f32_of_bits(sign | (e + 112) << 23 | m << 13);
    float v = (float)m * 0x1p-24f; /* subnormal or zero: exact */
    return dg__f32_of_bits(dg__f32_bits(v) | sign);
}

#endif
