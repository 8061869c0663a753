/* test_gemm.c: the CPU sgemm implementations against a float64 product, on
 * odd sizes around the blocking factors and every transpose combination,
 * writing C and accumulating into it. */
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
                if (impl == 0) dg_cpu_sgemm_own(ta, tb, m, n, k, A, lda, B, ldb, C, n, false, pack);
                if (impl == 1) dg_cpu_sgemm_naive(ta, tb, m, n, k, A, lda, B, ldb, C, n, false);
                if (impl == 2) dg_cpu_sgemm_openblas(ta, tb, m, n, k, A, lda, B, ldb, C, n, false);
                cmp_stats st = cmp_f32(C, R, (int64_t)m * n);
                char name[64];
                snprintf(name, sizeof name, "%s %dx%dx%d ta=%d tb=%d", impl == 0 ? "own" : impl == 1 ? "naive" : "openblas",
                         m, n, k, ta, tb);
                ASSERT_CLOSE(st, 1e-5, "sgemm", name, seed);
                /* accumulate adds the product to C (which holds it): 2 op(A) op(B) */
                if (impl == 0) dg_cpu_sgemm_own(ta, tb, m, n, k, A, lda, B, ldb, C, n, true, pack);
                if (impl == 1) dg_cpu_sgemm_naive(ta, tb, m, n, k, A, lda, B, ldb, C, n, true);
                if (impl == 2) dg_cpu_sgemm_openblas(ta, tb, m, n, k, A, lda, B, ldb, C, n, true);
                for (int i = 0; i < m * n; i++) R[i] *= 2;
                st = cmp_f32(C, R, (int64_t)m * n);
                ASSERT_CLOSE(st, 1e-5, "sgemm accumulate", name, seed);
                for (int i = 0; i < m * n; i++) R[i] /= 2;
            }
            free(A); free(B); free(C); free(R);
        }
    free(pack);
}

/* The backend's matmul can run on each implementation: every matmul row of
 * the op table (transposes, batches, odd sizes), forward and gradients,
 * against the float64 reference with each. */
Test(gemm, backend_matmul_with_each_implementation) {
    uint64_t seed = test_seed();
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    const dg_cpu_gemm impls[] = {DG_CPU_GEMM_OWN, DG_CPU_GEMM_NAIVE, DG_CPU_GEMM_OPENBLAS};
    int rows = 0;
    for (int i = 0; i < dg_n_op_cases; i++) {
        const op_case *c = &dg_op_cases[i];
        if (c->op != DG_OP_MATMUL || c->build) continue;
        rows++;
        case_graph cg;
        case_ref ref;
        ASSERT_OK(case_graph_new(&cg, c, seed));
        ASSERT_OK(case_ref_run(&cg, &ref));
        for (int k = 0; k < 3; k++) {
            dg_cpu_set_gemm(be, impls[k]);
            case_result r;
            ASSERT_OK(case_run(&cg, be, &r));
            char what[64];
            snprintf(what, sizeof what, "cpu gemm impl %d forward", (int)impls[k]);
            ASSERT_CLOSE(cmp_f32(r.out, ref.out, r.n_out), c->tol, what, c->name, seed);
            for (int j = 0; j < c->n_in; j++) {
                snprintf(what, sizeof what, "cpu gemm impl %d grad %d", (int)impls[k], j);
                ASSERT_CLOSE(cmp_f32(r.grad[j], ref.grad[j], r.n_grad[j]), c->tol, what, c->name, seed);
            }
            case_result_free(&r);
        }
        case_ref_free(&ref);
        case_graph_free(&cg);
    }
    cr_assert_geq(rows, 8, "only %d matmul rows in the op table", rows);
    dg_backend_free(be);
}

/* Freivalds' check of C = op(A) op(B) [m, n] (inner k, packed: lda = ta ? m
 * : k, ldb = tb ? k : n): y = C x against z = op(A) (op(B) x) in float64 for
 * a random x, row by row within the rounding bound of a float sum of k
 * products, |y_i - z_i| <= k 2^-24 w_i with w = |op(A)| (|op(B)| |x|)
 * (Higham's gamma_k, FMA or not, in any order of the sum), so a sound bound
 * and not a tuned one. O((m + n) k) work instead of the product's m n k.
 * An element never written (NaN) or written elsewhere fails it. Returns the
 * worst |y_i - z_i| / (k 2^-24 w_i), <= 1 when C passes. */
