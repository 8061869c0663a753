/* sweep_gemm.c: C[m,n] = A[m,k] B[k,n] by every implementation, in each
 * precision it has a path in: fp32 and tf32 (float32 operands; TF32 tensor
 * cores on the GPU, the CPU's sgemm as in fp32), bf16 and fp16 (operands
 * rounded to the dtype and stored in 2 bytes, float32 accumulation and C:
 * dg_cpu_gemm_ex, which widens them to float32 for the sgemm, cuBLAS
 * GemmEx by dg_gpu_gemm_ex and the own wgmma kernel by
 * dg_gpu_gemm_ex_tiled, the kernels a matmul of such operands runs).
 *
 * Check: Freivalds' test in float64 on the operands as the kernel reads
 * them (gemm_check.h), against a tolerance per precision.
 * --shapes replaces the default shapes with the user's, transposes too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/round.h"
#include "core/rng.h"
#include "core/status.h"
#include "cpu_backend/cpu_backend.h"
#include "machine/env.h"
#include "runner/runner.h"
#include "sweeps/gemm/gemm_check.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

typedef struct gemm_case { const char *name; int m, n, k; } gemm_case;

static const long long default_square[] = {32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
static const long long quick_square[] = {32, 64, 128, 256, 512, 1024};
static const gemm_case non_square[] = {
    {"mlp_layer", 128, 4096, 4096},  /* a batch of 128 through a 4096-wide layer */
    {"low_k", 4096, 4096, 128},      /* an outer-product-like update              */
    {"tall", 8192, 1024, 1024},
};

typedef struct gemm_impl gemm_impl;

typedef struct gemm_run {
    bench_ctx *ctx;
    const gemm_impl *impl;
    dg_precision prec;
    int m, n, k;
    bool ta, tb;                  /* A stored [k,m] / B stored [n,k]              */
    float *A, *B, *C;             /* host; A, B rounded to prec's dtype            */
    uint16_t *lA, *lB;            /* host: A, B in prec's 2-byte dtype; NULL in
                                   * fp32 and tf32                                 */
    void *hA, *hB; float *hC;     /* what a transfer row copies: A, B, C, or their
                                   * pinned copies (gpu-cublas-pinned)             */
    void *dA, *dB, *dC;           /* device: A, B in the operands' dtype           */
} gemm_run;

/* the operands as the kernels read them: 2-byte values in bf16 and fp16 */
static const void *op_a(const gemm_run *g) { return g->lA ? (const void *)g->lA : g->A; }
static const void *op_b(const gemm_run *g) { return g->lB ? (const void *)g->lB : g->B; }
/* bytes of an operand's element */
static size_t elem_bytes(dg_precision p) { return dg_dtype_size(dg_precision_dtype(p)); }

/* the products, one per implementation: bench_fn on a gemm_run; the CPU
 * ones run with the CPU backend's threads and packing scratch (and, for
 * bf16 and fp16, its widening buffer) */
static dg_status cpu_gemm(gemm_run *g, dg_cpu_gemm kind) {
    return dg_cpu_gemm_ex(g->ctx->cpu, kind, dg_precision_dtype(g->prec), g->ta, g->tb, g->m, g->n, g->k, op_a(g),
                          op_b(g), g->C);
}
static dg_status cpu_naive(void *arg) { return cpu_gemm(arg, DG_CPU_GEMM_NAIVE); }
static dg_status cpu_own(void *arg) { return cpu_gemm(arg, DG_CPU_GEMM_OWN); }
static dg_status cpu_openblas(void *arg) { return cpu_gemm(arg, DG_CPU_GEMM_OPENBLAS); }
static dg_status cpu_onednn(void *arg) { return cpu_gemm(arg, DG_CPU_GEMM_ONEDNN); }
#ifdef DG_HAVE_CUDA
/* bf16, fp16: cuBLAS GemmEx, or the own wgmma kernel (tiled; gemm_skip
 * keeps it off devices without it); gemm_applies keeps the naive one out */
