/* sweep_gemm.c: C[m,n] = A[m,k] B[k,n] in float32 by every implementation.
 *
 * Check: each result C is verified before its time is written, by
 * Freivalds' test in float64: y = C x against z = A (B x) for a random x,
 * error = max|y - z| / max|z|. It costs O(mn + nk + mk) instead of the
 * O(mnk) of a reference product, so even 8192^3 is checked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "sweep.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

#define TOL_FP32 1e-4
#define TOL_TF32 5e-3
#define NAIVE_CPU_MAX 512

typedef struct gemm_case { const char *name; int m, n, k; } gemm_case;

static const long long default_square[] = {32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
static const long long quick_square[] = {32, 64, 128, 256, 512, 1024};
static const gemm_case non_square[] = {
    {"mlp_layer", 128, 4096, 4096},  /* a batch of 128 through a 4096-wide layer */
    {"low_k", 4096, 4096, 128},      /* an outer-product-like update              */
    {"tall", 8192, 1024, 1024},
};

typedef struct gemm_run {
    bench_ctx *ctx;
    const char *impl;
    int m, n, k;
    bool tf32;
    float *A, *B, *C;             /* host                                         */
    void *dA, *dB, *dC;           /* device                                       */
} gemm_run;

static dg_status run_cpu(void *arg) {
    gemm_run *g = arg;
    dg_cpu_gemm impl = strcmp(g->impl, "cpu-naive") == 0 ? DG_CPU_GEMM_NAIVE
                     : strcmp(g->impl, "cpu-omp") == 0  ? DG_CPU_GEMM_OWN : DG_CPU_GEMM_OPENBLAS;
    dg_cpu_sgemm(g->ctx->cpu, impl, false, false, g->m, g->n, g->k, g->A, g->B, g->C);
    return DG_OK;
}

#ifdef DG_HAVE_CUDA
static dg_gpu_gemm gpu_impl(const char *impl) {
    return strcmp(impl, "gpu-naive") == 0 ? DG_GPU_GEMM_NAIVE
         : strcmp(impl, "gpu-tiled") == 0 ? DG_GPU_GEMM_TILED : DG_GPU_GEMM_CUBLAS;
}

static dg_status run_gpu(void *arg) {
    gemm_run *g = arg;
    return dg_gpu_sgemm(g->ctx->gpu, gpu_impl(g->impl), g->tf32, false, false, g->m, g->n, g->k, g->dA, g->dB, g->dC);
}

/* the same product with the copies inside the timed region */
static dg_status run_gpu_transfer(void *arg) {
    gemm_run *g = arg;
    dg_backend *be = g->ctx->gpu;
    dg_status st;
    if ((st = dg_backend_upload(be, g->dA, g->A, sizeof(float) * (size_t)g->m * g->k)) != DG_OK) return st;
    if ((st = dg_backend_upload(be, g->dB, g->B, sizeof(float) * (size_t)g->k * g->n)) != DG_OK) return st;
    if ((st = run_gpu(g)) != DG_OK) return st;
    return dg_backend_download(be, g->C, g->dC, sizeof(float) * (size_t)g->m * g->n);
}
#endif

/* max |C x - z| / max |z| */
static double freivalds(const gemm_run *g, const double *x, const double *z) {
    double err = 0, zmax = 0;
#pragma omp parallel for reduction(max : err, zmax)
    for (int i = 0; i < g->m; i++) {
        double y = 0;
        for (int j = 0; j < g->n; j++) y += (double)g->C[(size_t)i * g->n + j] * x[j];
        double e = fabs(y - z[i]);
        if (isnan(y)) e = INFINITY;
        err = e > err ? e : err;
        zmax = fabs(z[i]) > zmax ? fabs(z[i]) : zmax;
    }
    return err / (zmax > 0 ? zmax : 1);
}

/* Times every implementation (or only `only`) on one shape and writes a
 * row per implementation into the current CSV under `sweep`. */
