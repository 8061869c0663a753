/* cpu_vmath.c: the baseline tier of cpu_vmath.h (SSE2, which every x86-64
 * has, through SLEEF's 4-wide dispatcher) and the choice of tier. The
 * choice lives in this file because it is compiled for baseline x86-64:
 * code of the AVX files may use their instructions anywhere. */
#include <emmintrin.h>

#define VM_VEC   __m128
#define VM_EXP   Sleef_expf4_u10
#define VM_TANH  Sleef_tanhf4_u10
#define VM_TABLE dg__vmath_sse2
#define VM_NAME  "sse2"
#include "cpu_vmath_impl.h"

/* __builtin_cpu_supports also asks the OS (XGETBV) whether it saves the
 * vector registers of that width */
bool dg__vmath_runs(const dg_vmath *m) {
    if (m == &dg__vmath_avx512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    if (m == &dg__vmath_avx2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return m == &dg__vmath_sse2;
}

const dg_vmath *dg__vmath(void) {
    if (dg__vmath_runs(&dg__vmath_avx512)) return &dg__vmath_avx512;
    if (dg__vmath_runs(&dg__vmath_avx2)) return &dg__vmath_avx2;
    return &dg__vmath_sse2;
}