static dg_status gpu_gemm(gemm_run *g, dg_gpu_gemm kind) {
    dg_dtype dt = dg_precision_dtype(g->prec);
    if (dt != DG_F32 && kind == DG_GPU_GEMM_TILED)
        return dg_gpu_gemm_ex_tiled(g->ctx->gpu, dt, DG_F32, g->ta, g->tb, g->m, g->n, g->k, g->dA, g->ta ? g->m : g->k,
                                    g->dB, g->tb ? g->k : g->n, g->dC, g->n);
    if (dt != DG_F32) return dg_gpu_gemm_ex(g->ctx->gpu, dt, g->ta, g->tb, g->m, g->n, g->k, g->dA, g->dB, g->dC);
    return dg_gpu_sgemm(g->ctx->gpu, kind, g->prec == DG_PREC_TF32, g->ta, g->tb, g->m, g->n, g->k, g->dA, g->dB,
                        g->dC);
}
static dg_status gpu_naive(void *arg) { return gpu_gemm(arg, DG_GPU_GEMM_NAIVE); }
static dg_status gpu_tiled(void *arg) { return gpu_gemm(arg, DG_GPU_GEMM_TILED); }
static dg_status gpu_cublas(void *arg) { return gpu_gemm(arg, DG_GPU_GEMM_CUBLAS); }
#define GPU_FN(f) f
#else
#define GPU_FN(f) NULL /* never called: no GPU backend is opened */
#endif

#define FP32_ONLY  BENCH_PREC(DG_PREC_FP32)
#define FLOAT_OPS  (BENCH_PREC(DG_PREC_FP32) | BENCH_PREC(DG_PREC_TF32))

/* Every implementation, in the order of the CSV rows of a shape and of the
 * report's series. */
struct gemm_impl {
    const char *name;       /* the impl column                                         */
    bool        gpu;        /* runs on ctx->gpu (backend column "gpu"), else on ctx->cpu */
    unsigned    precs;      /* the precisions it has a path in (BENCH_PREC mask)        */
    bool        transfer;   /* also timed with the host-device copies inside (fp32)     */
    bool        transfer_only; /* only with the copies inside: the kernel is another's  */
    bool        pinned;     /* the copies from and to page-locked host memory           */
    bool        speedup;    /* the CPU or the GPU side of the speedup chart             */
    int         cap, cap_quick; /* largest m timed, and under --quick; 0: no cap        */
    bench_fn    run;        /* the product on a gemm_run (GPU: device buffers)          */
};

static const gemm_impl impls[] = {
    /* the triple loop: small sizes only */
    {"cpu-naive", .precs = FP32_ONLY, .cap = 512, .cap_quick = 256, .run = cpu_naive},
    {"cpu-omp", .precs = BENCH_PREC_ALL, .run = cpu_own},
    {"cpu-openblas", .precs = BENCH_PREC_ALL, .speedup = true, .run = cpu_openblas},
    /* the vendor reference: oneDNN's matmul, bf16 by its own kernel (a
     * DG_ONEDNN build; gemm_applies leaves it out of the others) */
    {"cpu-onednn", .precs = BENCH_PREC_ALL, .run = cpu_onednn},
    {"gpu-naive", .gpu = true, .precs = FP32_ONLY, .run = GPU_FN(gpu_naive)},
    /* in tf32 the own tensor-core kernels, in bf16 and fp16 the own wgmma one */
    {"gpu-tiled", .gpu = true, .precs = BENCH_PREC_ALL, .run = GPU_FN(gpu_tiled)},
    {"gpu-cublas", .gpu = true, .precs = BENCH_PREC_ALL, .transfer = true, .speedup = true,
     .run = GPU_FN(gpu_cublas)},
    {"gpu-cublas-pinned", .gpu = true, .precs = FP32_ONLY, .transfer = true, .transfer_only = true, .pinned = true,
     .run = GPU_FN(gpu_cublas)},
};
#define N_IMPLS (int)(sizeof impls / sizeof *impls)

#ifdef DG_HAVE_CUDA
/* the same product with the copies inside the timed region (fp32 rows) */
static dg_status run_transfer(void *arg) {
    gemm_run *g = arg;
    dg_backend *be = g->ctx->gpu;
    dg_status st;
    if ((st = dg_backend_upload(be, g->dA, g->hA, sizeof(float) * (size_t)g->m * g->k)) != DG_OK) return st;
    if ((st = dg_backend_upload(be, g->dB, g->hB, sizeof(float) * (size_t)g->k * g->n)) != DG_OK) return st;
    if ((st = g->impl->run(g)) != DG_OK) return st;
    return dg_backend_download(be, g->hC, g->dC, sizeof(float) * (size_t)g->m * g->n);
}
#endif

/* A CPU implementation's rate in precision p from one run of a small
 * square (half its cap, or 1024): *ms for *flops */
