/* sweep_ceiling.c: each device's measured limits, the lines every chart
 * draws: a large GEMM in each precision of the run that the device's
 * library has (GFLOP/s; on the CPU as large as --cpu-cap lets it be, so
 * that every machine has one) and a streaming copy (GB/s, bytes read plus
 * bytes written); on the GPU also the host-device transfer rates
 * (ceiling_transfer.c). Copies are checked by comparing destination and
 * source. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "cpu_backend/cpu_backend.h"
#include "runner/timing.h"
#include "runner/runner.h"
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

/* ---- the runner's view (runner/runner.h): one point, the copy of one
 * device's size; the implementation of that device ---- */

static const bench_impl copy_impls[] = {{.name = "cpu-memcpy"}, {.name = "gpu-memcpy", .gpu = true}};

/* arg: whether the GPU's copy (1 GiB) or the CPU's (256 MiB, --quick 64) */
static void copy_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    bool gpu = *(const bool *)arg;
    size_t bytes = gpu ? (size_t)1 << 30 : (size_t)(ctx->quick ? 64 : 256) << 20;
    bench_points_add(out, (bench_point){.name = "copy", .m = (int64_t)(bytes / 4), .n = 1, .k = 1, .batch = 1,
                                        .bytes = 2.0 * (double)bytes, .index = gpu});
}

static bool copy_applies(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im) {
    (void)ctx;
    return im->gpu == (pt->index == 1);
}

/* src filled with a pattern, dst to copy into; dsrc, ddst on the device */
typedef struct copy_state { copy_arg a; char *src, *dst; void *dsrc, *ddst; dg_backend *gpu; } copy_state;

static void copy_teardown(void *arg) {
    copy_state *s = arg;
    if (s->gpu) {
        dg_backend_release(s->gpu, s->dsrc);
        dg_backend_release(s->gpu, s->ddst);
    }
    free(s->src);
    free(s->dst);
    free(s);
}

static dg_status copy_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    size_t bytes = (size_t)pt->m * 4;
    copy_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "host memory for a %zu-byte copy", bytes);
    s->gpu = ctx->gpu;
    s->src = malloc(bytes);
    s->dst = malloc(bytes);
    if (!s->src || !s->dst) {
        copy_teardown(s);
        return dg_fail(DG_ERR_OOM, "host memory for a %zu-byte copy", bytes);
    }
    for (size_t i = 0; i < bytes; i++) s->src[i] = (char)(i * 131u + 7u);
    s->a = (copy_arg){ctx->gpu, s->dst, s->src, bytes};
    *out = s;
    return DG_OK;
}

static dg_status copy_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    (void)row;
    copy_state *s = arg;
    if (!im->gpu) {
        *work = (bench_work){.fn = host_copy, .arg = &s->a};
        return DG_OK;
    }
#ifdef DG_HAVE_CUDA
    size_t bytes = s->a.bytes;
    dg_status st = dg_backend_alloc(ctx->gpu, bytes, &s->dsrc);
    if (st == DG_OK) st = dg_backend_alloc(ctx->gpu, bytes, &s->ddst);
    if (st == DG_OK) st = dg_backend_upload(ctx->gpu, s->dsrc, s->src, bytes);
    s->a.src = s->dsrc;
    s->a.dst = s->ddst;
    *work = (bench_work){.fn = device_copy, .arg = &s->a, .be = ctx->gpu, .events = true};
    return st;
#else
    (void)ctx;
    return DG_ERR_UNSUPPORTED;
#endif
}

/* the destination, brought back from the device, equals the source byte for byte */
static bool copy_check(void *arg, const bench_impl *im, bench_row *row) {
    copy_state *s = arg;
    dg_status st = im->gpu ? dg_backend_download(s->gpu, s->dst, s->ddst, s->a.bytes) : DG_OK;
    if (st != DG_OK) {
        row->status = bench_status_word(st);
        row->note = dg_last_error();
        return false;
    }
    row->max_rel_err = memcmp(s->src, s->dst, s->a.bytes) == 0 ? 0.0 : 1.0;
    return row->max_rel_err == 0.0;
}

