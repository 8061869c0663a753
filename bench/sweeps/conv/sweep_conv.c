/* sweep_conv.c: conv2d forward, backward-data and backward-weight, each
 * timed alone as its plan step, over the layer shapes of ResNet-18 (CIFAR
 * and ImageNet stems), the project's small CNN and LeNet, and batch sizes.
 *
 * Implementations: cpu-im2col (the CPU backend: im2col + OpenBLAS sgemm in
 * passes of whole images, each GEMM on every thread: DG_CPU_CONV_PASSES),
 * cpu-im2col-batch (OpenMP over the batch, an image per thread at a time
 * with a one-thread sgemm: DG_CPU_CONV_BATCH; skipped where it would run
 * as cpu-im2col: one image, or a scratch too small for two slots),
 * cpu-shift (the stride-1 layers without im2col, from shifted views of
 * zero-padded planes, OpenMP over the batch: DG_CPU_CONV_SHIFT; skipped
 * where it would run as cpu-im2col-batch: a stride above 1, a 1x1
 * unpadded layer, padding beyond the kernel, one thread, or a scratch too
 * small for two slots),
 * cpu-im2col-chan (the weight's gradient split by input channels, each
 * thread's GEMM into its own columns of dw: DG_CPU_CONV_CHANNELS; its
 * forward and dx rows are skipped, as are its rows where it would run as
 * cpu-im2col: one thread or one input channel),
 * gpu-im2col (im2col + cuBLAS; also with transfers: transfer = 1, the two
 * inputs uploaded from host memory and the output downloaded inside the
 * timed region) and gpu-implicit (DG_CONV_IMPLICIT). Each row's step runs
 * with its implementation in the step's flags, as a plan made with that
 * dg_plan_opts.conv would run it (dg_step_flags); the backend's own
 * settings are never touched. A strategy that would fall back elsewhere
 * is found by asking the backend what the step runs as
 * (dg_backend_step_impl). TF32 stays off in every row.
 *
 * One graph per shape and batch: y = conv2d(x, w), loss = sum(y * g), and
 * dg_grad's dx = conv2d_backward_data(dy, w), dw = conv2d_backward_weight(
 * dy, x). The plan is never run as a whole: each row uploads its node's
 * two inputs from seeded host values (dy = g), fills the output with NaN,
 * runs the step and checks it (check f64-sampled, conv_check.h: 256 output
 * entries against float64 dot products, error scaled by the sum of |terms|);
 * a row that fails is "wrong" and not timed. Uploading before each row
 * also matters because the plan may place one step's im2col scratch over
 * another step's input.
 *
 * Columns: m, n, k are the GEMM of the direction (per group; groups = 1
 * in every shape here): forward M = o/groups, N = batch*oh*ow,
 * K = c/groups*kh*kw; backward-data M = c/groups*kh*kw, N = batch*oh*ow,
 * K = o/groups; backward-weight M = o/groups, N = c/groups*kh*kw,
 * K = batch*oh*ow. flops = 2*batch*o*oh*ow*(c/groups)*kh*kw in every
 * direction, bytes = the node's two inputs and its output, scratch_bytes =
 * dg_backend_step_scratch_bytes of the timed node with the row's kernels
 * (the im2col columns; for gpu-implicit none, or backward-weight's split
 * partials). The GPU plan is made with DG_CONV_IM2COL, so it reserves the
 * columns and both GPU implementations run on it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sweeps/conv/conv_cases.h"
#include "check/conv_check.h"
#include "core/autodiff.h"
#include "core/layout.h"
#include "core/plan.h"
#include "core/rng.h"
#include "core/status_internal.h"
#include "cpu_backend/cpu_backend.h"
#include "machine/env.h"
#include "runner/sweep.h"

static const long long default_batches[] = {1, 8, 32, 128};
static const long long quick_batches[] = {1, 8};
/* On the CPU, the ImageNet-stem shapes (family r18i) stop at this batch
 * unless --sizes gives the batches: at 128 they took 106 s of the default
 * sweep's 4.5 minutes on a 2-core machine (each row warmed up, repeated,
 * measured again when noisy), and at 32 their GEMMs are already large
 * (N = batch*oh*ow >= 1568). Their rows at larger batches are written as
 * skipped, with the reason. */