static void probe_rate(bench_ctx *ctx, const gemm_impl *im, dg_precision p, double *ms, double *flops) {
    int s = im->cap ? im->cap / 2 : 1024;
    size_t nn = (size_t)s * s, es = elem_bytes(p);
    bool lo = es == 2;
    gemm_run g = {ctx, im, p, s, s, s, false, false, calloc(nn, 4), calloc(nn, 4), calloc(nn, 4),
                  lo ? calloc(nn, 2) : NULL, lo ? calloc(nn, 2) : NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    bench_timing once = {.warmup = 1, .min_reps = 1, .max_reps = 1, .min_time_s = 0};
    bench_stats st;
    if (g.A && g.B && g.C && (!lo || (g.lA && g.lB)) && bench_time(NULL, false, im->run, &g, &once, &st) == DG_OK) {
        *ms = st.median_ms;
        *flops = 2.0 * s * s * s;
    }
    free(g.A); free(g.B); free(g.C); free(g.lA); free(g.lB);
}

/* ---- the runner's view (runner/runner.h): points are shapes, one
 * bench_impl per row of a shape: each kernel, then its copies-inside row ---- */

/* runner implementations: impls[] with a second entry (transfer) for each
 * kernel also timed with its copies, right after it; data: the gemm_impl */
static bench_impl runner_impls[2 * N_IMPLS];
static int n_runner_impls;

static void list_runner_impls(void) {
    if (n_runner_impls) return;
    for (int i = 0; i < N_IMPLS; i++) {
        const gemm_impl *im = &impls[i];
        if (!im->transfer_only)
            runner_impls[n_runner_impls++] = (bench_impl){im->name, im->gpu, false, im};
        if (im->transfer) runner_impls[n_runner_impls++] = (bench_impl){im->name, im->gpu, true, im};
    }
}

static const gemm_impl *kernel_of(const bench_impl *im) { return im->data; }

/* a shape as a point; index: bit 0 A transposed, bit 1 B transposed;
 * bytes of float32 operands (gemm_columns gives each row its precision's) */
static bench_point shape_point(const char *name, int m, int n, int k, bool ta, bool tb) {
    double dm = m, dn = n, dk = k;
    return (bench_point){.name = name, .m = m, .n = n, .k = k, .batch = 1, .flops = 2.0 * dm * dn * dk,
                         .bytes = 4.0 * (dm * dk + dk * dn + dm * dn), .index = ta | tb << 1};
}

/* the case name of a user shape: its transposes */
static const char *const user_case[2][2] = {{"user-NN", "user-NT"}, {"user-TN", "user-TT"}};

/* --shapes alone; else the square sizes (--sizes), then the non-square
 * shapes unless --sizes or --quick */
static void gemm_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    (void)arg;
    for (int i = 0; i < ctx->n_shapes; i++) {
        const bench_gemm_shape *sh = &ctx->shapes[i];
        bench_points_add(out, shape_point(user_case[sh->ta][sh->tb], sh->m, sh->n, sh->k, sh->ta, sh->tb));
    }
    if (ctx->n_shapes) return;
    const long long *sizes;
    int n_default = (int)(sizeof default_square / sizeof *default_square) - !ctx->extended; /* 8192: all */
    int n = bench_sizes(ctx, ctx->quick ? quick_square : default_square, ctx->quick ? 6 : n_default, &sizes);
    for (int i = 0; i < n; i++) {
        int s = (int)sizes[i];
        bench_points_add(out, shape_point("square", s, s, s, false, false));
    }
    bool more = !bench_user_sizes(ctx) && !ctx->quick;
    for (size_t i = 0; more && i < sizeof non_square / sizeof *non_square; i++)
        bench_points_add(out, shape_point(non_square[i].name, non_square[i].m, non_square[i].n, non_square[i].k,
                                          false, false));
}

/* Whether the kernel has a path in the point's precision (the copies
 * inside: fp32 alone), and its size cap (cpu-naive: the triple loop, small
 * sizes only) on every dimension: its rate falls with n and k too (B's
 * column walk), and a rate from squares predicts 128x4096x4096 14x short */
static bool gemm_applies(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im) {
    const gemm_impl *g = kernel_of(im);
    if (!(g->precs & BENCH_PREC(pt->precision)) || (im->transfer && pt->precision != DG_PREC_FP32)) return false;
    if (g->run == cpu_onednn && !dg_cpu_has_onednn()) return false;
    int cap = ctx->quick ? g->cap_quick : g->cap;
    return !cap || (pt->m <= cap && pt->n <= cap && pt->k <= cap);
}