static void copy_row(bench_ctx *ctx, bool gpu) {
    static const bench_sweep_spec spec = {
        .name = "ceiling", .check_word = "bitwise", .impls = copy_impls, .n_impls = 2, .points = copy_points,
        .applies = copy_applies, .setup = copy_setup, .teardown = copy_teardown, .prepare = copy_prepare,
        .check = copy_check,
    };
    bench_sweep_spec one = spec;
    one.arg = &gpu;
    bench_run_spec(ctx, &one);
}

typedef struct square_arg { dg_backend *be; int s; float *A, *B, *C; } square_arg;

static dg_status square_sgemm(void *arg) {
    square_arg *a = arg;
    dg_cpu_sgemm(a->be, DG_CPU_GEMM_OPENBLAS, false, false, a->s, a->s, a->s, a->A, a->B, a->C);
    return DG_OK;
}

/* The CPU's sgemm ceiling is a square of 4096 (--quick: 1024), or the
 * largest of 2048, 1024, 512, 256 whose run is predicted within half of
 * --cpu-cap: a slow CPU (a generic OpenBLAS core, one core) would have its
 * 4096 skipped by the cap and leave every chart without its CPU ceiling.
 * The prediction takes the rate of one 1024 run, as the runner's probe
 * does; larger squares run at that rate or faster, so it errs long. */
static int cpu_ceiling_size(bench_ctx *ctx) {
    int s = ctx->quick ? 1024 : 4096;
    size_t nn = (size_t)1024 * 1024;
    square_arg a = {ctx->cpu, 1024, calloc(nn, 4), calloc(nn, 4), calloc(nn, 4)};
    bench_timing once = {.warmup = 1, .min_reps = 1, .max_reps = 1};
    bench_stats st;
    double gflop_s = 0;
    if (a.A && a.B && a.C && bench_time(NULL, false, square_sgemm, &a, &once, &st) == DG_OK && st.median_ms > 0)
        gflop_s = 2.0 * 1024 * 1024 * 1024 / st.median_ms / 1e6;
    free(a.A); free(a.B); free(a.C);
    while (gflop_s > 0 && s > 256 && 2.0 * s * s * s / (gflop_s * 1e9) > ctx->cpu_cap_s / 2) s /= 2;
    return s;
}

dg_status sweep_ceilings(bench_ctx *ctx) {
    if (ctx->cpu) {
        /* the CPU's own GEMM and its bf16 path (fp16 widens alike; no TF32) */
        bench_gemm_ceiling(ctx, cpu_ceiling_size(ctx), "cpu-openblas",
                           BENCH_PREC(DG_PREC_FP32) | BENCH_PREC(DG_PREC_BF16));
        copy_row(ctx, false);
    }
    if (ctx->gpu) {
        bench_gemm_ceiling(ctx, 8192, "gpu-cublas", BENCH_PREC_ALL);
        copy_row(ctx, true);
        bench_transfer_ceilings(ctx);
    }
    return DG_OK;
}

/* the best of each device's rows above: the libraries' GEMM in each
 * precision, the copies and the transfers */
void bench_ceilings_read(const bench_table *t, bench_ceilings *c) {
    bench_series s;
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        s = bench_pick_prec(t, NULL, "cpu-openblas", NULL, (dg_precision)p, false, BENCH_GFLOPS, "");
        c->cpu_gemm[p] = bench_series_max(&s, NULL);
        s = bench_pick_prec(t, NULL, "gpu-cublas", NULL, (dg_precision)p, false, BENCH_GFLOPS, "");
        c->gpu_gemm[p] = bench_series_max(&s, NULL);
    }
    s = bench_pick(t, NULL, "cpu-memcpy", NULL, false, BENCH_GBPS, "");
    c->cpu_gbps = bench_series_max(&s, NULL);
    s = bench_pick(t, NULL, "gpu-memcpy", NULL, false, BENCH_GBPS, "");
    c->gpu_gbps = bench_series_max(&s, NULL);
    bench_transfer_ceilings_read(t, c);
}
