/* test_gpu_tf32.c: the own TF32 tensor-core GEMM (gpu_gemm_tf32.cu), which
 * runs where the tiled kernel is asked for with TF32 allowed, both of its
 * kernels (mma.sync and Hopper's wgmma, each forced by dg_gpu_opts): every
 * transpose, sizes off their tiles and k-steps, unaligned rows, batches,
 * through dg_gpu_sgemm and through plans, against float64. Skips where no
 * GPU answers (gpu_util.h), the wgmma tests also on devices without it. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/rng.h"
#include "gpu_backend/gpu_backend.h"
#include "gpu_util.h"
#include "test_util.h"

#define FP32_TOL 1e-5 /* max |err| / max |ref|: the fp32 tiled kernel        */
#define TF32_TOL 3e-3 /* 10-bit mantissa inputs (mma.sync rounds them to
                         nearest, wgmma truncates): the sums here stay below
                         ~1e-3 (k up to 4097)                                */
#define GUARD 64      /* floats after C that no store may touch             */
#define SENTINEL 12345.0f

static float *uniform(dg_rng *r, size_t n) {
    float *x = malloc(sizeof(float) * n);
    cr_assert(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(2 * dg_rng_uniform(r) - 1);
    return x;
}

/* C = op(A) op(B) by dg_gpu_sgemm(TILED, tf32) into a NaN-poisoned C with a
 * guard behind it; checks the guard and returns C's comparison with R. */
static cmp_stats tf32_product(dg_backend *gpu, bool tf32, bool ta, bool tb, int m, int n, int k, const void *dA,
                              const void *dB, float *C, const double *R, const char *name) {
    size_t cn = (size_t)m * n, bc = sizeof(float) * (cn + GUARD);
    void *dC;
    ASSERT_OK(dg_backend_alloc(gpu, bc, &dC));
    for (size_t i = 0; i < cn; i++) C[i] = NAN; /* every element must be written */
    for (size_t i = cn; i < cn + GUARD; i++) C[i] = SENTINEL;
    ASSERT_OK(dg_backend_upload(gpu, dC, C, bc));
    ASSERT_OK(dg_gpu_sgemm(gpu, DG_GPU_GEMM_TILED, tf32, ta, tb, m, n, k, dA, dB, dC));
    ASSERT_OK(dg_backend_download(gpu, C, dC, bc));
    dg_backend_release(gpu, dC);
    for (size_t i = cn; i < cn + GUARD; i++)
        cr_assert_eq(C[i], SENTINEL, "%s: a store past C's end, float %zu after it", name, i - cn);
    return cmp_f32(C, R, (int64_t)cn);
}

/* a backend whose TF32 products run on kernel `kernel`; skips where the
 * device has no such kernel */
static dg_backend *open_with(dg_gpu_tf32_kernel kernel) {
    dg_backend *gpu = gpu_open_or_skip(&(dg_gpu_opts){.tf32_kernel = kernel});
    char info[256];
    dg_gpu_info(gpu, info, sizeof info);
    if (kernel == DG_GPU_TF32_WGMMA && !strstr(info, "cc 9.0")) {
        dg_backend_free(gpu);
        cr_skip_test("the wgmma kernel needs compute capability 9.0: %s", info);
    }
    return gpu;
}

/* Sizes off every block tile (mma.sync: 128x128 and 64x64; wgmma: 128x256
 * and 128x128), k off the k-tile of 32 and the k-step of 8, a k longer
 * than the pipeline, rows whose length is not a multiple of 4 (the 4-byte
 * copy path) and multiples of 4 (16-byte copies with zero-filled tails),
 * through dg_gpu_sgemm (for wgmma: the MN-major operands transposed into
 * the workspace first). At 512^3, TF32 must also be in effect: an error
 * well above the fp32 kernel's. */
static void every_transpose_and_edge(dg_gpu_tf32_kernel kernel) {
    dg_backend *gpu = open_with(kernel);
    const int sizes[][3] = {{1, 1, 1},        {7, 5, 3},         {129, 131, 9},  {515, 700, 35},
                            {1000, 1032, 132}, {2047, 2049, 67}, {129, 1000, 1003}, {33, 4097, 9},
                            {64, 64, 4097},   {512, 512, 512}};
    uint64_t seed = test_seed();
    dg_rng r = dg_rng_new(seed);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int m = sizes[si][0], n = sizes[si][1], k = sizes[si][2];
        size_t ba = sizeof(float) * m * k, bb = sizeof(float) * k * n;
        float *A = uniform(&r, (size_t)m * k), *B = uniform(&r, (size_t)k * n);
        float *C = malloc(sizeof(float) * ((size_t)m * n + GUARD));
        double *R = malloc(sizeof(double) * m * n);
        cr_assert(C && R);
        void *dA, *dB;
        ASSERT_OK(dg_backend_alloc(gpu, ba, &dA));
        ASSERT_OK(dg_backend_alloc(gpu, bb, &dB));
        ASSERT_OK(dg_backend_upload(gpu, dA, A, ba));
        ASSERT_OK(dg_backend_upload(gpu, dB, B, bb));
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            ref_sgemm(ta, tb, m, n, k, A, B, R);
            char name[80];
            snprintf(name, sizeof name, "%s %dx%dx%d ta=%d tb=%d", kernel == DG_GPU_TF32_WGMMA ? "wgmma" : "mma.sync",
                     m, n, k, ta, tb);
            cmp_stats s = tf32_product(gpu, true, ta, tb, m, n, k, dA, dB, C, R, name);
            ASSERT_CLOSE(s, TF32_TOL, "own TF32 sgemm vs float64", name, seed);
            if (m == 512) {
                cmp_stats s32 = tf32_product(gpu, false, ta, tb, m, n, k, dA, dB, C, R, name);
                ASSERT_CLOSE(s32, FP32_TOL, "tiled fp32 sgemm vs float64", name, seed);
                cr_assert_gt(s.max_rel, 3 * FP32_TOL, "%s: as exact as fp32 (%.3g): TF32 not in effect", name,
                             s.max_rel);
            }
        }
        dg_backend_release(gpu, dA);
        dg_backend_release(gpu, dB);
        free(A); free(B); free(C); free(R);
    }
    dg_backend_free(gpu);
}