#define CPU_IMAGENET_MAX_BATCH 32

/* the host inputs each direction's node reads, in its input order */
enum { IN_X, IN_W, IN_DY };
static const int dir_inputs[CONV_N_DIRS][2] = {{IN_X, IN_W}, {IN_DY, IN_W}, {IN_DY, IN_X}};

/* the flags of a step run by implementation im: its convolution choice,
 * nothing else (TF32 off, the backend's GEMM) */
static unsigned impl_flags(const conv_impl *im) { return dg_step_flags(&(dg_plan_opts){.conv = im->conv}); }

/* ---- one shape at one batch ---- */

typedef struct conv_problem {
    const conv_shape *sh;
    int          batch;
    dg_graph    *g;
    dg_node     *in[3];                /* x, w, dy (the node the backward ops read)  */
    dg_node     *out[CONV_N_DIRS];     /* y, dx, dw                                  */
    float       *host[3];              /* seeded values of x, w, dy (= g)            */
    float       *host_out;             /* room for the largest output                */
    conv_sample *ref[CONV_N_DIRS];     /* NULL until a row of the direction needs it */
    char         name[CONV_N_DIRS][48];
} conv_problem;

/* the graph of shape sh at a batch (no tensor memory yet) */
static dg_status problem_build(conv_problem *pb, const conv_shape *sh, int batch) {
    *pb = (conv_problem){.sh = sh, .batch = batch};
    for (int d = 0; d < CONV_N_DIRS; d++) conv_case_name(sh, d, pb->name[d], sizeof pb->name[d]);
    if (!(pb->g = dg_graph_new())) return dg__fail(DG_ERR_OOM, "conv sweep: out of memory for a graph");
    dg_graph *g = pb->g;
    dg_node *x = dg_input(g, "x", DG_SHAPE(batch, sh->c, sh->h, sh->w));
    dg_node *w = dg_input(g, "w", DG_SHAPE(sh->o, sh->c, sh->kh, sh->kw));
    dg_conv2d_opts o = {.stride = {sh->stride, sh->stride}, .pad = {sh->pad, sh->pad}};
    dg_node *y = dg_conv2d(g, x, w, NULL, o);
    dg_node *gy = y ? dg_input(g, "g", y->shape) : NULL;
    dg_node *wrt[2] = {x, w}, *grads[2] = {NULL, NULL};
    dg_status st = dg_graph_status(g);
    if (st == DG_OK) st = dg_grad(g, dg_sum(g, dg_mul(g, y, gy), DG_ALL_AXES, false), wrt, 2, grads);
    if (st != DG_OK) return st;
    /* each row uploads the inputs it names: they must be these nodes */
    if (grads[0]->op != DG_OP_CONV2D_BACKWARD_DATA || grads[1]->op != DG_OP_CONV2D_BACKWARD_WEIGHT ||
        grads[0]->in[0] != grads[1]->in[0] || grads[0]->in[1] != w || grads[1]->in[1] != x)
        return dg__fail(DG_ERR_INVALID, "conv sweep: dg_grad gave %s and %s, not the convolution's backward ops "
                        "of (dy, w) and (dy, x)", dg_op_name(grads[0]->op), dg_op_name(grads[1]->op));
    pb->in[IN_X] = x;
    pb->in[IN_W] = w;
    pb->in[IN_DY] = grads[0]->in[0]; /* 1 * g, computed by the plan, uploaded by each row */
    pb->out[CONV_FWD] = y;
    pb->out[CONV_BWD_DATA] = grads[0];
    pb->out[CONV_BWD_WEIGHT] = grads[1];
    return DG_OK;
}

/* seeded inputs, uniform in [-1, 1) (zero mean: conv_check.h's tolerance
 * counts on it), the same on every backend; the output buffer */
