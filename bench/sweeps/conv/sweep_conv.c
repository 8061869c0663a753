/* sweep_conv.c: conv2d forward, backward-data and backward-weight, each
 * timed alone as its plan step, over the layer shapes of ResNet-18 (CIFAR
 * and ImageNet stems), the project's small CNN and LeNet, and batch sizes.
 *
 * Implementations: cpu-im2col (the CPU backend: im2col + OpenBLAS sgemm in
 * passes of whole images, each GEMM on every thread: DG_CPU_CONV_PASSES),
 * cpu-im2col-batch (OpenMP over the batch, an image per thread at a time
 * with a one-thread sgemm: DG_CPU_CONV_BATCH; skipped where it would run
 * as cpu-im2col: one image, or a scratch too small for two slots),
 * cpu-shift (the forward and dx of the stride-1 layers without im2col,
 * from shifted views of zero-padded planes, OpenMP over the batch:
 * DG_CPU_CONV_SHIFT; its weight-gradient rows are skipped, as are its
 * rows where it would run as cpu-im2col-batch: a stride above 1, a 1x1
 * unpadded layer, padding beyond the kernel, one thread, or a scratch too
 * small for two slots),
 * cpu-im2col-chan (the weight's gradient split by input channels, each
 * thread's GEMM into its own columns of dw: DG_CPU_CONV_CHANNELS; its
 * forward and dx rows are skipped, as are its rows where it would run as
 * cpu-im2col: one thread or one input channel),
 * gpu-im2col (im2col + cuBLAS; also with transfers: transfer = 1, the two
 * inputs uploaded from host memory and the output downloaded inside the
 * timed region) and gpu-implicit (DG_CONV_IMPLICIT); beside them the
 * vendor libraries' convolutions, cpu-onednn and gpu-cudnn
 * (DG_CONV_VENDOR), each on a plan of its own made with that choice (its
 * primitives, its algorithm and workspace are the plan's). Each row's step
 * runs with its implementation in the step's flags, as a plan made with
 * that dg_plan_opts.conv would run it (dg_step_flags); the backend's own
 * settings are never touched. A strategy that would fall back elsewhere
 * is found by asking the backend what the step runs as
 * (dg_backend_step_impl). A row whose implementation or dtype the backend
 * refuses (built without oneDNN, no cuDNN found, a dtype it does not
 * offer) is skipped with the backend's reason, said once per
 * implementation on stderr.
 *
 * Precisions (--dtype): fp32 everywhere; tf32 on the GPU rows (the step's
 * DG_STEP_TF32); bf16 and fp16, where the point's graph is
 * y = conv2d(cast(x), cast(w)) in the dtype (16-bit operands give a 16-bit
 * output, accumulated in float32) and the gradients' backward ops read dy
 * cast to the dtype: each row uploads its node's inputs as 2-byte values
 * (the seeded floats rounded to the dtype), and the float64 check starts
 * from the rounded values, with the tolerance of its precision
 * (conv_prec.h: the output's own rounding taken out entry by entry). Where
 * the graph has no 16-bit convolution, its rows are skipped with the
 * graph's reason.
 *
 * One graph per shape and batch: y = conv2d(x, w), loss = sum(y * g), and
 * dg_grad's dx = conv2d_backward_data(dy, w), dw = conv2d_backward_weight(
 * dy, x). The plan is never run as a whole: each row uploads its node's
 * two inputs from seeded host values (dy = g), fills the output with NaN,
 * runs the step and checks it (check f64-sampled, conv_check.h: 256 output
 * entries against float64 dot products, error scaled by the sum of |terms|,
 * tolerance per precision: conv_prec.h);
 * a row that fails is "wrong" and not timed. Uploading before each row
 * also matters because the plan may place one step's im2col scratch over
 * another step's input.
 *
 * Through the runner (runner/runner.h): a point is a direction of a shape
 * at a batch, in the order shape, batch, direction (its case SHAPE:DIR);
 * the implementations are conv_impls[], each row of a point in that order.
 * A point's setup seeds the three inputs (the same values at every
 * direction of the shape and batch) and, at the first row of a backend,
 * plans the whole graph on it; its rows then check and time the
 * direction's step. Rows that would run as another strategy, the CPU's
 * ImageNet batches past CPU_IMAGENET_MAX_BATCH and problems too large for
 * the host's memory are skipped with the reason (conv_skip); a CPU row
 * predicted above --cpu-cap is the runner's to skip, from the last row of
 * its implementation scaled by FLOPs (the three directions of a shape at a
 * batch have the same FLOPs).
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
 * columns and both own GPU implementations run on it; bytes are those of
 * the row's dtype. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweeps/conv/conv_cases.h"
#include "sweeps/conv/conv_prec.h"
#include "core/check/conv_check.h"
#include "core/check/round.h"
#include "core/autodiff.h"
#include "core/plan.h"
#include "core/rng.h"
#include "core/status.h"
#include "cpu_backend/cpu_backend.h"
#include "machine/env.h"
#include "runner/runner.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

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

/* the graphs of a problem: float32 (fp32 and tf32 rows), bf16, fp16 */
enum { G_F32, G_BF16, G_F16, N_GRAPHS };
static int graph_of(dg_precision p) {
    dg_dtype t = dg_precision_dtype(p);
    return t == DG_BF16 ? G_BF16 : t == DG_F16 ? G_F16 : G_F32;
}