/* The bytes of the operands and C in the row's precision (C is float32),
 * and which path a CPU row's precision runs. */
static void gemm_columns(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, bench_row *row) {
    (void)ctx;
    double m = (double)pt->m, n = (double)pt->n, k = (double)pt->k;
    row->bytes = (double)elem_bytes(pt->precision) * (m * k + k * n) + 4.0 * m * n;
    if (im->gpu) return;
    bool onednn = kernel_of(im)->run == cpu_onednn;
    if (pt->precision == DG_PREC_TF32) row->note = "no TF32 on the CPU: the fp32 sgemm";
    else if (onednn && pt->precision == DG_PREC_BF16) row->note = "oneDNN's bf16 kernel";
    else if (elem_bytes(pt->precision) == 2) row->note = "widened to fp32 + sgemm";
}

/* The own bf16/fp16 kernel where the device or build lacks it (the
 * reason); A, B, C in float (and A, B in 2 bytes), x, z in double for the
 * check: the host memory of the shape, the same for every implementation */
static const char *gemm_skip(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, char *why, size_t n) {
#ifdef DG_HAVE_CUDA
    if (kernel_of(im)->run == gpu_tiled && elem_bytes(pt->precision) == 2 && ctx->gpu &&
        !dg_gpu_has_tiled16(ctx->gpu, why, n))
        return why;
#else
    (void)ctx; (void)im;
#endif
    double m = (double)pt->m, k = (double)pt->k, nn = (double)pt->n;
    double host_bytes = 6.0 * (m * k + k * nn) + 4.0 * m * nn + 8.0 * (nn + k + m);
    double avail = bench_mem_available();
    if (avail > 0 && host_bytes > 0.9 * avail) {
        snprintf(why, n, "needs %.1f GB of host memory, %.1f GB available", host_bytes / 1e9, avail / 1e9);
        return why;
    }
    return NULL;
}

/* A CPU kernel's rate before any row of it ran at a shape larger than half
 * its cap (or 1024): one run of that square. Its rate is at most the rate
 * of larger shapes, so the time predicted from it errs long. */
static void gemm_probe(bench_ctx *ctx, const bench_impl *im, const bench_point *pt, double *ms, double *work) {
    int s = kernel_of(im)->cap ? kernel_of(im)->cap / 2 : 1024;
    if (pt->m > s) probe_rate(ctx, kernel_of(im), pt->precision, ms, work);
}

/* one shape in one precision: host matrices and the float64 side of the
 * check; device buffers and pinned copies made at the first row that needs
 * them */
typedef struct gemm_state {
    gemm_run g;
    bench_freivalds f;
    bool     gpu_tried, gpu_ready;
    char     gpu_why[256];
    float   *pinned[3];     /* A, B, C page-locked, for the pinned transfer rows */
} gemm_state;

static void gemm_teardown(void *arg) {
    gemm_state *s = arg;
    gemm_run *g = &s->g;
#ifdef DG_HAVE_CUDA
    if (g->ctx->gpu) {
        dg_backend_release(g->ctx->gpu, g->dA);
        dg_backend_release(g->ctx->gpu, g->dB);
        dg_backend_release(g->ctx->gpu, g->dC);
        for (int j = 0; j < 3; j++) dg_backend_host_free(g->ctx->gpu, s->pinned[j]);
    }
#endif
    free(g->A); free(g->B); free(g->C); free(g->lA); free(g->lB);
    bench_freivalds_free(&s->f);
    free(s);
}

/* A, B uniform in [-1, 1), the same in every precision, then rounded to
 * its dtype (bf16, fp16; dg_check_round): the kernels and the check read
 * the same values */