static dg_status problem_fill(conv_problem *pb, uint64_t seed) {
    int64_t most = 0;
    for (int d = 0; d < CONV_N_DIRS; d++) most = dg_node_numel(pb->out[d]) > most ? dg_node_numel(pb->out[d]) : most;
    pb->host_out = malloc((size_t)most * sizeof(float));
    dg_rng r = dg_rng_new(seed);
    for (int i = 0; i < 3; i++) {
        int64_t n = dg_node_numel(pb->in[i]);
        if (!(pb->host[i] = malloc((size_t)n * sizeof(float))) || !pb->host_out)
            return dg__fail(DG_ERR_OOM, "conv sweep: host memory for %s's tensors", pb->sh->name);
        for (int64_t j = 0; j < n; j++) pb->host[i][j] = (float)(2 * dg_rng_uniform(&r) - 1);
    }
    return DG_OK;
}

static void problem_free(conv_problem *pb) {
    for (int i = 0; i < 3; i++) free(pb->host[i]);
    for (int d = 0; d < CONV_N_DIRS; d++) free(pb->ref[d]);
    free(pb->host_out);
    dg_graph_free(pb->g);
}

/* the float64 entries of direction d, drawn once for every backend */
static dg_status problem_ref(conv_problem *pb, int d) {
    if (pb->ref[d]) return DG_OK;
    if (!(pb->ref[d] = malloc(CONV_CHECK_SAMPLES * sizeof(conv_sample))))
        return dg__fail(DG_ERR_OOM, "conv sweep: host memory for the check");
    dg_status st = conv_check_sample(pb->out[d], pb->host[dir_inputs[d][0]], pb->host[dir_inputs[d][1]],
                                     (uint64_t)pb->batch * 7919u + (uint64_t)d, pb->ref[d], CONV_CHECK_SAMPLES);
    if (st != DG_OK) {
        free(pb->ref[d]);
        pb->ref[d] = NULL;
    }
    return st;
}

/* Host bytes of the problem: its seeded inputs and the output buffer, and
 * for the CPU its plan at most: the inputs again, dy's two forerunners of
 * its size (the broadcast gradient of the sum, then 1 * g), the outputs and
 * each step's im2col scratch. */
static double host_bytes(const conv_problem *pb, bool cpu) {
    double in = 0, out = 0, most = 0, scratch = 0;
    for (int i = 0; i < 3; i++) in += (double)dg_node_bytes(pb->in[i]);
    for (int d = 0; d < CONV_N_DIRS; d++) {
        double b = (double)dg_node_bytes(pb->out[d]);
        out += b;
        most = b > most ? b : most;
        scratch += (double)dg_node_scratch_bytes(pb->out[d]);
    }
    return in + most + (cpu ? in + 2.0 * (double)dg_node_bytes(pb->in[IN_DY]) + out + scratch : 0);
}

/* ---- a row ---- */

typedef struct conv_run {
    dg_backend    *be;
    dg_step        step;        /* the plan's, with the row's implementation */
    void          *dst[2];      /* the step's inputs' storage */
    const float   *src[2];
    size_t         bytes[2];
    void          *out;
    float         *host_out;
    size_t         out_bytes;
} conv_run;

static dg_status run_step(void *arg) {
    conv_run *r = arg;
    return dg_backend_compute(r->be, &r->step);
}

/* the step with its inputs uploaded and its output downloaded */
static dg_status run_transfer(void *arg) {
    conv_run *r = arg;
    dg_status st = DG_OK;
    for (int i = 0; i < 2 && st == DG_OK; i++) st = dg_backend_upload(r->be, r->dst[i], r->src[i], r->bytes[i]);
    if (st == DG_OK) st = dg_backend_compute(r->be, &r->step);
    return st == DG_OK ? dg_backend_download(r->be, r->host_out, r->out, r->out_bytes) : st;
}

static const dg_step *step_of(const dg_plan *p, const dg_node *nd) {
    int n = 0;
    const dg_step *steps = dg_plan_steps(p, &n);
    for (int i = 0; i < n; i++)
        if (steps[i].node == nd) return &steps[i];
    return NULL;
}