/* the flags of a step run by implementation im in precision p: its
 * convolution choice and TF32 in tf32, nothing else (the backend's GEMM) */
static unsigned impl_flags(const conv_impl *im, dg_precision p) {
    return dg_step_flags(&(dg_plan_opts){.conv = im->conv, .tf32 = p == DG_PREC_TF32});
}

/* ---- one shape at one batch ---- */

/* its graph in one dtype: x, w, dy the inputs of the convolution nodes
 * (in 16 bits the casts' outputs), built at the first row that needs it */
typedef struct conv_graph {
    bool       tried;
    dg_status  built;                  /* problem_build's; its message in why         */
    char       why[256];
    dg_graph  *g;
    dg_node   *in[3];                  /* x, w, dy (the node the backward ops read)  */
    dg_node   *out[CONV_N_DIRS];       /* y, dx, dw: the convolution nodes            */
} conv_graph;

typedef struct conv_sweep conv_sweep;

typedef struct conv_problem {
    conv_sweep  *sw;
    const conv_shape *sh;
    int          batch;
    uint64_t     seed;                 /* of its host inputs                          */
    conv_graph   gr[N_GRAPHS];
    char         name[CONV_N_DIRS][48];
    bool         sized;                /* no_memory decided, before its first setup   */
    char         no_memory[160];       /* "": it fits the host's memory               */
} conv_problem;

/* the node under a chain of casts: the convolution a 16-bit graph's
 * gradient (cast back to float32) comes from */
static dg_node *under_casts(dg_node *n) {
    while (n && n->op == DG_OP_CAST) n = n->in[0];
    return n;
}

/* pb's shape at its batch in dtype t: y = conv2d(x, w), x and w cast to
 * t where it is 16 bits, loss = sum(y * g) */
static dg_status problem_build(conv_problem *pb, conv_graph *cg, dg_dtype t) {
    const conv_shape *sh = pb->sh;
    int batch = pb->batch;
    if (!(cg->g = dg_graph_new())) return dg_fail(DG_ERR_OOM, "conv sweep: out of memory for a graph");
    dg_graph *g = cg->g;
    dg_node *x = dg_input(g, "x", DG_SHAPE(batch, sh->c, sh->h, sh->w));
    dg_node *w = dg_input(g, "w", DG_SHAPE(sh->o, sh->c, sh->kh, sh->kw));
    dg_node *xc = t == DG_F32 ? x : dg_cast(g, x, t), *wc = t == DG_F32 ? w : dg_cast(g, w, t);
    dg_conv2d_opts o = {.stride = {sh->stride, sh->stride}, .pad = {sh->pad, sh->pad}};
    dg_node *y = dg_conv2d(g, xc, wc, NULL, o);
    dg_node *y32 = y && t != DG_F32 ? dg_cast(g, y, DG_F32) : y;
    dg_node *gy = y ? dg_input(g, "g", y->shape) : NULL;
    dg_node *wrt[2] = {x, w}, *grads[2] = {NULL, NULL};
    dg_status st = dg_graph_status(g);
    if (st == DG_OK) st = dg_grad(g, dg_sum(g, dg_mul(g, y32, gy), DG_ALL_AXES, false), wrt, 2, grads);
    if (st != DG_OK) return st;
    dg_node *dx = under_casts(grads[0]), *dw = under_casts(grads[1]);
    /* each row uploads the inputs it names: they must be these nodes */
    if (dx->op != DG_OP_CONV2D_BACKWARD_DATA || dw->op != DG_OP_CONV2D_BACKWARD_WEIGHT || dx->in[0] != dw->in[0] ||
        dx->in[1] != wc || dw->in[1] != xc)
        return dg_fail(DG_ERR_INVALID, "conv sweep: dg_grad gave %s and %s, not the convolution's backward ops "
                        "of (dy, w) and (dy, x)", dg_op_name(dx->op), dg_op_name(dw->op));
    cg->in[IN_X] = xc;
    cg->in[IN_W] = wc;
    cg->in[IN_DY] = dx->in[0]; /* 1 * g (cast), computed by the plan, uploaded by each row */
    cg->out[CONV_FWD] = y;
    cg->out[CONV_BWD_DATA] = dx;
    cg->out[CONV_BWD_WEIGHT] = dw;
    return DG_OK;
}

