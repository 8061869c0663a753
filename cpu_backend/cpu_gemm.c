/* cpu_gemm.c: row-major sgemm three ways, C[m,n] = op(A)[m,k] op(B)[k,n],
 * or C += op(A) op(B) when accumulate is set (a sum over chunks).
 *
 * own: the GotoBLAS/BLIS loop order. For each NC-column panel of C and each
 * KC slice of k, the threads pack the KC x NC panel of B once, together,
 * into a shared buffer (NR-column micro-panels, contiguous along k; it
 * stays in L3); then the MC-row blocks of C are shared out, each thread
 * packing its MC x KC block of A (MR-row micro-panels) and sweeping the B
 * micro-panels (outer, so one stays in L1) and the A micro-panels (inner)
 * with a register-blocked MR x NR micro kernel. Packing also absorbs the
 * transposes. The micro kernel
 * is compiled for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and baseline
 * x86-64, chosen at load time by the CPU's features (a clone named after a
 * CPU model, arch=skylake-avx512, is only picked on that very model), so the
 * binary runs on any x86-64 machine and still uses its vector units. */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "cpu_backend.h"

#define MR 6
#define NR 16
#define MC 96   /* multiple of MR; an A block, 96 KB, stays in L2          */
#define NC 2048 /* multiple of NR; the shared B panel, 2 MB, stays in L3    */
#define KC 256

/* the shared B panel, then one A block per thread */
size_t dg_cpu_gemm_own_pack_floats(int threads) {
    return (size_t)KC * NC + (size_t)(threads > 0 ? threads : 1) * MC * KC;
}

void dg_cpu_sgemm_openblas(bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                           const float *B, int ldb, float *C, int ldc, bool accumulate) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
                1.0f, A, lda, B, ldb, accumulate ? 1.0f : 0.0f, C, ldc);
}

void dg_cpu_sgemm_naive(bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                        const float *B, int ldb, float *C, int ldc, bool accumulate) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++)
                acc += (ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
            C[i * ldc + j] = accumulate ? C[i * ldc + j] + acc : acc;
        }
}

/* pa[(panel * kc + p) * MR + r] = op(A)(i0 + panel*MR + r, p0 + p), zero-padded */
static void pack_a(bool ta, const float *A, int lda, int i0, int mc, int p0, int kc, int m, float *pa) {
    for (int ip = 0; ip < mc; ip += MR)
        for (int p = 0; p < kc; p++)
            for (int r = 0; r < MR; r++) {
                int i = i0 + ip + r, q = p0 + p;
                *pa++ = i < m ? (ta ? A[(size_t)q * lda + i] : A[(size_t)i * lda + q]) : 0.0f;
            }
}

/* pb[(panel * kc + p) * NR + c] = op(B)(p0 + p, j0 + panel*NR + c), zero-padded */
static void pack_b(bool tb, const float *B, int ldb, int j0, int nc, int p0, int kc, int n, float *pb) {
    for (int jp = 0; jp < nc; jp += NR)
        for (int p = 0; p < kc; p++)
            for (int c = 0; c < NR; c++) {
                int j = j0 + jp + c, q = p0 + p;
                *pb++ = j < n ? (tb ? B[(size_t)j * ldb + q] : B[(size_t)q * ldb + j]) : 0.0f;
            }
}

/* acc[MR][NR] = sum_p pa[p][:] (outer) pb[p][:], then C (+)= acc inside
 * bounds. One row of the tile is one 16-float vector (a zmm register with
 * AVX-512, two ymm with AVX2), so the MR x NR accumulators stay in registers
 * and each k step is MR broadcasts and MR vector FMAs (this file is built
 * with -ffp-contract=fast so a*b+c becomes an FMA). */
typedef float v16 __attribute__((vector_size(NR * sizeof(float))));

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static void micro_kernel(int kc, const float *restrict pa, const float *restrict pb, float *C, int ldc,
                         int mr, int nr, bool accumulate) {
    v16 acc[MR];
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) acc[r] = (v16){0};
    for (int p = 0; p < kc; p++) {
        v16 b;
        memcpy(&b, pb + (size_t)p * NR, sizeof b);
#pragma GCC unroll 6
        for (int r = 0; r < MR; r++) acc[r] += pa[p * MR + r] * b;
    }
    float out[MR][NR];
    memcpy(out, acc, sizeof out);
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++)
            C[(size_t)r * ldc + c] = accumulate ? C[(size_t)r * ldc + c] + out[r][c] : out[r][c];
}

void dg_cpu_sgemm_own(bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                      const float *B, int ldb, float *C, int ldc, bool accumulate, float *pack) {
    if (k == 0) { /* no products: C is zero, or stays as it is */
        if (accumulate) return;
        for (int i = 0; i < m; i++) memset(C + (size_t)i * ldc, 0, (size_t)n * sizeof *C);
        return;
    }
    float *pb = pack; /* [KC * NC], shared */
#pragma omp parallel
    {
        float *pa = pack + (size_t)KC * NC + (size_t)omp_get_thread_num() * MC * KC;
        for (int j0 = 0; j0 < n; j0 += NC) {
            int nc = n - j0 < NC ? n - j0 : NC;
            for (int p0 = 0; p0 < k; p0 += KC) {
                int kc = k - p0 < KC ? k - p0 : KC;
#pragma omp for schedule(static)
                for (int jp = 0; jp < nc; jp += NR) /* one NR micro-panel each */
                    pack_b(tb, B, ldb, j0 + jp, nc - jp < NR ? nc - jp : NR, p0, kc, n, pb + (size_t)(jp / NR) * kc * NR);
                /* implicit barrier: the panel is complete */
#pragma omp for schedule(dynamic)
                for (int i0 = 0; i0 < m; i0 += MC) {
                    int mc = m - i0 < MC ? m - i0 : MC;
                    pack_a(ta, A, lda, i0, mc, p0, kc, m, pa);
                    for (int jp = 0; jp < nc; jp += NR)
                        for (int ip = 0; ip < mc; ip += MR) {
                            int mr = mc - ip < MR ? mc - ip : MR, nr = nc - jp < NR ? nc - jp : NR;
                            micro_kernel(kc, pa + (size_t)(ip / MR) * kc * MR, pb + (size_t)(jp / NR) * kc * NR,
                                         C + (size_t)(i0 + ip) * ldc + j0 + jp, ldc, mr, nr, accumulate || p0 > 0);
                        }
                }
                /* implicit barrier: nobody still reads the panel when it is repacked */
            }
        }
    }
}