static bench_row row_of(const bench_ctx *ctx, const conv_problem *pb, int d, const conv_impl *im) {
    const dg_node *nd = pb->out[d];
    dg_conv_dims g = dg_conv_dims_of(nd);
    int64_t r = g.cg * g.kh * g.kw, cols = g.n * g.cols;
    int64_t mnk[CONV_N_DIRS][3] = {{g.og, cols, r}, {r, cols, g.og}, {g.og, r, cols}};
    dg_cost cost = dg_node_cost(nd);
    dg_backend *be = im->gpu ? ctx->gpu : ctx->cpu;
    size_t scratch = be ? dg_backend_step_scratch_bytes(be, nd, impl_flags(im)) : dg_node_scratch_bytes(nd);
    return (bench_row){.sweep = "conv", .name = pb->name[d], .impl = im->name, .backend = im->gpu ? "gpu" : "cpu",
                       .m = mnk[d][0], .n = mnk[d][1], .k = mnk[d][2], .batch = pb->batch,
                       .threads = ctx->threads, .transfer = im->transfer, .warmup = ctx->timing.warmup,
                       .st = BENCH_NO_STATS, .flops = cost.flops, .bytes = cost.bytes,
                       .scratch_bytes = (int64_t)scratch, .max_rel_err = NAN,
                       .check = CONV_CHECK_WORD};
}

/* Checks direction d by implementation im on plan p, then times it; its
 * median time, NaN when it was not measured. */
static double run_row(bench_ctx *ctx, conv_problem *pb, dg_plan *p, int d, const conv_impl *im) {
    bench_row row = row_of(ctx, pb, d, im);
    dg_backend *be = im->gpu ? ctx->gpu : ctx->cpu;
    const dg_node *nd = pb->out[d];
    const dg_step *step = step_of(p, nd);
    conv_run run = {be, step ? *step : (dg_step){0}, .out = dg_plan_data(p, nd), .host_out = pb->host_out,
                    .out_bytes = dg_node_bytes(nd)};
    run.step.flags = impl_flags(im);
    for (int i = 0; i < 2; i++) {
        int which = dir_inputs[d][i];
        run.dst[i] = dg_plan_data(p, pb->in[which]);
        run.src[i] = pb->host[which];
        run.bytes[i] = dg_node_bytes(pb->in[which]);
    }
    dg_status st = step && run.out && run.dst[0] && run.dst[1]
                       ? problem_ref(pb, d)
                       : dg__fail(DG_ERR_INVALID, "conv sweep: the plan lacks %s's step or buffers", pb->name[d]);
    if (st == DG_OK) { /* NaN in the output first: an entry left unwritten fails the check */
        for (size_t i = 0; i < run.out_bytes / sizeof(float); i++) pb->host_out[i] = NAN;
        st = dg_backend_upload(be, run.out, pb->host_out, run.out_bytes);
    }
    if (st == DG_OK) st = run_transfer(&run);
    if (st == DG_OK) {
        row.max_rel_err = conv_check_error(pb->ref[d], CONV_CHECK_SAMPLES, pb->host_out);
        row.status = row.max_rel_err <= CONV_CHECK_TOL ? "ok" : "wrong";
        if (!strcmp(row.status, "ok"))
            st = im->transfer ? bench_time(be, false, run_transfer, &run, &ctx->timing, &row.st)
                              : bench_time(be, im->gpu, run_step, &run, &ctx->timing, &row.st);
    }
    if (st != DG_OK) {
        row.status = bench_status_word(st);
        row.note = dg_last_error();
    }
    bench_emit(ctx, &row);
    return row.st.reps > 0 ? row.st.median_ms : NAN;
}

/* what the CPU rows ran so far, to predict the next one's time */
typedef struct cpu_pred {
    double last_ms[CONV_N_DIRS], last_flops[CONV_N_DIRS]; /* this shape's previous batch */
    double ms_per_flop;                                   /* the last row of any shape   */
} cpu_pred;