/* the problem's graph in precision p, built at its first call */
static const conv_graph *graph_in(conv_problem *pb, dg_precision p) {
    static const dg_dtype dtypes[N_GRAPHS] = {DG_F32, DG_BF16, DG_F16};
    int k = graph_of(p);
    conv_graph *cg = &pb->gr[k];
    if (!cg->tried) {
        cg->tried = true;
        cg->built = problem_build(pb, cg, dtypes[k]);
        if (cg->built != DG_OK) snprintf(cg->why, sizeof cg->why, "%s", dg_last_error());
    }
    return cg;
}

/* Host bytes of the problem: its seeded inputs and the output buffer, and
 * for the CPU its plan at most: the inputs again, dy's two forerunners of
 * its size (the broadcast gradient of the sum, then 1 * g), the outputs and
 * each step's im2col scratch. Of the float32 graph: no other is larger. */
static double host_bytes(const conv_graph *cg, bool cpu) {
    double in = 0, out = 0, most = 0, scratch = 0;
    for (int i = 0; i < 3; i++) in += (double)dg_node_bytes(cg->in[i]);
    for (int d = 0; d < CONV_N_DIRS; d++) {
        double b = (double)dg_node_bytes(cg->out[d]);
        out += b;
        most = b > most ? b : most;
        scratch += (double)dg_node_scratch_bytes(cg->out[d]);
    }
    return in + most + (cpu ? in + 2.0 * (double)dg_node_bytes(cg->in[IN_DY]) + out + scratch : 0);
}

/* why the problem's rows cannot run in the host's memory ("" where they
 * can), decided once, before any of its tensors exist: later, its own
 * tensors would count against it */
static const char *no_memory(const bench_ctx *ctx, conv_problem *pb) {
    if (!pb->sized) {
        pb->sized = true;
        double need = host_bytes(&pb->gr[G_F32], ctx->cpu != NULL), avail = bench_mem_available();
        if (avail > 0 && need > 0.9 * avail)
            snprintf(pb->no_memory, sizeof pb->no_memory, "needs %.1f GB of host memory, %.1f GB available",
                     need / 1e9, avail / 1e9);
    }
    return pb->no_memory;
}

/* ---- the runner's view: a point is a direction of a problem ---- */

typedef struct conv_point { conv_problem *pb; int dir; } conv_point;

/* A refusal said on stderr: once per implementation and precision, and
 * once per implementation for the same words. */
#define MAX_SAID 32
typedef struct said { const conv_impl *im; dg_precision p; char why[200]; } said;

/* every shape at every batch, built by conv_points; freed after the run */
struct conv_sweep {
    conv_shape_list shapes;
    const long long *batches;
    int          n_batches;
    conv_problem *pb;                  /* [shapes.n * n_batches]         */
    conv_point  *pt;                   /* [shapes.n * n_batches * 3]     */
    said         said[MAX_SAID];
    int          n_said;
};

static const conv_impl *conv_of(const bench_impl *im) { return im->data; }

/* says on stderr why im's rows in p are skipped (im NULL: every row in
 * p, the graph's reason), unless said already */
