/* cpu_vmath_avx512.c: the AVX-512F tier of cpu_vmath.h (compiled with
 * -mavx512f -mfma; dg__vmath runs it only where the CPU has both) */
#include <immintrin.h>

#define VM_VEC   __m512
#define VM_EXP   Sleef_expf16_u10avx512f
#define VM_TANH  Sleef_tanhf16_u10avx512f
#define VM_TABLE dg__vmath_avx512
#define VM_NAME  "avx512"
#include "cpu_vmath_impl.h"