static dg_status gemm_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    int m = (int)pt->m, n = (int)pt->n, k = (int)pt->k;
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    bool lo = elem_bytes(pt->precision) == 2;
    gemm_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "host memory for the matrices and the check");
    s->g = (gemm_run){ctx, NULL, pt->precision, m, n, k, pt->index & 1, pt->index & 2, malloc(na * 4),
                      malloc(nb * 4), malloc(nc * 4), lo ? malloc(na * 2) : NULL, lo ? malloc(nb * 2) : NULL,
                      NULL, NULL, NULL, NULL, NULL, NULL};
    gemm_run *g = &s->g;
    if (!g->A || !g->B || !g->C || (lo && (!g->lA || !g->lB))) {
        gemm_teardown(s);
        return dg_fail(DG_ERR_OOM, "host memory for the matrices and the check");
    }
    uint64_t seed = ((uint64_t)m << 40) ^ ((uint64_t)n << 20) ^ (uint64_t)k;
    dg_rng r = dg_rng_new(seed);
    for (size_t i = 0; i < na; i++) g->A[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    for (size_t i = 0; i < nb; i++) g->B[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    dg_check_round(dg_precision_dtype(pt->precision), g->A, g->lA, na);
    dg_check_round(dg_precision_dtype(pt->precision), g->B, g->lB, nb);
    dg_status st = bench_freivalds_new(&s->f, m, n, k, g->ta, g->tb, g->A, g->B, seed ^ 0x9e3779b97f4a7c15u);
    if (st != DG_OK) {
        gemm_teardown(s);
        return st;
    }
    *out = s;
    return DG_OK;
}

#ifdef DG_HAVE_CUDA
/* A and B on the device in their dtype, room for C, and for a pinned row
 * A, B, C in page-locked memory; the first failure is every GPU row's
 * error */
static dg_status gpu_buffers(gemm_state *s, bool pinned) {
    gemm_run *g = &s->g;
    dg_backend *be = g->ctx->gpu;
    size_t sz[3] = {(size_t)g->m * g->k, (size_t)g->k * g->n, (size_t)g->m * g->n}, es = elem_bytes(g->prec);
    if (!s->gpu_tried) {
        s->gpu_tried = true;
        dg_status st = dg_backend_alloc(be, sz[0] * es, &g->dA);
        if (st == DG_OK) st = dg_backend_alloc(be, sz[1] * es, &g->dB);
        if (st == DG_OK) st = dg_backend_alloc(be, sz[2] * 4, &g->dC);
        if (st == DG_OK) st = dg_backend_upload(be, g->dA, op_a(g), sz[0] * es);
        if (st == DG_OK) st = dg_backend_upload(be, g->dB, op_b(g), sz[1] * es);
        s->gpu_ready = st == DG_OK;
        if (!s->gpu_ready) snprintf(s->gpu_why, sizeof s->gpu_why, "device buffers: %s", dg_last_error());
    }
    if (!s->gpu_ready) return dg_fail(DG_ERR_OOM, "%s", s->gpu_why);
    if (pinned && !s->pinned[0]) {
        dg_status st = DG_OK;
        for (int j = 0; j < 3 && st == DG_OK; j++) st = dg_backend_host_alloc(be, sz[j] * 4, (void **)&s->pinned[j]);
        if (st != DG_OK) return st;
        memcpy(s->pinned[0], g->A, sz[0] * 4);
        memcpy(s->pinned[1], g->B, sz[1] * 4);
    }
    return DG_OK;
}
#endif

/* C poisoned (every element must be written), then the kernel alone, or
 * with its copies inside from and to pageable or pinned host memory */
static dg_status gemm_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    (void)row;
    gemm_state *s = arg;
    gemm_run *g = &s->g;
    size_t nc = (size_t)g->m * g->n;
    g->impl = kernel_of(im);
    for (size_t q = 0; q < nc; q++) g->C[q] = NAN;
    if (!im->gpu) {
        *work = (bench_work){.fn = g->impl->run, .arg = g};
        return DG_OK;
    }
#ifdef DG_HAVE_CUDA
    dg_status st = gpu_buffers(s, im->transfer && g->impl->pinned);
    if (st != DG_OK) return st;
    if (im->transfer) {
        bool pin = g->impl->pinned;
        g->hA = pin ? (void *)s->pinned[0] : g->A;
        g->hB = pin ? (void *)s->pinned[1] : g->B;
        g->hC = pin ? s->pinned[2] : g->C;
        for (size_t q = 0; q < nc; q++) g->hC[q] = NAN;
        *work = (bench_work){.fn = run_transfer, .arg = g, .be = ctx->gpu, .events = false};
        return DG_OK;
    }
    *work = (bench_work){.fn = g->impl->run, .arg = g, .be = ctx->gpu, .events = true};
    return dg_backend_upload(ctx->gpu, g->dC, g->C, nc * 4);
#else
    (void)ctx;
    return DG_ERR_UNSUPPORTED;
#endif
}

/* C back on the host (a GPU kernel's from the device, a pinned row's from
 * its copy), then Freivalds' test against the precision's tolerance */