static void say_once(conv_sweep *sw, const conv_impl *im, dg_precision p, const char *why) {
    for (int i = 0; i < sw->n_said; i++)
        if (sw->said[i].im == im && (sw->said[i].p == p || !strcmp(sw->said[i].why, why))) return;
    fprintf(stderr, "bench: conv: %s%srows in %s skipped: %s\n", im ? im->name : "", im ? " " : "",
            dg_precision_name(p), why);
    if (sw->n_said == MAX_SAID) return;
    said *s = &sw->said[sw->n_said++];
    *s = (said){.im = im, .p = p};
    snprintf(s->why, sizeof s->why, "%s", why);
}

/* every shape at every batch (--sizes: 1 to 2^30), each direction a
 * point, of the float32 graph; a graph that fails gives points without
 * columns, whose rows say why */
static void conv_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    (void)ctx;
    conv_sweep *sw = (conv_sweep *)arg;
    for (int s = 0; s < sw->shapes.n; s++)
        for (int b = 0; b < sw->n_batches; b++) {
            conv_problem *pb = &sw->pb[s * sw->n_batches + b];
            int batch = (int)sw->batches[b];
            *pb = (conv_problem){.sw = sw, .sh = &sw->shapes.s[s], .batch = batch,
                                 .seed = (uint64_t)s << 32 ^ (uint64_t)batch};
            for (int d = 0; d < CONV_N_DIRS; d++) conv_case_name(pb->sh, d, pb->name[d], sizeof pb->name[d]);
            const conv_graph *cg = graph_in(pb, DG_PREC_FP32);
            for (int d = 0; d < CONV_N_DIRS; d++) {
                conv_point *cp = &sw->pt[(s * sw->n_batches + b) * CONV_N_DIRS + d];
                *cp = (conv_point){pb, d};
                bench_point pt = {.name = pb->name[d], .batch = batch, .data = cp};
                if (cg->built == DG_OK) {
                    const dg_node *nd = cg->out[d];
                    /* a group's GEMM: w [O, C/groups, KH, KW], dy [N, O, OH, OW] */
                    const dg_shape *w = &cg->in[IN_W]->shape, *dy = &cg->in[IN_DY]->shape;
                    int64_t og = w->d[0] / dg_node_conv2d_opts(cg->out[0]).groups;
                    int64_t r = w->d[1] * w->d[2] * w->d[3], cols = dy->d[0] * dy->d[2] * dy->d[3];
                    int64_t mnk[CONV_N_DIRS][3] = {{og, cols, r}, {r, cols, og}, {og, r, cols}};
                    dg_cost cost = dg_node_cost(nd);
                    pt.m = mnk[d][0];
                    pt.n = mnk[d][1];
                    pt.k = mnk[d][2];
                    pt.flops = cost.flops;
                    pt.bytes = cost.bytes;
                }
                bench_points_add(out, pt);
            }
        }
}

/* the implementation has rows in the point's precision */
static bool conv_applies(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im) {
    (void)ctx;
    return conv_of(im)->precs & 1u << pt->precision;
}

/* the scratch of the row's node with the implementation's kernels, and
 * the bytes of its dtype */
static void conv_columns(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, bench_row *row) {
    const conv_point *cp = pt->data;
    const conv_graph *cg = graph_in(cp->pb, pt->precision);
    if (cg->built != DG_OK) return;
    const dg_node *nd = cg->out[cp->dir];
    row->bytes = dg_node_cost(nd).bytes;
    row->scratch_bytes = (int64_t)dg_backend_step_scratch_bytes(im->gpu ? ctx->gpu : ctx->cpu, nd,
                                                                 impl_flags(conv_of(im), pt->precision));
}

/* a skip's reason, said once on stderr */
static const char *refused(conv_problem *pb, const conv_impl *im, dg_precision p, const char *why) {
    say_once(pb->sw, im, p, why);
    return why;
}

/* why a row does not run (a skipped row), or NULL; a CPU row then is
 * the runner's to predict against --cpu-cap */
