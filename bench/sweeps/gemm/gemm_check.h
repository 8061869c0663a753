/* gemm_check.h: the gemm sweep's check, apart so that tests plant bugs in
 * front of it. Each result C[m,n] = op(A) op(B) is verified by Freivalds'
 * test in float64: y = C x against z = op(A) (op(B) x) for a random x,
 * error = max|y - z| / max|z| (the denominator floored at the scale of z's
 * terms, core/check/error.h). It costs O(mn + nk + mk) instead of the
 * O(mnk) of a reference product, so even 8192^3 is checked. A and B are
 * the operands as the kernel reads them: in bf16 and fp16, the float32
 * values after rounding to the dtype (dg_check_round, core/check/round.h). */
#ifndef DG_BENCH_GEMM_CHECK_H
#define DG_BENCH_GEMM_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/precision.h"
#include "core/status.h"

/* the float64 side of the test of one product: x [n], z [m] */
typedef struct bench_freivalds {
    int     m, n, k;
    double *x, *z;
    double  scale;  /* sqrt(k n) max|A| max|B| max|x|: the size of z's terms */
} bench_freivalds;

/* x drawn from seed, z = op(A) (op(B) x) in float64; A stored [k,m] when
 * ta, B [n,k] when tb. DG_ERR_OOM. */
dg_status bench_freivalds_new(bench_freivalds *f, int m, int n, int k, bool ta, bool tb, const float *A,
                              const float *B, uint64_t seed);
/* max |C x - z| / max(max|z|, scale); infinite where C x is NaN */
double    bench_freivalds_err(const bench_freivalds *f, const float *C);
void      bench_freivalds_free(bench_freivalds *f);

/* The largest error a correct product passes in precision p with k terms
 * summed; `gpu`: by the GPU (tensor cores: see gemm_check.c). */
double    bench_gemm_tol(dg_precision p, int k, bool gpu);

#endif
