/* sweep_ceiling.c: each device's measured limits, the lines every chart
 * draws: a large sgemm (GFLOP/s) and a streaming copy (GB/s, bytes read plus
 * bytes written); on the GPU also the host-device transfer rates
 * (ceiling_transfer.c). Copies are checked by comparing destination and
 * source. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/status_internal.h"
#include "runner/sweep.h"
#include <duograd/testing.h>
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

typedef struct copy_arg { dg_backend *be; void *dst; const void *src; size_t bytes; } copy_arg;

/* parallel memcpy: one contiguous chunk per OpenMP thread */
static dg_status host_copy(void *arg) {
    copy_arg *a = arg;
#pragma omp parallel
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t chunk = (a->bytes / nt + 63) & ~(size_t)63, lo = t * chunk;
        size_t hi = lo + chunk < a->bytes ? lo + chunk : a->bytes;
        if (lo < hi) memcpy((char *)a->dst + lo, (const char *)a->src + lo, hi - lo);
    }
    return DG_OK;
}

#ifdef DG_HAVE_CUDA
static dg_status device_copy(void *arg) {
    copy_arg *a = arg;
    return dg_gpu_copy(a->be, a->dst, a->src, a->bytes);
}
#endif

static void copy_row(bench_ctx *ctx, bool gpu, size_t bytes) {
    bench_row row = {.sweep = "ceiling", .name = "copy", .impl = gpu ? "gpu-memcpy" : "cpu-memcpy",
                     .backend = gpu ? "gpu" : "cpu", .m = (long long)(bytes / 4), .n = 1, .k = 1, .batch = 1,
                     .threads = ctx->threads, .warmup = ctx->timing.warmup, .bytes = 2.0 * (double)bytes,
                     .max_rel_err = NAN, .check = "bitwise"};
    if (!bench_wanted(ctx, row.name, row.impl)) return;
    bench_plan_rows(ctx, 1);
    char *src = malloc(bytes), *dst = malloc(bytes);
    dg_status st = src && dst ? DG_OK : dg__fail(DG_ERR_OOM, "host memory for a %zu-byte copy", bytes);
    for (size_t i = 0; st == DG_OK && i < bytes; i++) src[i] = (char)(i * 131u + 7u);
    copy_arg a = {ctx->gpu, dst, src, bytes};
    void *dsrc = NULL, *ddst = NULL;
    if (st == DG_OK && !gpu) st = bench_time(NULL, false, host_copy, &a, &ctx->timing, &row.st);
#ifdef DG_HAVE_CUDA
    if (st == DG_OK && gpu) {
        st = dg_backend_alloc(ctx->gpu, bytes, &dsrc);
        if (st == DG_OK) st = dg_backend_alloc(ctx->gpu, bytes, &ddst);
        if (st == DG_OK) st = dg_backend_upload(ctx->gpu, dsrc, src, bytes);
        a.src = dsrc;
        a.dst = ddst;
        if (st == DG_OK) st = bench_time(ctx->gpu, true, device_copy, &a, &ctx->timing, &row.st);
        if (st == DG_OK) st = dg_backend_download(ctx->gpu, dst, ddst, bytes);
    }
#endif
    if (st == DG_OK) {
        row.max_rel_err = memcmp(src, dst, bytes) == 0 ? 0.0 : 1.0;
        row.status = row.max_rel_err == 0.0 ? "ok" : "wrong";
    } else {
        row.status = bench_status_word(st);
        row.note = dg_last_error();
    }
    bench_emit(ctx, &row);
    if (ctx->gpu) {
        dg_backend_release(ctx->gpu, dsrc);
        dg_backend_release(ctx->gpu, ddst);
    }
    free(src);
    free(dst);
}

dg_status sweep_ceilings(bench_ctx *ctx) {
    if (ctx->cpu) {
        bench_gemm_ceiling(ctx, ctx->quick ? 1024 : 4096, "cpu-openblas");
        copy_row(ctx, false, (size_t)(ctx->quick ? 64 : 256) << 20);
    }
    if (ctx->gpu) {
        bench_gemm_ceiling(ctx, 8192, "gpu-cublas");
        bench_gemm_ceiling(ctx, 8192, "gpu-cublas-tf32");
        copy_row(ctx, true, (size_t)1 << 30);
        bench_transfer_ceilings(ctx);
    }
    return DG_OK;
}

/* the best of each device's rows above: sgemm by the libraries (fp32 and
 * TF32), the copies and the transfers */
void bench_ceilings_read(const bench_table *t, bench_ceilings *c) {
    bench_series s = bench_pick(t, NULL, "cpu-openblas", NULL, false, BENCH_GFLOPS, "");
    c->cpu_gflops = bench_series_max(&s, NULL);
    s = bench_pick(t, NULL, "gpu-cublas", NULL, false, BENCH_GFLOPS, "");
    c->gpu_gflops = bench_series_max(&s, NULL);
    s = bench_pick(t, NULL, "gpu-cublas-tf32", NULL, false, BENCH_GFLOPS, "");
    c->gpu_tf32_gflops = bench_series_max(&s, NULL);
    s = bench_pick(t, NULL, "cpu-memcpy", NULL, false, BENCH_GBPS, "");
    c->cpu_gbps = bench_series_max(&s, NULL);
    s = bench_pick(t, NULL, "gpu-memcpy", NULL, false, BENCH_GBPS, "");
    c->gpu_gbps = bench_series_max(&s, NULL);
    bench_transfer_ceilings_read(t, c);
}