static const char *conv_skip(const bench_ctx *ctx, const bench_point *pt, const bench_impl *bim, char *why,
                             size_t n) {
    const conv_point *cp = pt->data;
    conv_problem *pb = cp->pb;
    const conv_impl *im = conv_of(bim);
    if (pb->gr[G_F32].built != DG_OK) return NULL; /* its rows say why */
    if (*no_memory(ctx, pb)) return pb->no_memory;
    const conv_graph *cg = graph_in(pb, pt->precision);
    if (cg->built != DG_OK) return refused(pb, NULL, pt->precision, cg->why); /* no 16-bit convolution */
    const dg_node *nd = cg->out[cp->dir];
    dg_backend *be = im->gpu ? ctx->gpu : ctx->cpu;
    unsigned flags = impl_flags(im, pt->precision);
    /* the strategy the backend runs this step with: another one where the
     * row's does not apply, which is that one's row; a choice or dtype it
     * does not offer, with its reason */
    char runs_as[64]; /* "cpu-onednn-bf16:jit_bf16:avx512_core_bf16" */
    if (!im->gpu && im->conv == DG_CONV_IM2COL_CHANNELS && nd->op != DG_OP_CONV2D_BACKWARD_WEIGHT)
        return "the channel split computes the weight's gradient only (this direction runs as the default)";
    if (!im->gpu && im->conv == DG_CONV_SHIFT && nd->op == DG_OP_CONV2D_BACKWARD_WEIGHT)
        return "the shift computes the forward and dx only (this direction runs as the default)";
    if (dg_backend_step_impl(be, nd, flags, runs_as, sizeof runs_as) != DG_OK) {
        snprintf(why, n, "%s", dg_last_error());
        return refused(pb, im, pt->precision, why);
    }
    if (!dg_backend_supports(be, nd)) {
        snprintf(why, n, "the %s backend has no %s %s", im->gpu ? "GPU" : "CPU", dg_dtype_name(nd->dtype),
                 dg_op_name(nd->op));
        return refused(pb, im, pt->precision, why);
    }
    if (im->gpu) return NULL;
    const conv_shape *sh = pb->sh;
    int threads = dg_cpu_threads(ctx->cpu);
    /* a 16-bit node runs the strategy on widened copies, named so
     * ("cpu-im2col-bf16-widened"): the strategy asked for all the same */
    char want[64];
    if (nd->dtype == DG_F32) snprintf(want, sizeof want, "%s", im->name);
    else snprintf(want, sizeof want, "%s-%s-widened", im->name, dg_dtype_name(nd->dtype));
    if (im->conv != DG_CONV_VENDOR && strcmp(runs_as, want)) {
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
    return NULL;
}

/* ---- a point's tensors and plans ---- */

/* the step of a row and what it reads and writes */
typedef struct conv_run {
    dg_backend    *be;
    dg_step        step;        /* the plan's, with the row's implementation */
    void          *dst[2];      /* the step's inputs' storage */
    const void    *src[2];
    size_t         bytes[2];
    void          *out;
    void          *host_out;    /* the output in its dtype */
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

/* the graph planned on one backend with one choice, at the first row that
 * needs it */
typedef struct conv_plan {
    bool      done;
    dg_status st;
    char      why[256];             /* st's message */
    dg_plan  *p;
} conv_plan;

/* a point's in one precision: its host tensors, its check and its plans */
typedef struct conv_state {
    const bench_ctx *ctx;
    conv_problem *pb;
    const conv_graph *cg;
    dg_precision prec;
    int          dir;
    float       *host[3];           /* seeded values of x, w, dy (= g), rounded to the dtype */
    uint16_t    *lo[3];             /* the same in 2 bytes (bf16, fp16); NULL in float32     */
    void        *host_out;          /* the direction's output, in its dtype                  */
    conv_sample *ref;               /* NULL until a row needs it                             */
    conv_plan    plan[2][2];        /* [gpu][vendor]                                         */
    conv_run     run;               /* the row under way's                                   */
} conv_state;

static void conv_teardown(void *arg) {
    conv_state *s = arg;
    for (int b = 0; b < 2; b++)
        for (int v = 0; v < 2; v++) dg_plan_free(s->plan[b][v].p);
    for (int i = 0; i < 3; i++) {
        free(s->host[i]);
        free(s->lo[i]);
    }
    free(s->host_out);
    free(s->ref);
    free(s);
}

/* seeded inputs, uniform in [-1, 1) (zero mean: conv_check.h's tolerance
 * counts on it), the same on every backend, in every direction (the three
 * drawn in one sequence, though a direction reads two) and in every
 * precision, then rounded to its dtype (bf16, fp16: the kernels and the
 * check read the same values); the output buffer. A problem whose graph
 * failed has none: its rows say why. */
static dg_status conv_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    const conv_point *cp = pt->data;
    conv_problem *pb = cp->pb;
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "conv sweep: host memory for %s's tensors", pb->sh->name);
    *s = (conv_state){.ctx = ctx, .pb = pb, .cg = graph_in(pb, pt->precision), .prec = pt->precision,
                      .dir = cp->dir};
    if (s->cg->built == DG_OK) {
        dg_dtype t = dg_precision_dtype(pt->precision);
        bool lo = t != DG_F32;
        s->host_out = malloc(dg_node_bytes(s->cg->out[cp->dir]));
        dg_rng r = dg_rng_new(pb->seed);
        for (int i = 0; i < 3; i++) {
            int64_t n = dg_node_numel(s->cg->in[i]);
            s->host[i] = malloc((size_t)n * sizeof(float));
            if (lo) s->lo[i] = malloc((size_t)n * sizeof(uint16_t));
            if (!s->host[i] || (lo && !s->lo[i]) || !s->host_out) {
                conv_teardown(s);
                return dg_fail(DG_ERR_OOM, "conv sweep: host memory for %s's tensors", pb->sh->name);
            }
            for (int64_t j = 0; j < n; j++) s->host[i][j] = (float)(2 * dg_rng_uniform(&r) - 1);
            dg_check_round(t, s->host[i], s->lo[i], (size_t)n);
        }
    }
    *out = s;
    return DG_OK;
}

