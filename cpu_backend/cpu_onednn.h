/* cpu_onednn.h: oneDNN's matmul primitive as one of the CPU backend's
 * GEMMs (DG_CPU_GEMM_ONEDNN), compiled only in a build with oneDNN
 * (DG_ONEDNN, which defines DG_HAVE_ONEDNN for cpu_backend.c). A product
 * is a row-major batch of packed C[m,n] = op(A) op(B), A and B of one
 * dtype (f32, bf16; f16 where the library has it), float32 accumulation
 * and float32 output. */
#ifndef DG_CPU_ONEDNN_H
#define DG_CPU_ONEDNN_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/backend.h"

/* one product: op(A) [batch,m,k] (stored [batch,k,m] when ta), op(B)
 * [batch,k,n] (stored [batch,n,k] when tb), C [batch,m,n], all packed */
typedef struct dg_onednn_gemm {
    dg_dtype dtype;    /* the operands'                                        */
    bool     ta, tb;
    int      batch, m, n, k;
    dg_dtype out;      /* C's: DG_F32 (0, the default) or, for bf16 operands,
                          DG_BF16 (the float32 sums rounded once on store)    */
} dg_onednn_gemm;

/* A backend's oneDNN state: engine, stream and the primitive cache. */
typedef struct dg_onednn dg_onednn;

dg_status dg__onednn_new(dg_onednn **out);
void      dg__onednn_free(dg_onednn *o);
/* Finds g's primitive in the cache or creates it (with the calling
 * thread's OpenMP thread count: see cpu_onednn.c). *ok false, and DG_OK,
 * where oneDNN has no implementation of g's dtype on this CPU (2.6 has no
 * f16 matmul on the CPU); remembered, so asking again costs nothing. */
dg_status dg__onednn_prepare(dg_onednn *o, const dg_onednn_gemm *g, bool *ok);
/* C = op(A) op(B) by g's primitive (dg__onednn_prepare first, if not yet
 * done), C of g->out's dtype; DG_ERR_UNSUPPORTED where it said *ok false. */
dg_status dg__onednn_gemm(dg_onednn *o, const dg_onednn_gemm *g, const void *A, const void *B, void *C);
/* Whether oneDNN's bf16 matmul outruns widening the operands for a float32
 * sgemm on this CPU: only where it runs AMX (docs/PERF.md: on AVX512-BF16
 * alone it took 1.4-1.9 times OpenBLAS's sgemm's time, widening 1.0-1.1). */
bool      dg__onednn_bf16_pays(void);
/* primitives created (dtypes without a kernel included) and products run
 * since o was made; o NULL: 0 and 0 */
void      dg__onednn_counts(const dg_onednn *o, long *created, long *runs);
/* "oneDNN 2.6.3 (CPU runtime: OpenMP; ISA: avx512_core_bf16)" */
const char *dg__onednn_info(char *buf, size_t n);

#endif