static bool gemm_check(void *arg, const bench_impl *im, bench_row *row) {
    gemm_state *s = arg;
    gemm_run *g = &s->g;
    size_t nc = (size_t)g->m * g->n;
#ifdef DG_HAVE_CUDA
    dg_status st = im->gpu && !im->transfer ? dg_backend_download(g->ctx->gpu, g->C, g->dC, nc * 4) : DG_OK;
    if (st != DG_OK) {
        row->status = bench_status_word(st);
        row->note = dg_last_error();
        return false;
    }
    if (im->transfer && g->impl->pinned) memcpy(g->C, g->hC, nc * 4);
#else
    (void)nc;
#endif
    row->max_rel_err = bench_freivalds_err(&s->f, g->C);
    return row->max_rel_err <= bench_gemm_tol(g->prec, g->k, im->gpu);
}

static const bench_sweep_spec gemm_spec = {
    .name = "gemm", .check_word = "f64-freivalds", .precisions = BENCH_PREC_ALL, .points = gemm_points,
    .applies = gemm_applies, .columns = gemm_columns,
    .skip = gemm_skip, .probe = gemm_probe, .setup = gemm_setup, .teardown = gemm_teardown,
    .prepare = gemm_prepare, .check = gemm_check,
};

dg_status sweep_gemm(bench_ctx *ctx) {
    list_runner_impls();
    bench_sweep_spec spec = gemm_spec;
    spec.impls = runner_impls;
    spec.n_impls = n_runner_impls;
    return bench_run_spec(ctx, &spec);
}

/* the ceiling sweep's one square of `size`, case "sgemm" in every
 * precision (the name older folders' ceiling rows have) */
static void ceiling_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    (void)ctx;
    int size = *(const int *)arg;
    bench_points_add(out, shape_point("sgemm", size, size, size, false, false));
}

void bench_gemm_ceiling(bench_ctx *ctx, int size, const char *impl, unsigned precisions) {
    list_runner_impls();
    bench_sweep_spec spec = gemm_spec;
    spec.name = "ceiling";
    spec.precisions = precisions;
    spec.points = ceiling_points;
    spec.arg = &size;
    for (int i = 0; i < n_runner_impls; i++)
        if (!runner_impls[i].transfer && !strcmp(runner_impls[i].name, impl)) {
            spec.impls = &runner_impls[i];
            spec.n_impls = 1;
        }
    if (spec.n_impls == 1) bench_run_spec(ctx, &spec);
}

/* The copies' share of each transfer row: time with copies minus the
 * kernel's time, against what the measured pinned ceilings give for the
 * same bytes (A and B up, C down): the rate pageable memory could reach
 * too, were it pinned. */
static void transfer_table(bench_report *rep, const bench_table *t, const char *kernel_impl) {
    const bench_ceilings *c = &rep->ceil;
    fprintf(rep->sum, "| n | host memory | copies ms | copies GB/s | %% of the pinned ceiling |\n|---|---|---|---|---|\n");
    bench_series k = bench_pick(t, "square", kernel_impl, NULL, false, BENCH_MS, "");
    for (int i = 0; i < N_IMPLS; i++) {
        if (!impls[i].transfer) continue;
        bench_series x = bench_pick(t, "square", impls[i].name, NULL, true, BENCH_MS, "");
        const double *up = c->pinned_gbps;
        for (int a = 0; a < x.n; a++)
            for (int b = 0; b < k.n; b++) {
                if (k.x[b] != x.x[a]) continue;
                double n = x.x[a], ms = x.y[a] - k.y[b], bytes = 4.0 * 3 * n * n; /* A, B up; C down */
                double ideal_ms = (4.0 * 2 * n * n / up[0] + 4.0 * n * n / up[1]) / 1e6;
                char pct[32];
                fprintf(rep->sum, "| %.0f | %s | %.3f | %.1f | %s |\n", n, impls[i].pinned ? "pinned" : "pageable", ms,
                        bytes / ms / 1e6, bench_fmt_num(100.0 * ideal_ms / ms, "%.0f%%", pct, sizeof pct));
            }
    }
    fprintf(rep->sum, "\n");
}

/* s's y at x, NAN where s has no point there */
static double y_at(const bench_series *s, double x) {
    for (int i = 0; i < s->n; i++)
        if (s->x[i] == x) return s->y[i];
    return NAN;
}

/* The own kernels' throughput as a share of cuBLAS's in the same
 * precision, per square n (columns fp32, tf32, bf16, fp16): where an own
 * tensor-core kernel (tf32, bf16, fp16) has rows. */