/* the float64 entries of the point's direction, drawn once for every
 * backend, from the inputs as the kernels read them */
static dg_status point_ref(conv_state *s) {
    if (s->ref) return DG_OK;
    if (!(s->ref = malloc(CONV_CHECK_SAMPLES * sizeof(conv_sample))))
        return dg_fail(DG_ERR_OOM, "conv sweep: host memory for the check");
    int d = s->dir;
    dg_status st = conv_check_sample(s->cg->out[d], s->host[dir_inputs[d][0]], s->host[dir_inputs[d][1]],
                                     (uint64_t)s->pb->batch * 7919u + (uint64_t)d, s->ref, CONV_CHECK_SAMPLES);
    if (st != DG_OK) {
        free(s->ref);
        s->ref = NULL;
    }
    return st;
}

/* plans the whole graph on be with im's choice: the vendor's on a plan of
 * its own (its primitives and workspace are the plan's); the own kernels
 * on the GPU on one made with im2col, which reserves its columns, so that
 * both own GPU implementations run on it (the CPU's plan is the same
 * either way) */
static void plan_on(conv_state *s, conv_plan *pl, dg_backend *be, const conv_impl *im) {
    pl->done = true;
    dg_conv_impl conv = im->conv == DG_CONV_VENDOR ? DG_CONV_VENDOR : im->gpu ? DG_CONV_IM2COL : DG_CONV_DEFAULT;
    dg_graph *g = s->cg->g;
    pl->st = dg_plan_new(&pl->p, g, be, (dg_node *const *)s->cg->out, CONV_N_DIRS,
                         &(dg_plan_opts){.conv = conv, .tf32 = s->prec == DG_PREC_TF32});
    if (pl->st != DG_OK) snprintf(pl->why, sizeof pl->why, "%s", dg_last_error());
}

/* the dot products' length of the direction's output entries */
static int64_t dot_terms(const conv_shape *sh, int batch, int dir) {
    int64_t oh = (sh->h + 2 * sh->pad - sh->kh) / sh->stride + 1, ow = (sh->w + 2 * sh->pad - sh->kw) / sh->stride + 1;
    int64_t taps = (int64_t)sh->kh * sh->kw;
    return dir == CONV_FWD ? sh->c * taps : dir == CONV_BWD_DATA ? sh->o * taps : batch * oh * ow;
}

/* an output of n entries of dtype t, every one NaN */
static void fill_nan(void *out, dg_dtype t, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (t == DG_F32) ((float *)out)[i] = NAN;
        else ((uint16_t *)out)[i] = t == DG_BF16 ? 0x7fc0u : 0x7e00u;
}

/* Checks the direction by the implementation on its plan (the step with
 * the implementation and the precision in its flags): a wrong row is not
 * timed. A plan the backend refuses (the vendor's library absent, a dtype
 * it does not offer) makes a skipped row with its reason. */
