/* cpu_vmath_avx2.c: the AVX2 + FMA tier of cpu_vmath.h (compiled with
 * -mavx2 -mfma; dg__vmath runs it only where the CPU has both) */
#include <immintrin.h>

#define VM_VEC   __m256
#define VM_EXP   Sleef_expf8_u10avx2
#define VM_TANH  Sleef_tanhf8_u10avx2
#define VM_TABLE dg__vmath_avx2
#define VM_NAME  "avx2"
#include "cpu_vmath_impl.h"
