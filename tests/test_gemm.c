/* test_gemm.c: the CPU sgemm implementations against a float64 product, on
 * odd sizes around the blocking factors and every transpose combination. */
#include <math.h>
#include <omp.h>

#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "test_util.h"

Test(gemm, own_naive_openblas_match_float64) {
    const int sizes[][3] = {{1, 1, 1}, {7, 5, 3}, {97, 33, 17}, {6, 16, 300}, {101, 259, 257}, {200, 13, 513}};
    uint64_t seed = test_seed();
    dg_rng r = dg_rng_new(seed);
    float *pack = malloc(dg_cpu_gemm_own_pack_floats(omp_get_max_threads()) * sizeof(float));
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            int m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
            float *A = malloc(sizeof(float) * m * k), *B = malloc(sizeof(float) * k * n);
            float *C = malloc(sizeof(float) * m * n);
            double *R = malloc(sizeof(double) * m * n);
            for (int i = 0; i < m * k; i++) A[i] = (float)(2 * dg_rng_uniform(&r) - 1);
            for (int i = 0; i < k * n; i++) B[i] = (float)(2 * dg_rng_uniform(&r) - 1);
            ref_sgemm(ta, tb, m, n, k, A, B, R);
            int lda = ta ? m : k, ldb = tb ? k : n;
            for (int impl = 0; impl < 3; impl++) {
                for (int i = 0; i < m * n; i++) C[i] = NAN; /* every element must be written */
                if (impl == 0) dg_cpu_sgemm_own(ta, tb, m, n, k, A, lda, B, ldb, C, n, pack);
                if (impl == 1) dg_cpu_sgemm_naive(ta, tb, m, n, k, A, lda, B, ldb, C, n);
                if (impl == 2) dg_cpu_sgemm_openblas(ta, tb, m, n, k, A, lda, B, ldb, C, n);
                cmp_stats st = cmp_f32(C, R, (int64_t)m * n);
                char name[64];
                snprintf(name, sizeof name, "%s %dx%dx%d ta=%d tb=%d", impl == 0 ? "own" : impl == 1 ? "naive" : "openblas",
                         m, n, k, ta, tb);
                ASSERT_CLOSE(st, 1e-5, "sgemm", name, seed);
            }
            free(A); free(B); free(C); free(R);
        }
    free(pack);
}