static dg_status conv_prepare(bench_ctx *ctx, void *arg, const bench_impl *bim, bench_row *row, bench_work *work) {
    conv_state *s = arg;
    conv_problem *pb = s->pb;
    const conv_graph *cg = s->cg;
    const conv_impl *im = conv_of(bim);
    if (cg->built != DG_OK) {
        row->status = bench_status_word(cg->built);
        row->note = cg->why;
        return DG_OK;
    }
    dg_backend *be = im->gpu ? ctx->gpu : ctx->cpu;
    conv_plan *pl = &s->plan[im->gpu][im->conv == DG_CONV_VENDOR];
    if (!pl->done) plan_on(s, pl, be, im);
    if (pl->st != DG_OK) {
        row->status = pl->st == DG_ERR_UNSUPPORTED ? "skipped" : bench_status_word(pl->st);
        row->note = pl->why;
        if (pl->st == DG_ERR_UNSUPPORTED) say_once(pb->sw, im, s->prec, pl->why);
        return DG_OK;
    }
    int d = s->dir;
    const dg_node *nd = cg->out[d];
    dg_dtype t = dg_precision_dtype(s->prec);
    conv_run *run = &s->run;
    const dg_step *step = step_of(pl->p, nd);
    *run = (conv_run){be, step ? *step : (dg_step){0}, .out = dg_plan_data(pl->p, nd), .host_out = s->host_out,
                      .out_bytes = dg_node_bytes(nd)};
    run->step.flags = impl_flags(im, s->prec);
    for (int i = 0; i < 2; i++) {
        int which = dir_inputs[d][i];
        run->dst[i] = dg_plan_data(pl->p, cg->in[which]);
        run->src[i] = s->lo[which] ? (const void *)s->lo[which] : s->host[which];
        run->bytes[i] = dg_node_bytes(cg->in[which]);
    }
    dg_status st = step && run->out && run->dst[0] && run->dst[1]
                       ? point_ref(s)
                       : dg_fail(DG_ERR_INVALID, "conv sweep: the plan lacks %s's step or buffers", pb->name[d]);
    if (st != DG_OK) return st;
    /* NaN in the output first: an entry left unwritten fails the check */
    fill_nan(s->host_out, t, (size_t)dg_node_numel(nd));
    st = dg_backend_upload(be, run->out, s->host_out, run->out_bytes);
    if (st == DG_OK) st = run_transfer(run);
    if (st != DG_OK) return st;
    row->max_rel_err = conv_prec_error(s->ref, CONV_CHECK_SAMPLES, s->host_out, t);
    if (!(row->max_rel_err <= conv_prec_tol(s->prec, dot_terms(pb->sh, pb->batch, d), im->gpu))) {
        row->status = "wrong";
        return DG_OK;
    }
    *work = (bench_work){.fn = im->transfer ? run_transfer : run_step, .arg = run, .be = be,
                         .events = im->gpu && !im->transfer};
    return DG_OK;
}

dg_status sweep_conv(bench_ctx *ctx) {
    conv_sweep sw = {0};
    dg_status st = conv_shapes(&sw.shapes);
    if (st != DG_OK) return st;
    sw.n_batches = bench_sizes(ctx, ctx->quick ? quick_batches : default_batches, ctx->quick ? 2 : 4, &sw.batches);
    size_t n_pb = (size_t)sw.shapes.n * (size_t)sw.n_batches;
    sw.pb = calloc(n_pb, sizeof *sw.pb);
    sw.pt = calloc(n_pb * CONV_N_DIRS, sizeof *sw.pt);
    bench_impl impls[CONV_N_IMPLS];
    for (int i = 0; i < CONV_N_IMPLS; i++)
        impls[i] = (bench_impl){.name = conv_impls[i].name, .gpu = conv_impls[i].gpu,
                                .transfer = conv_impls[i].transfer, .data = &conv_impls[i]};
    bench_sweep_spec spec = {
        .name = "conv", .check_word = CONV_CHECK_WORD, .impls = impls, .n_impls = CONV_N_IMPLS,
        .precisions = BENCH_PREC_ALL, .points = conv_points, .arg = &sw, .applies = conv_applies,
        .skip = conv_skip, .columns = conv_columns, .setup = conv_setup, .teardown = conv_teardown,
        .prepare = conv_prepare,
    };
    st = sw.pb && sw.pt ? bench_run_spec(ctx, &spec) : dg_fail(DG_ERR_OOM, "conv sweep: out of host memory");
    for (size_t i = 0; sw.pb && i < n_pb; i++)
        for (int k = 0; k < N_GRAPHS; k++) dg_graph_free(sw.pb[i].gr[k].g);
    free(sw.pb);
    free(sw.pt);
    return st;
}