static double freivalds_ratio(bool ta, bool tb, int m, int n, int k, const float *A, const float *B, const float *C,
                              uint64_t seed) {
    dg_rng r = dg_rng_new(seed ^ 0x5eedu);
    double *x = malloc(sizeof(double) * n), *bx = malloc(sizeof(double) * k), *bax = malloc(sizeof(double) * k);
    for (int j = 0; j < n; j++) x[j] = 2 * dg_rng_uniform(&r) - 1;
    for (int p = 0; p < k; p++) {
        double s = 0, sa = 0;
        for (int j = 0; j < n; j++) {
            double b = tb ? B[(size_t)j * k + p] : B[(size_t)p * n + j];
            s += b * x[j];
            sa += fabs(b) * fabs(x[j]);
        }
        bx[p] = s;
        bax[p] = sa;
    }
    double worst = 0;
    for (int i = 0; i < m; i++) {
        double y = 0, z = 0, w = 0;
        for (int j = 0; j < n; j++) y += (double)C[(size_t)i * n + j] * x[j];
        for (int p = 0; p < k; p++) {
            double a = ta ? A[(size_t)p * m + i] : A[(size_t)i * k + p];
            z += a * bx[p];
            w += fabs(a) * bax[p];
        }
        double bound = (double)k * 0x1p-24 * w + 1e-300, ratio = fabs(y - z) / bound;
        if (!(ratio <= worst)) worst = isnan(ratio) ? INFINITY : ratio;
    }
    free(x);
    free(bx);
    free(bax);
    return worst;
}

/* Shapes that cross every blocking boundary of the own sgemm (cpu_gemm.c:
 * MR 6, NR 16, MC 96, KC 256, NC 2048) with ragged tails: n over one and
 * two B panels (NC), k over two and four slices (KC, where C starts to
 * accumulate), m over MC blocks and MR micro-panels, each transpose,
 * writing and accumulating; OpenBLAS beside it. Checked by Freivalds (the
 * full float64 product would cost m n k). Without n > 2048 the own sgemm's
 * C offset could skip the panel's column (j0) unseen. */
Test(gemm, own_and_openblas_across_every_blocking_boundary) {
    const int sizes[][3] = {{103, 2069, 513}, {7, 4099, 257}, {193, 33, 1025}, {97, 2048 + 16, 256}};
    uint64_t seed = test_seed();
    dg_rng r = dg_rng_new(seed);
    float *pack = malloc(dg_cpu_gemm_own_pack_floats(omp_get_max_threads()) * sizeof(float));
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
        float *A = malloc(sizeof(float) * m * k), *B = malloc(sizeof(float) * k * n);
        float *C = malloc(sizeof(float) * m * n), *C2 = malloc(sizeof(float) * m * n);
        for (int i = 0; i < m * k; i++) A[i] = (float)(2 * dg_rng_uniform(&r) - 1);
        for (int i = 0; i < k * n; i++) B[i] = (float)(2 * dg_rng_uniform(&r) - 1);
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            int lda = ta ? m : k, ldb = tb ? k : n;
            for (int impl = 0; impl < 2; impl++) {
                const char *name = impl ? "openblas" : "own";
                for (int i = 0; i < m * n; i++) C[i] = NAN; /* every element must be written */
                if (impl) dg_cpu_sgemm_openblas(ta, tb, m, n, k, A, lda, B, ldb, C, n, false);
                else dg_cpu_sgemm_own(ta, tb, m, n, k, A, lda, B, ldb, C, n, false, pack);
                double q = freivalds_ratio(ta, tb, m, n, k, A, B, C, seed + (uint64_t)t);
                cr_assert(q <= 1.0, "%s %dx%dx%d ta=%d tb=%d [seed %llu]: C x is %.3g times the rounding bound "
                          "away from op(A) op(B) x", name, m, n, k, ta, tb, (unsigned long long)seed, q);
                /* accumulate: C = op(A) op(B) + C2 with C2 = -op(A) op(B) + C_prev, checked as C - C_prev */
                for (int i = 0; i < m * n; i++) C2[i] = C[i];
                if (impl) dg_cpu_sgemm_openblas(ta, tb, m, n, k, A, lda, B, ldb, C, n, true);
                else dg_cpu_sgemm_own(ta, tb, m, n, k, A, lda, B, ldb, C, n, true, pack);
                for (int i = 0; i < m * n; i++) C[i] -= C2[i];
                q = freivalds_ratio(ta, tb, m, n, k, A, B, C, seed + (uint64_t)t);
                cr_assert(q <= 2.0, "%s accumulate %dx%dx%d ta=%d tb=%d [seed %llu]: %.3g times the bound", name,
                          m, n, k, ta, tb, (unsigned long long)seed, q);
            }
        }
        free(A); free(B); free(C); free(C2);
    }
    free(pack);
}