/* why a row does not run (a skipped row), or NULL */
static const char *skip_reason(const bench_ctx *ctx, const conv_problem *pb, int d, const conv_impl *im,
                               const cpu_pred *pred, const char *no_memory, char *why, size_t n) {
    if (*no_memory) return no_memory;
    if (im->gpu) return NULL;
    const dg_node *nd = pb->out[d];
    const conv_shape *sh = pb->sh;
    int threads = dg_cpu_threads(ctx->cpu);
    if (im->conv == DG_CONV_IM2COL_CHANNELS && nd->op != DG_OP_CONV2D_BACKWARD_WEIGHT)
        return "the channel split computes the weight's gradient only (this direction runs as the default)";
    /* the strategy the backend runs this step with: another one where the
     * row's does not apply, which is that one's row */
    char runs_as[32];
    dg_status st = dg_backend_step_impl(ctx->cpu, nd, impl_flags(im), runs_as, sizeof runs_as);
    if (st != DG_OK) {
        snprintf(why, n, "%s", dg_last_error());
        return why;
    }
    if (strcmp(runs_as, im->name)) {
        /* shift_applies: strides of 1, not a 1x1 unpadded layer, padding within the kernel */
        bool shift_applies = sh->stride == 1 && !(sh->kh == 1 && sh->kw == 1 && sh->pad == 0) &&
                             sh->pad <= sh->kh - 1 && sh->pad <= sh->kw - 1;
        const char *cause = "the scratch holds fewer than two threads' slots";
        if (im->conv == DG_CONV_IM2COL_CHANNELS) cause = "one thread or one input channel";
        else if (im->conv == DG_CONV_IM2COL_BATCH && (pb->batch < 2 || threads < 2)) cause = "one image or one thread";
        else if (im->conv == DG_CONV_SHIFT && !shift_applies)
            cause = "the shift does not apply (a stride above 1, a 1x1 unpadded layer, or padding beyond the kernel)";
        else if (threads < 2) cause = "one thread";
        snprintf(why, n, "runs as %s here: %s", runs_as, cause);
        return why;
    }
    if (!bench_user_sizes(ctx) && !strcmp(pb->sh->family, "r18i") && pb->batch > CPU_IMAGENET_MAX_BATCH) {
        snprintf(why, n, "ImageNet-sized: the CPU's default batches stop at %d (--sizes conv=LIST runs more)",
                 CPU_IMAGENET_MAX_BATCH);
        return why;
    }
    double flops = dg_node_cost(pb->out[d]).flops;
    double ms = pred->last_ms[d] > 0 ? pred->last_ms[d] * flops / pred->last_flops[d] : pred->ms_per_flop * flops;
    if (ms / 1e3 <= ctx->cpu_cap_s) return NULL;
    snprintf(why, n, "predicted %.1f s per run > cap %.1f s (--cpu-cap)", ms / 1e3, ctx->cpu_cap_s);
    return why;
}

static bool row_wanted(const bench_ctx *ctx, const char *name, const conv_impl *im) {
    return (im->gpu ? ctx->gpu : ctx->cpu) && bench_wanted(ctx, name, im->name);
}

/* Every row of one backend for a shape at a batch: skipped rows first,
 * then one plan for the rest. */
static void run_backend(bench_ctx *ctx, conv_problem *pb, bool gpu, cpu_pred *pred, const char *no_memory) {
    bool run[CONV_N_IMPLS][CONV_N_DIRS];
    int n_run = 0;
    for (int i = 0; i < CONV_N_IMPLS; i++)
        for (int d = 0; d < CONV_N_DIRS; d++) {
            char buf[160];
            const conv_impl *im = &conv_impls[i];
            run[i][d] = im->gpu == gpu && row_wanted(ctx, pb->name[d], im);
            const char *why = run[i][d] ? skip_reason(ctx, pb, d, im, pred, no_memory, buf, sizeof buf) : NULL;
            if (why) {
                bench_row row = row_of(ctx, pb, d, im);
                row.status = "skipped";
                row.note = why;
                bench_emit(ctx, &row);
                run[i][d] = false;
            }
            n_run += run[i][d];
        }
    if (!n_run) return;
    dg_backend *be = gpu ? ctx->gpu : ctx->cpu;
    dg_plan *p = NULL;
    /* a plan made with im2col on the GPU reserves its columns, so every
     * implementation runs on it (the CPU's plan is the same either way) */
    dg_status st = dg_plan_new(&p, pb->g, be, pb->out, CONV_N_DIRS,
                               &(dg_plan_opts){.conv = gpu ? DG_CONV_IM2COL : DG_CONV_DEFAULT});
    char why[256];
    snprintf(why, sizeof why, "%s", st != DG_OK ? dg_last_error() : "");
    for (int i = 0; i < CONV_N_IMPLS; i++)
        for (int d = 0; d < CONV_N_DIRS && !bench_interrupted; d++) {
            if (!run[i][d]) continue;
            if (st != DG_OK) {
                bench_row row = row_of(ctx, pb, d, &conv_impls[i]);
                row.status = bench_status_word(st);
                row.note = why;
                bench_emit(ctx, &row);
                continue;
            }
            double ms = run_row(ctx, pb, p, d, &conv_impls[i]), flops = dg_node_cost(pb->out[d]).flops;
            if (!gpu && ms > 0) { /* the next prediction starts from the row just measured */
                pred->last_ms[d] = ms;
                pred->last_flops[d] = flops;
                pred->ms_per_flop = ms / flops;
            }
        }
    dg_plan_free(p);
}