static void own_vs_cublas_table(bench_report *rep, const bench_table *t) {
    bench_series own[DG_PREC_COUNT], ref[DG_PREC_COUNT];
    const bench_series *rows = NULL; /* the n of the table: the tensor-core precision with most rows */
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        own[p] = bench_pick_prec(t, "square", "gpu-tiled", NULL, (dg_precision)p, false, BENCH_GFLOPS, "");
        ref[p] = bench_pick_prec(t, "square", "gpu-cublas", NULL, (dg_precision)p, false, BENCH_GFLOPS, "");
        if (p != DG_PREC_FP32 && own[p].n && (!rows || own[p].n > rows->n)) rows = &own[p];
    }
    if (!rows) return;
    fprintf(rep->sum, "| n |");
    for (int p = 0; p < DG_PREC_COUNT; p++)
        fprintf(rep->sum, " gpu-tiled / gpu-cublas (%s) |", dg_precision_name((dg_precision)p));
    fprintf(rep->sum, "\n|---|");
    for (int p = 0; p < DG_PREC_COUNT; p++) fprintf(rep->sum, "---|");
    fprintf(rep->sum, "\n");
    for (int a = 0; a < rows->n; a++) {
        double x = rows->x[a];
        fprintf(rep->sum, "| %.0f |", x);
        for (int p = 0; p < DG_PREC_COUNT; p++) {
            char b[32];
            fprintf(rep->sum, " %s |", bench_fmt_num(100 * y_at(&own[p], x) / y_at(&ref[p], x), "%.0f%%", b, sizeof b));
        }
        fprintf(rep->sum, "\n");
    }
    fprintf(rep->sum, "\n");
}

/* The throughput chart of one precision: each implementation's rows in
 * it, against the ceilings measured in it (gemm_gflops for fp32,
 * gemm_gflops_DTYPE for the others), where it has rows. */
static void gflops_chart(bench_report *rep, const bench_table *t, dg_precision p) {
    const char *name = dg_precision_name(p);
    char file[32], title[64];
    if (p == DG_PREC_FP32) snprintf(file, sizeof file, "gemm_gflops");
    else snprintf(file, sizeof file, "gemm_gflops_%s", name);
    snprintf(title, sizeof title, "GEMM throughput in %s against measured ceilings", name);
    bench_chart gf = {file, title, "n", "GFLOP/s", true, .vline = NAN};
    for (int i = 0; i < N_IMPLS; i++)
        bench_chart_add(&gf, bench_pick_prec(t, "square", impls[i].name, NULL, p, false, BENCH_GFLOPS, impls[i].name));
    if (!gf.n) return;
    char c0[48], c1[48];
    snprintf(c0, sizeof c0, "CPU ceiling (OpenBLAS %s)", name);
    snprintf(c1, sizeof c1, "GPU ceiling (cuBLAS %s)", name);
    bench_chart_hline(&gf, rep->ceil.cpu_gemm[p], c0);
    bench_chart_hline(&gf, rep->ceil.gpu_gemm[p], c1);
    bench_chart_draw(rep, &gf);
}

/* Charts gemm_time (fp32), gemm_gflops[_DTYPE] (per precision, against
 * its ceilings), gemm_speedup (the `speedup` pair in each precision,
 * kernels only, and fp32 with transfers from pageable and from pinned
 * memory) and the summary's crossover, peak and transfer tables; square
 * shapes only, x = n. */
