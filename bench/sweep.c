#include "sweep.h"

#include <string.h>

/* in the order `bench plot` writes their sections and `bench compare` their rows */
const sweep_def bench_sweeps[] = {
    {.name = "ceiling", .what = "each device's measured peak: large sgemm and streaming copy",
     .run = sweep_ceilings, .ceilings = bench_ceilings_read},
    {.name = "gemm",
     .what = "sgemm: square 32..8192 and non-square shapes; cpu-naive, cpu-omp, cpu-openblas, gpu-naive, "
             "gpu-tiled, gpu-cublas, gpu-cublas-tf32; GPU with and without transfers",
     .run = sweep_gemm, .report = bench_report_gemm},
    {.name = "ops",
     .what = "elementwise, broadcasting, reductions, softmax, softmax cross-entropy, transpose; forward and "
             "backward; 1K..64M elements; GB/s",
     .run = sweep_ops, .report = bench_report_ops},
    {.name = "mlp",
     .what = "one MLP training step (forward, backward, Adam update) over batch sizes and widths; GPU with "
             "and without CUDA-graph replay",
     .run = sweep_mlp, .report = bench_report_mlp},
    {.name = "autodiff",
     .what = "the MLP training step written by hand against the kernels vs the dg_grad graph (and its "
             "CUDA-graph replay)",
     .run = sweep_autodiff, .report = bench_report_autodiff},
    {.name = "train",
     .what = "Fashion-MNIST epoch time of logreg and the default MLP over batch sizes 32..4096 (needs "
             "dataset-fashion-mnist)",
     .run = sweep_train, .report = bench_report_train},
};
const int bench_n_sweeps = (int)(sizeof bench_sweeps / sizeof bench_sweeps[0]);

const char *bench_status_word(dg_status st) {
    switch (st) {
    case DG_OK:              return "ok";
    case DG_ERR_UNSUPPORTED: return "unsupported";
    case DG_ERR_OOM:         return "oom";
    default:                 return "error";
    }
}

void bench_emit(bench_ctx *ctx, const bench_row *given) {
    bench_row row = *given;
    const bench_row *r = &row;
    /* Ctrl-C came before the first timed run: nothing was measured */
    if (bench_interrupted && !strcmp(row.status, "ok") && row.st.reps == 0) row.status = "interrupted";
    bench_csv_write(ctx->csv, r);
    ctx->rows++;
    bool bad = strcmp(r->status, "ok") && strcmp(r->status, "skipped") && strcmp(r->status, "interrupted");
    ctx->failed += bad;
    if (bad)
        fprintf(stderr, "bench: %s %s %s %lldx%lldx%lld: %s\n", r->sweep, r->name, r->impl, (long long)r->m,
                (long long)r->n, (long long)r->k, r->status);
    if (ctx->progress)
        fprintf(stderr, "\r\033[K%s: %d rows  %-14s %-18s %lld %s", r->sweep, ctx->rows, r->name, r->impl,
                (long long)r->m, r->status);
}

int bench_sizes(const bench_ctx *ctx, const long long *defaults, int n, const long long **out) {
    if (ctx->n_sizes > 0) {
        *out = ctx->sizes;
        return ctx->n_sizes;
    }
    *out = defaults;
    return n;
}
