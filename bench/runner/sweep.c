#include "runner/sweep.h"

#include <fnmatch.h>
#include <string.h>
#include <unistd.h>

#include "machine/gpu_monitor.h"
#include <duograd/testing.h>
#include "writers/json.h"
#include "writers/samples.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

/* in the order `bench plot` writes their sections and `bench compare` their rows */
const sweep_def bench_sweeps[] = {
    {.name = "ceiling", .by_default = true,
     .what = "each device's measured peak: a large GEMM in each --dtype, streaming copy, and host-device "
             "transfers from pinned and pageable memory",
     .run = sweep_ceilings, .report = bench_report_ceiling, .ceilings = bench_ceilings_read},
    {.name = "gemm", .by_default = true,
     .what = "GEMM: square 32..8192 and non-square shapes; cpu-naive, cpu-omp, cpu-openblas, gpu-naive, "
             "gpu-tiled, gpu-cublas; GPU with and without transfers; --dtype fp32, tf32, bf16, fp16",
     .run = sweep_gemm, .report = bench_report_gemm},
    {.name = "ops", .by_default = true,
     .what = "elementwise, broadcasting, reductions, softmax, softmax cross-entropy, transpose; forward and "
             "backward; 1K..64M elements; GB/s",
     .run = sweep_ops, .report = bench_report_ops},
    {.name = "mlp", .by_default = true,
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
    {.name = "conv",
     .what = "conv2d forward, backward-data and backward-weight on ResNet-18's and LeNet-sized layer shapes "
             "over batch sizes; cpu im2col + sgemm, gpu im2col + cuBLAS and implicit GEMM, oneDNN and cuDNN; "
             "--dtype fp32, tf32, bf16, fp16; GFLOP/s",
     .run = sweep_conv, .report = bench_report_conv},
    {.name = "resnet",
     .what = "ResNet-18 training step (SGD, momentum, weight decay) over batch sizes, CIFAR and ImageNet "
             "stems; GPU with and without CUDA-graph replay; the backends' defaults, own kernels and vendor "
             "libraries (CPU: with --impl); --dtype fp32, tf32, bf16, fp16; images/s and arena bytes",
     .run = sweep_resnet, .report = bench_report_resnet},
    {.name = "attention",
     .what = "scaled dot-product attention, composed (matmul, softmax, matmul) and fused, forward and "
             "forward+backward, B=16 H=8 Dh=64 over T 128..8192, causal and not; time, TFLOP/s, arena bytes",
     .run = sweep_attention, .report = bench_report_attention},
    {.name = "transformer",
     .what = "char-LM training step (4 pre-norm blocks, width 256, Adam) over batch and context, fused and "
             "composed attention; GPU with and without CUDA-graph replay; tokens/s and arena bytes",
     .run = sweep_transformer, .report = bench_report_transformer},
    {.name = "model",
     .what = "the training step (softmax cross-entropy, SGD momentum) of an ONNX file's model, --model "
             "FILE.onnx, over batch sizes; GPU with and without CUDA-graph replay; --dtype fp32, tf32, bf16, "
             "fp16; each implementation checked at batch 2 against the float64 step",
     .run = sweep_model, .report = bench_report_model,
     .not_in_all = true}, /* it needs --model: asked by name, or run by --model alone */
    {.name = "scaling",
     .what = "data parallelism over 1, 2, 4, 8 GPUs (NCCL): all-reduce bus bandwidth per message size (NCCL's "
             "own call and the graph's node), and MLP, ResNet-18 and char-LM steps, weak and strong scaling; "
             "under mpirun, the GPU models one GPU per rank (NCCL over MPI) and, with --backends cpu, MLP and "
             "char-LM steps over 1, 2, 4, ... CPU ranks (MPI), the all-reduce blocking and overlapped",
     .run = sweep_scaling, .report = bench_report_scaling,
     .not_in_all = true}, /* it opens every GPU of the host: asked by name */
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

/* The cache a memory-bound measurement's bytes may fit in (GPU L2, CPU
 * last level): its GB/s are then a cache's bandwidth, not the memory's. */
static size_t cache_bytes(const bench_ctx *ctx, const bench_row *r) {
#ifdef DG_HAVE_CUDA
    if (!strcmp(r->backend, "gpu")) return ctx->gpu ? dg_gpu_l2_bytes(ctx->gpu) : 0;
#endif
    (void)ctx;
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return !strcmp(r->backend, "cpu") && llc > 0 ? (size_t)llc : 0;
}

/* the row's note: the sweep's own, then what the timing flags */
static void row_note(const bench_ctx *ctx, const bench_row *r, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
#define NOTE(...) (len += (size_t)snprintf(buf + len, len < n ? n - len : 0, __VA_ARGS__))
    if (r->note) NOTE("%s", r->note);
    if (r->st.reps > 0 && r->st.retries) NOTE("%smeasured %d times (cv above %.3g%%)", len ? "; " : "",
                                              r->st.retries + 1, ctx->timing.max_cv_pct);
    if (r->st.reps > 0 && r->st.capped) NOTE("%s--max-reps %d reached before --min-time", len ? "; " : "",
                                             ctx->timing.max_reps);
    /* under 4 flops a byte a row is memory-bound: its GB/s is the figure */
    size_t cache = r->flops < 4 * r->bytes ? cache_bytes(ctx, r) : 0;
    if (r->st.reps > 0 && !r->cold && r->bytes > 0 && cache > 0 && r->bytes <= (double)cache)
        NOTE("%sfits in %s (%.3g MB of %.3g MB)", len ? "; " : "", strcmp(r->backend, "gpu") ? "LLC" : "L2",
             r->bytes / 1e6, (double)cache / 1e6);
    char why[160];
    if (r->st.reps > 0 && !strcmp(r->backend, "gpu") && bench_gpu_monitor_throttled(ctx->gpu_mon, why, sizeof why))
        NOTE("%sGPU throttled after the run (%s)", len ? "; " : "", why);
#undef NOTE
}

/* Off a terminal (CI, a pipe) a plain progress line this often, seconds */
#define PROGRESS_EVERY_S 10.0

/* On a terminal, one line rewritten at each row; elsewhere a line every
 * PROGRESS_EVERY_S seconds. The time left is the runner's estimate
 * (ctx->left_s, eta.h). */
static void show_progress(bench_ctx *ctx, const bench_row *r) {
    double now = bench_now_s(), elapsed = now - ctx->t0;
    if (!ctx->progress && now - ctx->last_line_s < PROGRESS_EVERY_S) return;
    ctx->last_line_s = now;
    char left[48] = "";
    if (ctx->left_s >= 0) snprintf(left, sizeof left, ", ~%.0f s left", ctx->left_s);
    int total = ctx->planned > ctx->rows ? ctx->planned : ctx->rows;
    if (ctx->progress)
        fprintf(stderr, "\r\033[K%s: %d/%d rows (%.0f s%s)  %-14s %-18s %lld %s", r->sweep, ctx->rows, total, elapsed,
                left, r->name, r->impl, (long long)r->m, r->status);
    else
        fprintf(stderr, "bench: %s: %d/%d rows (%.0f s%s), last %s %s %lld %s\n", r->sweep, ctx->rows, total, elapsed,
                left, r->name, r->impl, (long long)r->m, r->status);
}

void bench_emit(bench_ctx *ctx, const bench_row *given) {
    bench_row row = *given;
    const bench_row *r = &row;
    char note[512];
    /* Ctrl-C or SIGTERM came before the row's runs were all done: its
     * figures, if any, are of fewer runs than the timing rules ask */
    if (bench_interrupted && !strcmp(row.status, "ok") && (row.st.reps == 0 || row.st.cut_short))
        row.status = "interrupted";
    if (!strcmp(row.status, "ok") && ctx->timing.max_cv_pct > 0 && row.st.cv_pct > ctx->timing.max_cv_pct)
        row.status = "noisy";
    row.cold = row.st.cold && row.st.reps > 0;
    row_note(ctx, &row, note, sizeof note);
    row.note = note[0] ? note : NULL;
    bench_csv_write(ctx->csv, r);
    if (ctx->samples_csv) bench_samples_write(ctx->samples_csv, r);
    if (ctx->json) bench_json_add(ctx->json, r);
    ctx->rows++;
    ctx->noisy += !strcmp(r->status, "noisy");
    bool bad = strcmp(r->status, "ok") && strcmp(r->status, "noisy") && strcmp(r->status, "skipped") &&
               strcmp(r->status, "interrupted");
    ctx->failed += bad;
    if (bad)
        fprintf(stderr, "%sbench: %s %s %s %lldx%lldx%lld: %s%s%s\n", ctx->progress ? "\r\033[K" : "", r->sweep,
                r->name, r->impl, (long long)r->m, (long long)r->n, (long long)r->k, r->status, r->note ? ": " : "",
                r->note ? r->note : "");
    show_progress(ctx, r);
}

void bench_emit_finding(bench_ctx *ctx, const bench_row *r) {
    int failed = ctx->failed;
    bench_emit(ctx, r);
    ctx->failed = failed;
}

void bench_plan_rows(bench_ctx *ctx, int n) { ctx->planned += n; }

/* the list given for this sweep, else the one given for all */
static const bench_size_list *user_sizes(const bench_ctx *ctx) {
    const bench_size_list *all = NULL;
    for (int i = 0; i < ctx->n_size_lists; i++) {
        const bench_size_list *l = &ctx->size_lists[i];
        if (!l->sweep) all = l;
        else if (ctx->sweep && !strcmp(l->sweep, ctx->sweep)) return l;
    }
    return all;
}

bool bench_user_sizes(const bench_ctx *ctx) { return user_sizes(ctx) != NULL; }

int bench_sizes(const bench_ctx *ctx, const long long *defaults, int n, const long long **out) {
    const bench_size_list *l = user_sizes(ctx);
    if (l) {
        *out = l->v;
        return l->n;
    }
    *out = defaults;
    return n;
}

/* whether s matches one of the comma-separated glob patterns (NULL: all) */
static bool matches(const char *patterns, const char *s) {
    if (!patterns) return true;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", patterns);
    for (char *p = buf, *tok; (tok = strsep(&p, ",")) != NULL;)
        if (fnmatch(tok, s, 0) == 0) return true;
    return false;
}

bool bench_wanted(const bench_ctx *ctx, const char *name, const char *impl) {
    return matches(ctx->case_filter, name) && matches(ctx->impl_filter, impl);
}