/* the rows a shape writes at each batch (the progress total; none: it is
 * not built) */
static int rows_wanted(const bench_ctx *ctx, const conv_shape *sh) {
    int n = 0;
    for (int d = 0; d < CONV_N_DIRS; d++) {
        char name[48];
        conv_case_name(sh, d, name, sizeof name);
        for (int i = 0; i < CONV_N_IMPLS; i++) n += row_wanted(ctx, name, &conv_impls[i]);
    }
    return n;
}

/* a shape whose graph or host tensors could not be made: a row for each
 * row it would have written */
static void emit_failed(bench_ctx *ctx, const conv_shape *sh, int batch, const char *status, const char *why) {
    for (int d = 0; d < CONV_N_DIRS; d++)
        for (int i = 0; i < CONV_N_IMPLS; i++) {
            char name[48];
            conv_case_name(sh, d, name, sizeof name);
            const conv_impl *im = &conv_impls[i];
            if (!row_wanted(ctx, name, im)) continue;
            bench_row row = {.sweep = "conv", .name = name, .impl = im->name, .backend = im->gpu ? "gpu" : "cpu",
                             .batch = batch, .threads = ctx->threads, .transfer = im->transfer,
                             .warmup = ctx->timing.warmup, .st = BENCH_NO_STATS, .max_rel_err = NAN,
                             .check = CONV_CHECK_WORD, .status = status, .note = why};
            bench_emit(ctx, &row);
        }
}

static void run_problem(bench_ctx *ctx, const conv_shape *sh, int batch, uint64_t seed, cpu_pred *pred) {
    conv_problem pb;
    dg_status st = problem_build(&pb, sh, batch);
    char no_memory[160] = "";
    double need = st == DG_OK ? host_bytes(&pb, ctx->cpu != NULL) : 0, avail = bench_mem_available();
    if (avail > 0 && need > 0.9 * avail)
        snprintf(no_memory, sizeof no_memory, "needs %.1f GB of host memory, %.1f GB available", need / 1e9,
                 avail / 1e9);
    if (st == DG_OK && !*no_memory) st = problem_fill(&pb, seed);
    if (st != DG_OK) {
        emit_failed(ctx, sh, batch, bench_status_word(st), dg_last_error());
    } else {
        run_backend(ctx, &pb, false, pred, no_memory);
        if (!bench_interrupted) run_backend(ctx, &pb, true, pred, no_memory);
    }
    problem_free(&pb);
}

dg_status sweep_conv(bench_ctx *ctx) {
    conv_shape_list l;
    dg_status st = conv_shapes(&l);
    if (st != DG_OK) return st;
    const long long *batches;
    int nb = bench_sizes(ctx, ctx->quick ? quick_batches : default_batches, ctx->quick ? 2 : 4, &batches);
    for (int s = 0; s < l.n; s++) bench_plan_rows(ctx, nb * rows_wanted(ctx, &l.s[s]));
    cpu_pred pred = {.ms_per_flop = 0};
    for (int s = 0; s < l.n && !bench_interrupted; s++) {
        if (!rows_wanted(ctx, &l.s[s])) continue;
        for (int d = 0; d < CONV_N_DIRS; d++) pred.last_ms[d] = pred.last_flops[d] = 0;
        for (int b = 0; b < nb && !bench_interrupted; b++) /* --sizes: 1 to 2^30 */
            run_problem(ctx, &l.s[s], (int)batches[b], (uint64_t)s << 32 ^ (uint64_t)batches[b], &pred);
    }
    return DG_OK;
}