static void run_case(bench_ctx *ctx, const char *sweep, const char *name, int m, int n, int k, const char *only,
                     double *last_ms, double *last_flops) {
    static const char *impls[] = {"cpu-naive", "cpu-omp", "cpu-openblas", "gpu-naive", "gpu-tiled", "gpu-cublas",
                                  "gpu-cublas-tf32"};
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    gemm_run g = {ctx, NULL, m, n, k, false, malloc(na * 4), malloc(nb * 4), malloc(nc * 4), NULL, NULL, NULL};
    double *x = malloc((size_t)n * sizeof *x), *bx = malloc((size_t)k * sizeof *bx), *z = malloc((size_t)m * sizeof *z);
    double flops = 2.0 * m * n * k;
    bench_row row = {.sweep = sweep, .name = name, .m = m, .n = n, .k = k, .batch = 1,
                     .threads = ctx->threads, .warmup = ctx->timing.warmup, .flops = flops,
                     .bytes = 4.0 * (double)(na + nb + nc)};
    if (!g.A || !g.B || !g.C || !x || !bx || !z) {
        row.impl = "all"; row.backend = "host"; row.status = "oom"; row.max_rel_err = NAN;
        bench_emit(ctx, &row);
        goto done;
    }
    dg_rng r = dg_rng_new(((uint64_t)m << 40) ^ ((uint64_t)n << 20) ^ (uint64_t)k);
    for (size_t i = 0; i < na; i++) g.A[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    for (size_t i = 0; i < nb; i++) g.B[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    for (int j = 0; j < n; j++) x[j] = 2 * dg_rng_uniform(&r) - 1;
#pragma omp parallel for
    for (int p = 0; p < k; p++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += (double)g.B[(size_t)p * n + j] * x[j];
        bx[p] = s;
    }
#pragma omp parallel for
    for (int i = 0; i < m; i++) {
        double s = 0;
        for (int p = 0; p < k; p++) s += (double)g.A[(size_t)i * k + p] * bx[p];
        z[i] = s;
    }
#ifdef DG_HAVE_CUDA
    bool gpu_ready = false;
    if (ctx->gpu) {
        dg_status st = dg_backend_alloc(ctx->gpu, na * 4, &g.dA);
        if (st == DG_OK) st = dg_backend_alloc(ctx->gpu, nb * 4, &g.dB);
        if (st == DG_OK) st = dg_backend_alloc(ctx->gpu, nc * 4, &g.dC);
        if (st == DG_OK) st = dg_backend_upload(ctx->gpu, g.dA, g.A, na * 4);
        if (st == DG_OK) st = dg_backend_upload(ctx->gpu, g.dB, g.B, nb * 4);
        gpu_ready = st == DG_OK;
        if (!gpu_ready) fprintf(stderr, "bench: gemm %dx%dx%d on the GPU: %s\n", m, n, k, dg_last_error());
    }
#endif
    for (int i = 0; i < 7 && !bench_interrupted; i++) {
        bool gpu = impls[i][0] == 'g';
        g.impl = row.impl = impls[i];
        row.backend = gpu ? "gpu" : "cpu";
        row.tf32 = g.tf32 = strcmp(impls[i], "gpu-cublas-tf32") == 0;
        row.transfer = false;
        row.max_rel_err = NAN;
        row.st = (bench_stats){NAN, NAN, NAN, NAN, 0};
        if ((gpu ? !ctx->gpu : !ctx->cpu) || (only && strcmp(only, impls[i]) != 0)) continue;
        if (i == 0 && m > (ctx->quick ? 256 : NAIVE_CPU_MAX)) continue; /* the naive loop is for small sizes */
        if (!gpu && last_ms[i] > 0 && last_ms[i] * flops / last_flops[i] > 1e3 * ctx->cpu_cap_s) {
            row.status = "skipped"; /* predicted past the time cap */
            fprintf(stderr, "bench: gemm %s %s: skipped, predicted %.1f s per run > cap %.1f s (--cpu-cap)\n",
                    impls[i], name, last_ms[i] * flops / last_flops[i] / 1e3, ctx->cpu_cap_s);
            bench_emit(ctx, &row);
            continue;
        }
        dg_status st = DG_OK;
        for (size_t q = 0; q < nc; q++) g.C[q] = NAN; /* poison: every element must be written */
        if (!gpu) {
            st = bench_time(NULL, false, run_cpu, &g, &ctx->timing, &row.st);
        }
#ifdef DG_HAVE_CUDA
        else if (!gpu_ready) st = DG_ERR_OOM;
        else {
            st = dg_backend_upload(ctx->gpu, g.dC, g.C, nc * 4);
            if (st == DG_OK) st = bench_time(ctx->gpu, true, run_gpu, &g, &ctx->timing, &row.st);
            if (st == DG_OK) st = dg_backend_download(ctx->gpu, g.C, g.dC, nc * 4);
        }
#endif
        if (st != DG_OK) {
            row.status = bench_status_word(st);
            fprintf(stderr, "bench: gemm %s %s: %s\n", impls[i], name, dg_last_error());
            bench_emit(ctx, &row);
            continue;
        }
        row.max_rel_err = freivalds(&g, x, z);
        row.status = row.max_rel_err <= (row.tf32 ? TOL_TF32 : TOL_FP32) ? "ok" : "wrong";
        bench_emit(ctx, &row);
        last_ms[i] = row.st.median_ms;
        last_flops[i] = flops;
#ifdef DG_HAVE_CUDA
        if (strcmp(impls[i], "gpu-cublas") == 0 && !only && !bench_interrupted) { /* and once with the copies inside */
            for (size_t q = 0; q < nc; q++) g.C[q] = NAN;
            row.transfer = true;
            row.tf32 = g.tf32 = false;
            row.st = (bench_stats){NAN, NAN, NAN, NAN, 0};
            st = bench_time(ctx->gpu, false, run_gpu_transfer, &g, &ctx->timing, &row.st);
            row.max_rel_err = st == DG_OK ? freivalds(&g, x, z) : NAN;
            row.status = st != DG_OK ? bench_status_word(st) : row.max_rel_err <= TOL_FP32 ? "ok" : "wrong";
            bench_emit(ctx, &row);
        }
#endif
    }
#ifdef DG_HAVE_CUDA
    if (ctx->gpu) {
        dg_backend_release(ctx->gpu, g.dA);
        dg_backend_release(ctx->gpu, g.dB);
        dg_backend_release(ctx->gpu, g.dC);
    }
#endif
done:
    free(g.A); free(g.B); free(g.C);
    free(x); free(bx); free(z);
}

dg_status sweep_gemm(bench_ctx *ctx) {
    const long long *sizes;
    int n_default = (int)(sizeof default_square / sizeof *default_square) - !ctx->extended; /* 8192: all */
    int n = bench_sizes(ctx, ctx->quick ? quick_square : default_square, ctx->quick ? 6 : n_default, &sizes);
    double last_ms[7] = {0}, last_flops[7] = {0};
    for (int i = 0; i < n && !bench_interrupted; i++)
        run_case(ctx, "gemm", "square", (int)sizes[i], (int)sizes[i], (int)sizes[i], NULL, last_ms, last_flops);
    if (ctx->n_sizes == 0 && !ctx->quick)
        for (size_t i = 0; i < sizeof non_square / sizeof *non_square && !bench_interrupted; i++) {
            double lm[7] = {0}, lf[7] = {0}; /* predict from the square runs */
            memcpy(lm, last_ms, sizeof lm);
            memcpy(lf, last_flops, sizeof lf);
            run_case(ctx, "gemm", non_square[i].name, non_square[i].m, non_square[i].n, non_square[i].k, NULL, lm, lf);
        }
    return DG_OK;
}

void bench_gemm_ceiling(bench_ctx *ctx, int size, const char *impl) {
    double last_ms[7] = {0}, last_flops[7] = {0};
    run_case(ctx, "ceiling", "sgemm", size, size, size, impl, last_ms, last_flops);
}