Test(gpu_tf32, mma_sync_every_transpose_and_edge) { every_transpose_and_edge(DG_GPU_TF32_MMA_SYNC); }
Test(gpu_tf32, wgmma_every_transpose_and_edge) { every_transpose_and_edge(DG_GPU_TF32_WGMMA); }

/* Batched matmul nodes [B,m,k] x [B,k,n] (as stored and both operands
 * transposed) in TF32 plans on the tiled kernel: the plan's steps reach
 * the own TF32 kernel with their batch strides, replayed and node by node,
 * each batch item against float64, with an error above fp32's (TF32 in
 * effect); fp32 plans of the same graphs stay at fp32 accuracy. A plan made
 * while cuBLAS was selected reserved no room for the wgmma kernel's
 * transposes: its steps transpose on the way in. Aligned (16-byte copies)
 * and odd (4-byte copies) sizes. */
static void batched_plans(dg_gpu_tf32_kernel kernel) {
    dg_backend *gpu = open_with(kernel);
    const int dims[][4] = {{3, 70, 33, 45}, {4, 128, 96, 64}}; /* B, m, n, k */
    uint64_t seed = test_seed();
    dg_rng r = dg_rng_new(seed);
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (int tr = 0; tr < 2; tr++) {
            int nb = dims[di][0], m = dims[di][1], n = dims[di][2], k = dims[di][3];
            dg_graph *g = dg_graph_new();
            dg_node *a = dg_input(g, "a", tr ? DG_SHAPE(nb, k, m) : DG_SHAPE(nb, m, k));
            dg_node *b = dg_input(g, "b", tr ? DG_SHAPE(nb, n, k) : DG_SHAPE(nb, k, n));
            dg_node *c = dg_matmul(g, a, b, tr, tr);
            ASSERT_OK(dg_graph_status(g));
            float *A = uniform(&r, (size_t)nb * m * k), *B = uniform(&r, (size_t)nb * k * n);
            float *C = malloc(sizeof(float) * nb * m * n);
            double *R = malloc(sizeof(double) * m * n);
            cr_assert(C && R);
            for (int run = 0; run < 6; run++) { /* tf32 x (replay, node by node, made under cuBLAS) */
                int tf = run / 3, no_replay = run % 3 != 0;
                dg_gpu_set_gemm(gpu, run % 3 == 2 ? DG_GPU_GEMM_CUBLAS : DG_GPU_GEMM_TILED);
                dg_plan *p;
                ASSERT_OK(dg_plan_new(&p, g, gpu, &c, 1, &(dg_plan_opts){.no_replay = no_replay, .tf32 = tf}));
                dg_gpu_set_gemm(gpu, DG_GPU_GEMM_TILED);
                ASSERT_OK(dg_plan_set(p, a, A, dg_node_bytes(a)));
                ASSERT_OK(dg_plan_set(p, b, B, dg_node_bytes(b)));
                ASSERT_OK(dg_plan_run(p));
                ASSERT_OK(dg_plan_run(p)); /* the replayed run, where replay is on */
                ASSERT_OK(dg_plan_get(p, c, C, dg_node_bytes(c)));
                double worst = 0;
                for (int z = 0; z < nb; z++) {
                    ref_sgemm(tr, tr, m, n, k, A + (size_t)z * m * k, B + (size_t)z * k * n, R);
                    char name[128];
                    snprintf(name, sizeof name, "%s [%d,%d,%d]x[%d,%d,%d] trans %d item %d tf32=%d run %d",
                             kernel == DG_GPU_TF32_WGMMA ? "wgmma" : "mma.sync", nb, m, k, nb, k, n, tr, z, tf, run);
                    cmp_stats s = cmp_f32(C + (size_t)z * m * n, R, (int64_t)m * n);
                    ASSERT_CLOSE(s, tf ? TF32_TOL : FP32_TOL, "batched plan vs float64", name, seed);
                    worst = s.max_rel > worst ? s.max_rel : worst;
                }
                if (tf)
                    cr_assert_gt(worst, 3 * FP32_TOL, "[%d,%d,%d] TF32 plan as exact as fp32 (%.3g): TF32 not in "
                                 "effect", nb, m, k, worst);
                dg_plan_free(p);
            }
            free(A); free(B); free(C); free(R);
            dg_graph_free(g);
        }
    dg_backend_free(gpu);
}

Test(gpu_tf32, mma_sync_batched_plans) { batched_plans(DG_GPU_TF32_MMA_SYNC); }
Test(gpu_tf32, wgmma_batched_plans) { batched_plans(DG_GPU_TF32_WGMMA); }
