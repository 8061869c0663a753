/* cpu_convert.c: the paths of cpu_convert.h. Each vector function carries
 * its instruction sets as a target attribute, so this file compiles for
 * baseline x86-64 and dg__cvt_runs decides at run time what may be called.
 *
 * Where the hardware's rule differs from dtype_convert.h's, the vector
 * code patches the lanes concerned (the scalar rule follows the GPU's
 * __float2bfloat16_rn / __float2half_rn):
 *   - NaN narrowed: vcvtps2ph and vcvtneps2bf16 keep the payload's top
 *     bits; the rule (and the GPU) gives the canonical 0x7fff;
 *   - a float32 subnormal narrowed to bf16: vcvtneps2bf16 reads it as zero
 *     whatever MXCSR says; bf16 has float32's exponent range, so it has a
 *     subnormal near it, which the rule (and the GPU) keeps.
 * vcvtps2ph under MXCSR.DAZ reads a float32 subnormal as a signed zero,
 * which is also its f16 value (every one lies below 2^-25), and it never
 * flushes an f16 subnormal result; vcvtph2ps ignores DAZ and quiets a
 * signalling NaN as the rule does (test_convert runs both MXCSR modes). */
#include <cpuid.h>
#include <immintrin.h>

#include "../core/dtype_convert.h"
#include "cpu_convert.h"

#define CVT_AVX2   __attribute__((target("avx2,f16c")))
#define CVT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

static void widen_scalar(dg_dtype t, const uint16_t *h, float *y, int64_t n) {
    if (t == DG_BF16)
        for (int64_t i = 0; i < n; i++) y[i] = dg__bf16_to_f32(h[i]);
    else
        for (int64_t i = 0; i < n; i++) y[i] = dg__f16_to_f32(h[i]);
}

static void narrow_scalar(dg_dtype t, const float *x, uint16_t *h, int64_t n) {
    if (t == DG_BF16)
        for (int64_t i = 0; i < n; i++) h[i] = dg__f32_to_bf16(x[i]);
    else
        for (int64_t i = 0; i < n; i++) h[i] = dg__f32_to_f16(x[i]);
}

/* ---- AVX2 + F16C: 8 values a step ------------------------------------ */

CVT_AVX2 static void widen_avx2(dg_dtype t, const uint16_t *h, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(h + i));
        __m256 f = t == DG_BF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16))
                                : _mm256_cvtph_ps(v);
        _mm256_storeu_ps(y + i, f);
    }
    widen_scalar(t, h + i, y + i, n - i);
}

/* u's top 16 bits rounded to nearest even, NaN lanes the canonical NaN;
 * 32-bit lanes holding 16-bit results */
CVT_AVX2 static __m256i bf16_round_avx2(__m256i u) {
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fff), nan);
}

CVT_AVX2 static void narrow_avx2(dg_dtype t, const float *x, uint16_t *h, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_loadu_ps(x + i);
        __m128i r;
        if (t == DG_BF16) {
            /* packus interleaves 128-bit halves: [r0..3 r0..3 | r4..7 r4..7];
             * qwords 0 and 2 are the 8 results in order */
            __m256i b = bf16_round_avx2(_mm256_castps_si256(f));
            r = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(b, b), 0x08));
        } else {
            __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
            __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
            r = _mm_blendv_epi8(_mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT), _mm_set1_epi16(0x7fff), nan16);
        }
        _mm_storeu_si128((__m128i *)(h + i), r);
    }
    narrow_scalar(t, x + i, h + i, n - i);
}

/* ---- AVX-512 (F, BW, VL, BF16): 16 values a step --------------------- */

CVT_AVX512 static void widen_avx512(dg_dtype t, const uint16_t *h, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(h + i));
        __m512 f = t == DG_BF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16))
                                : _mm512_cvtph_ps(v);
        _mm512_storeu_ps(y + i, f);
    }
    widen_scalar(t, h + i, y + i, n - i);
}

CVT_AVX512 static __m256i bf16_narrow16(__m512 f) {
    __m512i u = _mm512_castps_si512(f);
    __m256i r = (__m256i)_mm512_cvtneps_pbh(f);
    __mmask16 sub = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000)) &
                    _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x007fffff));
    if (sub) { /* rare: the integer rounding for those lanes */
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i ri = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
        r = _mm256_mask_blend_epi16(sub, r, _mm512_cvtepi32_epi16(ri));
    }
    return r;
}

CVT_AVX512 static void narrow_avx512(dg_dtype t, const float *x, uint16_t *h, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 f = _mm512_loadu_ps(x + i);
        __m256i r = t == DG_BF16 ? bf16_narrow16(f) : _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm256_mask_blend_epi16(_mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), r, _mm256_set1_epi16(0x7fff));
        _mm256_storeu_si256((__m256i *)(h + i), r);
    }
    narrow_scalar(t, x + i, h + i, n - i);
}

/* ---- the choice ------------------------------------------------------- */

/* CPUID.1:ECX's F16C bit (clang 14's __builtin_cpu_supports has no name
 * for it) */
static bool has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* __builtin_cpu_supports also asks the OS (XGETBV) whether it saves the
 * registers of that width (F16C's are AVX2's) */
bool dg__cvt_runs(dg_cvt_path p) {
    switch (p) {
    case DG_CVT_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
    case DG_CVT_AVX2: return __builtin_cpu_supports("avx2") && has_f16c();
    case DG_CVT_SCALAR: return true;
    }
    return false;
}

dg_cvt_path dg__cvt_best(void) {
    if (dg__cvt_runs(DG_CVT_AVX512)) return DG_CVT_AVX512;
    if (dg__cvt_runs(DG_CVT_AVX2)) return DG_CVT_AVX2;
    return DG_CVT_SCALAR;
}

const char *dg__cvt_path_name(dg_cvt_path p) {
    switch (p) {
    case DG_CVT_AVX512: return "avx512";
    case DG_CVT_AVX2: return "avx2";
    case DG_CVT_SCALAR: break;
    }
    return "scalar";
}

void dg__cvt_widen_on(dg_cvt_path p, dg_dtype t, const uint16_t *h, float *y, int64_t n) {
    switch (p) {
    case DG_CVT_AVX512: widen_avx512(t, h, y, n); return;
    case DG_CVT_AVX2: widen_avx2(t, h, y, n); return;
    case DG_CVT_SCALAR: break;
    }
    widen_scalar(t, h, y, n);
}

void dg__cvt_narrow_on(dg_cvt_path p, dg_dtype t, const float *x, uint16_t *h, int64_t n) {
    switch (p) {
    case DG_CVT_AVX512: narrow_avx512(t, x, h, n); return;
    case DG_CVT_AVX2: narrow_avx2(t, x, h, n); return;
    case DG_CVT_SCALAR: break;
    }
    narrow_scalar(t, x, h, n);
}

void dg__cvt_widen(dg_dtype t, const uint16_t *h, float *y, int64_t n) { dg__cvt_widen_on(dg__cvt_best(), t, h, y, n); }

void dg__cvt_narrow(dg_dtype t, const float *x, uint16_t *h, int64_t n) {
    dg__cvt_narrow_on(dg__cvt_best(), t, x, h, n);
}