bool bench_report_gemm(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    const gemm_impl *cpu = NULL, *gpu = NULL, *pin = NULL;
    bench_chart tm = {"gemm_time", "sgemm time, square n x n x n", "n", "median ms", true, .vline = NAN};
    for (int i = 0; i < N_IMPLS; i++) {
        bench_chart_add(&tm, bench_pick(t, "square", impls[i].name, NULL, false, BENCH_MS, impls[i].name));
        if (impls[i].speedup && impls[i].gpu) gpu = &impls[i];
        else if (impls[i].speedup) cpu = &impls[i];
        if (impls[i].pinned) pin = &impls[i];
    }
    char titles[N_IMPLS][64];
    for (int i = 0; i < N_IMPLS; i++)
        if (impls[i].transfer) {
            snprintf(titles[i], sizeof titles[i], "%s incl. transfers", impls[i].name);
            bench_chart_add(&tm, bench_pick(t, "square", impls[i].name, NULL, true, BENCH_MS, titles[i]));
        }
    /* kernels only in each precision, then fp32 with the copies */
    bench_series sp_prec[DG_PREC_COUNT], energy[DG_PREC_COUNT];
    char sp_title[DG_PREC_COUNT][64];
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        bench_series c = bench_pick_prec(t, "square", cpu->name, NULL, (dg_precision)p, false, BENCH_MS, "");
        bench_series g = bench_pick_prec(t, "square", gpu->name, NULL, (dg_precision)p, false, BENCH_MS, "");
        snprintf(sp_title[p], sizeof sp_title[p], "%s / %s, %s", gpu->name, cpu->name, dg_precision_name((dg_precision)p));
        sp_prec[p] = bench_speedup(&c, &g, sp_title[p]);
        bench_series ce = bench_pick_prec(t, "square", cpu->name, NULL, (dg_precision)p, false, BENCH_JOULES, "");
        bench_series ge = bench_pick_prec(t, "square", gpu->name, NULL, (dg_precision)p, false, BENCH_JOULES, "");
        energy[p] = bench_speedup(&ce, &ge, "");
    }
    bench_series c = bench_pick(t, "square", cpu->name, NULL, false, BENCH_MS, "");
    bench_series g1 = bench_pick(t, "square", gpu->name, NULL, true, BENCH_MS, "");
    bench_series g2 = bench_pick(t, "square", pin->name, NULL, true, BENCH_MS, "");
    bench_series s1 = bench_speedup(&c, &g1, "fp32 incl. transfers, pageable host");
    bench_series s2 = bench_speedup(&c, &g2, "fp32 incl. transfers, pinned host");
    bench_chart sp = {"gemm_speedup", "GEMM speedup, GPU over CPU (>1: GPU faster)", "n", "speedup", true,
                      .vline = bench_crossover(&s1)};
    for (int p = 0; p < DG_PREC_COUNT; p++) bench_chart_add(&sp, sp_prec[p]);
    bench_chart_add(&sp, s1);
    bench_chart_add(&sp, s2);
    bench_chart_hline(&sp, 1.0, "break-even");
    char cr[96];
    /* the energy crossover: from which n the GPU board's joules per GEMM
     * are fewer than the CPU packages' and DRAM's (kernels only) */
    fprintf(rep->sum, "## GEMM (square, %s vs %s)\n\n| timing | dtype | crossover n | energy crossover n |\n"
                      "|---|---|---|---|\n", gpu->name, cpu->name);
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        if (!sp_prec[p].n && p != DG_PREC_FP32) continue; /* a precision not run; fp32 says n/a */
        char ecr[96];
        bench_crossover_str(&sp_prec[p], cr, sizeof cr);
        bench_energy_crossover_str(&energy[p], ecr, sizeof ecr);
        fprintf(rep->sum, "| kernels only | %s | %s | %s |\n", dg_precision_name((dg_precision)p), cr, ecr);
    }
    bench_crossover_str(&s1, cr, sizeof cr);
    fprintf(rep->sum, "| with host-device transfers, pageable host memory | fp32 | %s | - |\n", cr);
    bench_crossover_str(&s2, cr, sizeof cr);
    fprintf(rep->sum, "| with host-device transfers, pinned host memory | fp32 | %s | - |\n\n", cr);
    fprintf(rep->sum, "| impl | dtype | peak GFLOP/s | at n | best GFLOP/J | at n |\n|---|---|---|---|---|---|\n");
    for (int p = 0; p < DG_PREC_COUNT; p++)
        for (int i = 0; i < N_IMPLS; i++) {
            bench_series s = bench_pick_prec(t, "square", impls[i].name, NULL, (dg_precision)p, false, BENCH_GFLOPS, "");
            bench_series e = bench_pick_prec(t, "square", impls[i].name, NULL, (dg_precision)p, false,
                                             BENCH_GFLOP_PER_J, "");
            double at, best = bench_series_max(&s, &at), e_at, e_best = bench_series_max(&e, &e_at);
            char b1[32], b2[32];
            if (s.n)
                fprintf(rep->sum, "| %s | %s | %.1f | %.0f | %s | %s |\n", impls[i].name,
                        dg_precision_name((dg_precision)p), best, at, bench_fmt_num(e_best, "%.1f", b1, sizeof b1),
                        bench_fmt_num(e_at, "%.0f", b2, sizeof b2));
        }
    fprintf(rep->sum, "\n");
    own_vs_cublas_table(rep, t);
    if (g1.n || g2.n) transfer_table(rep, t, gpu->name);
    bench_chart_draw(rep, &tm);
    for (int p = 0; p < DG_PREC_COUNT; p++) gflops_chart(rep, t, (dg_precision)p);
    bench_chart_draw(rep, &sp);
    return true;
}
