/* sweep_autodiff.c: the cost or gain of automatic differentiation. The same
 * MLP training step (784-256-100-10, Adam) two ways on each backend:
 *   manual: written by hand as a framework without autodiff would: every
 *     tensor its own allocation, the forward kernels, then the backward
 *     kernels (softmax-CE backward, dW = a^T dz, db = column sum, dx = dz W^T,
 *     ReLU backward) and the Adam updates called explicitly, one by one;
 *   graph: dg_grad's gradient graph through the memory plan (GPU: also with
 *     CUDA-graph replay, impl graph-cuda).
 * Node descriptors come from the builders (for their shapes); nothing else of
 * the core is used by the manual step. Check: each version's first step,
 * its loss and every parameter's update, against the float64 reference of
 * the step (core/check/step_check.h).
 *
 * Precisions: the graph step in each (the step builder's policy,
 * core/nn/train_step.h, checked to runner/step_tol.h's tolerances, as the
 * mlp sweep's; the CPU has no TF32: its tf32 graph row is the fp32 step
 * and says so). The manual step is float32 alone: it has no casts, no
 * 16-bit kernels called and no loss scaling, so in tf32, bf16 and fp16 its
 * rows are skipped with that reason rather than timing the fp32 step
 * under another label. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/step_check.h"
#include "core/rng.h"
#include "core/status.h"
#include "runner/runner.h"
#include "runner/step_tol.h"

static const long long default_batches[] = {32, 128, 512, 2048};
static const long long quick_batches[] = {32, 512};
#define WIDTHS "784-256-100-10"

typedef struct manual {
    dg_backend *be;
    dg_graph   *g;          /* node descriptors only */
    dg_node    *x, *y, *loss;
    dg_model    mlp;        /* its parameters, updated in place by the step */
    void      **buf;        /* [graph size] one allocation per tensor */
    dg_step    *steps;
    int         n_steps;
} manual;

/* appends the explicit backward pass of the MLP and the Adam updates */
static dg_status build_manual(manual *mm, const dg_mlp_cfg *cfg, int batch) {
    dg_graph *g = mm->g = dg_graph_new();
    if (!g) return DG_ERR_OOM;
    dg_status st = dg_mlp_new(g, cfg, 1, &mm->mlp); /* same initial weights as the graph version */
    if (st != DG_OK) return st;
    const int *w = cfg->widths, L = mm->mlp.n_params / 2;
    dg_node *const *W = mm->mlp.params; /* W_i = W[2i], b_i = W[2i + 1] */
    dg_node *a[DG_MLP_MAX_LAYERS + 1], *z[DG_MLP_MAX_LAYERS];
    a[0] = mm->x = dg_input(g, "x", DG_SHAPE(batch, w[0]));
    mm->y = dg_input_i32(g, "y", DG_SHAPE(batch));
    for (int i = 0; i < L; i++) { /* forward */
        z[i] = dg_add(g, dg_matmul(g, a[i], W[2 * i], false, false), W[2 * i + 1]);
        a[i + 1] = i + 1 < L ? dg_relu(g, z[i]) : z[i];
    }
    mm->loss = dg_softmax_cross_entropy(g, z[L - 1], mm->y);
    if (!mm->loss) return dg_graph_status(g);
    dg_node *dz = dg_softmax_cross_entropy_backward(g, dg_const(g, "dloss", DG_SHAPE(1), 1.0f), mm->loss);
    dg_node *params[2 * DG_MLP_MAX_LAYERS], *grads[2 * DG_MLP_MAX_LAYERS], *upd[2 * DG_MLP_MAX_LAYERS];
    for (int i = L - 1; i >= 0 && dz; i--) { /* backward, by hand */
        params[2 * i] = W[2 * i];
        params[2 * i + 1] = W[2 * i + 1];
        grads[2 * i] = dg_matmul(g, a[i], dz, true, false);   /* dW = a^T dz   */
        grads[2 * i + 1] = dg_sum(g, dz, 1u, false);           /* db = sum_rows dz */
        if (i > 0) /* da = dz W^T, then through the ReLU */
            dz = dg_relu_backward(g, dg_matmul(g, dz, W[2 * i], false, true), z[i - 1]);
    }
    if (dg_graph_status(g) != DG_OK) return dg_graph_status(g);
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    if ((st = dg_optim_apply(g, &o, params, grads, 2 * L, upd)) != DG_OK) return st;

    int n = dg_graph_size(g);
    mm->buf = calloc((size_t)n, sizeof *mm->buf);
    mm->steps = calloc((size_t)n, sizeof *mm->steps);
    float *host = malloc(dg_node_bytes(W[0]) > (size_t)batch * w[0] * 4 ? dg_node_bytes(W[0])
                                                                      : (size_t)batch * w[0] * 4);
    if (!mm->buf || !mm->steps || !host) { free(host); return dg_fail(DG_ERR_OOM, "autodiff: out of memory"); }
    for (int id = 0; id < n && st == DG_OK; id++) { /* one allocation per tensor; updates write their param */
        dg_node *nd = dg_graph_node(g, id);
        if (nd->view_of) { mm->buf[id] = mm->buf[nd->view_of->id]; continue; }
        st = dg_backend_alloc(mm->be, dg_node_bytes(nd), &mm->buf[id]);
        if (st == DG_OK && nd->op == DG_OP_LEAF && nd->leaf != DG_LEAF_INPUT) {
            dg_init_fill(nd->init, host, dg_node_numel(nd));
            st = dg_backend_upload(mm->be, mm->buf[id], host, dg_node_bytes(nd));
        }
    }
    free(host);
    for (int id = 0; id < n && st == DG_OK; id++) { /* the calls, in the order written above */
        dg_node *nd = dg_graph_node(g, id);
        if (nd->op == DG_OP_LEAF || nd->op == DG_OP_RESHAPE || nd->op == DG_OP_SIDE_OUTPUT) continue;
        mm->steps[mm->n_steps++] = dg_step_of(nd, mm->buf, 0u);
    }
    return st;
}

static void manual_free(manual *mm) {
    for (int id = 0; mm->buf && id < dg_graph_size(mm->g); id++)
        if (!dg_graph_node(mm->g, id)->view_of) dg_backend_release(mm->be, mm->buf[id]);
    free(mm->buf);
    free(mm->steps);
    dg_graph_free(mm->g);
}

static dg_status manual_run(void *arg) {
    manual *mm = arg;
    for (int i = 0; i < mm->n_steps; i++) {
        dg_status st = dg_backend_compute(mm->be, &mm->steps[i]);
        if (st != DG_OK) return st;
    }
    return DG_OK;
}

static dg_status plan_run(void *arg) { return dg_plan_run(arg); }

/* a parameter of the manual step: its own device buffer */
static dg_status manual_fetch(void *arg, const dg_node *param, float *host, size_t bytes) {
    manual *mm = arg;
    return dg_backend_download(mm->be, host, mm->buf[param->id], bytes);
}

/* ---- the runner's view (runner/runner.h): a point is a batch size; an
 * implementation a backend and a version of the step, in the row order of
 * a batch: cpu graph, cpu manual, gpu graph, gpu graph-cuda, gpu manual ---- */

typedef enum version { GRAPH, GRAPH_REPLAY, MANUAL } version;
static const version graph = GRAPH, graph_replay = GRAPH_REPLAY, by_hand = MANUAL;
static const bench_impl autodiff_impls[] = {
    {.name = "graph", .data = &graph},
    {.name = "manual", .data = &by_hand},
    {.name = "graph", .gpu = true, .data = &graph},
    {.name = "graph-cuda", .gpu = true, .data = &graph_replay},
    {.name = "manual", .gpu = true, .data = &by_hand},
};

static version version_of(const bench_impl *im) { return *(const version *)im->data; }

/* every batch size: m = batch, n and k the first layer's widths */
static void autodiff_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    (void)arg;
    const long long *sizes;
    int n = bench_sizes(ctx, ctx->quick ? quick_batches : default_batches,
                        ctx->quick ? 2 : (int)(sizeof default_batches / sizeof *default_batches), &sizes);
    double weights = 784.0 * 256 + 256.0 * 100 + 100.0 * 10;
    for (int i = 0; i < n; i++)
        bench_points_add(out, (bench_point){.name = WIDTHS, .m = sizes[i], .n = 256, .k = 784, .batch = sizes[i],
                                            /* forward 2, backward 4 flops per weight and row */
                                            .flops = 6.0 * (double)sizes[i] * weights});
}

/* one batch: its data, and per backend the float64 reference of the step,
 * made by the first graph step checked there; the manual step is checked
 * against its own backend's, so where the graph steps of a backend failed
 * its manual row says it has none */
typedef struct autodiff_state {
    dg_mlp_cfg     cfg;
    int            batch;
    float         *x;           /* [batch, 784] uniform in [0, 1)               */
    int32_t       *y;           /* [batch] classes                              */
    bench_step_ref ref[2];      /* cpu, gpu                                     */
    bool           plain_tried[2]; /* the graph step without replay was checked */
    bench_step     bs;          /* a graph implementation's step                */
    manual         mm;          /* the manual implementation's step             */
} autodiff_state;

static void autodiff_teardown(void *arg) {
    autodiff_state *s = arg;
    for (int b = 0; b < 2; b++) bench_step_ref_free(&s->ref[b]);
    free(s->x);
    free(s->y);
    free(s);
}

static dg_status autodiff_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    (void)ctx;
    autodiff_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "autodiff: out of memory");
    dg_mlp_parse_widths(WIDTHS, &s->cfg);
    int batch = s->batch = (int)pt->batch;
    s->x = malloc((size_t)batch * 784 * sizeof(float));
    s->y = malloc((size_t)batch * sizeof(int32_t));
    if (!s->x || !s->y) {
        autodiff_teardown(s);
        return dg_fail(DG_ERR_OOM, "autodiff: out of memory");
    }
    dg_rng r = dg_rng_new((uint64_t)batch + 99);
    for (long long j = 0; j < (long long)batch * 784; j++) s->x[j] = (float)dg_rng_uniform(&r);
    for (int j = 0; j < batch; j++) s->y[j] = (int32_t)(dg_rng_u64(&r) % 10);
    *out = s;
    return DG_OK;
}

/* dg_grad + plan (replay: CUDA-graph replay on the GPU) in precision p (the
 * CPU's tf32: fp32) into s->bs, run once and checked against the backend's
 * reference (made first where none is) */
static dg_status graph_step(autodiff_state *s, dg_backend *be, bool gpu, bool replay, dg_precision p, double *err,
                            bool *ok) {
    bench_step_spec spec = bench_mlp_step(&s->cfg);
    spec.precision = !gpu && p == DG_PREC_TF32 ? DG_PREC_FP32 : p;
    spec.tol = bench_step_tol_in(spec.precision, spec.tol);
    s->plain_tried[gpu] |= !replay;
    return bench_step_new(&s->bs, be, &spec, s->batch, s->x, s->y, &(dg_plan_opts){.no_replay = !replay},
                          &s->ref[gpu], err, ok);
}

/* the hand-written step, run once and checked against the backend's
 * reference before it is timed. Where no graph row of the backend ran
 * (--impl), its graph step is built and checked first, for the reference. */
static dg_status manual_prepare(autodiff_state *s, dg_backend *be, bool gpu, bench_row *row, bench_work *work) {
    bench_step_spec spec = bench_mlp_step(&s->cfg);
    if (!s->ref[gpu].done && !s->plain_tried[gpu]) {
        double graph_err;
        bool graph_ok;
        /* a failure: the row's "no float64 reference"; fp32 alone (manual_skip) */
        graph_step(s, be, gpu, false, DG_PREC_FP32, &graph_err, &graph_ok);
        bench_step_free(&s->bs);
    }
    float loss = NAN;
    bool ok = false;
    manual *mm = &s->mm;
    *mm = (manual){.be = be};
    dg_status st = build_manual(mm, &s->cfg, s->batch);
    if (st == DG_OK) st = dg_backend_upload(be, mm->buf[mm->x->id], s->x, dg_node_bytes(mm->x));
    if (st == DG_OK) st = dg_backend_upload(be, mm->buf[mm->y->id], s->y, dg_node_bytes(mm->y));
    if (st == DG_OK) st = manual_run(mm);
    if (st == DG_OK) st = dg_backend_download(be, &loss, mm->buf[mm->loss->id], sizeof loss);
    if (st == DG_OK && !s->ref[gpu].done)
        st = dg_fail(DG_ERR_INVALID, "autodiff: no float64 reference (the graph step failed)");
    if (st == DG_OK)
        st = bench_step_error(&mm->mlp, manual_fetch, mm, loss, &s->ref[gpu], spec.tol, &row->max_rel_err, &ok);
    if (st != DG_OK) return st;
    if (!ok) row->status = "wrong";
    *work = (bench_work){.fn = manual_run, .arg = mm, .be = be, .events = gpu};
    return DG_OK;
}

/* either version checked first, then its whole step timed */
static dg_status autodiff_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    autodiff_state *s = arg;
    dg_backend *be = im->gpu ? ctx->gpu : ctx->cpu;
    if (version_of(im) == MANUAL) return manual_prepare(s, be, im->gpu, row, work);
    bool ok = false;
    if (!im->gpu && row->precision == DG_PREC_TF32) row->note = "no TF32 on the CPU: the fp32 step";
    dg_status st = graph_step(s, be, im->gpu, version_of(im) == GRAPH_REPLAY, row->precision, &row->max_rel_err, &ok);
    if (st != DG_OK) return st;
    if (!ok) row->status = "wrong";
    /* the plan's arena: what the precision's casts and 16-bit tensors change */
    dg_plan_stats ps = dg_plan_stats_get(s->bs.p);
    row->arena_bytes = (int64_t)ps.arena_bytes;
    row->live_bytes = (int64_t)ps.live_bytes;
    *work = (bench_work){.fn = plan_run, .arg = s->bs.p, .be = be, .events = im->gpu};
    return DG_OK;
}

/* the manual step in any precision but fp32: it has none of its own */
static const char *manual_skip(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, char *why,
                               size_t n) {
    (void)ctx;
    if (version_of(im) != MANUAL || pt->precision == DG_PREC_FP32) return NULL;
    snprintf(why, n, "the hand-written step is fp32 alone (no casts, no 16-bit or TF32 kernels, no loss scaling): "
             "no %s version", dg_precision_name(pt->precision));
    return why;
}

static void autodiff_release(void *arg, const bench_impl *im, bench_work *work) {
    (void)work;
    autodiff_state *s = arg;
    if (version_of(im) == MANUAL) manual_free(&s->mm);
    else bench_step_free(&s->bs);
}

dg_status sweep_autodiff(bench_ctx *ctx) {
    static const bench_sweep_spec spec = {
        .name = "autodiff", .check_word = BENCH_STEP_CHECK, .impls = autodiff_impls,
        .n_impls = (int)(sizeof autodiff_impls / sizeof *autodiff_impls), .points = autodiff_points,
        .precisions = BENCH_PREC_ALL, .skip = manual_skip,
        .setup = autodiff_setup, .teardown = autodiff_teardown, .prepare = autodiff_prepare,
        .release = autodiff_release,
    };
    return bench_run_spec(ctx, &spec);
}

/* One chart per precision (manual, graph, graph + CUDA graph per backend
 * over the batch size: autodiff_time in fp32, autodiff_time_DTYPE in the
 * others); the summary's table of medians per backend, dtype and batch. */
bool bench_report_autodiff(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    fprintf(rep->sum, "## Autodiff: hand-written step vs dg_grad graph (MLP " WIDTHS ", Adam), median ms\n\n"
                      "| backend | dtype | batch | manual | graph | graph / manual | graph + CUDA graph |\n"
                      "|---|---|---|---|---|---|---|\n");
    static const char *const backends[] = {"cpu", "gpu"};
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        const char *dt = dg_precision_name((dg_precision)p);
        char file[48], title[96];
        snprintf(file, sizeof file, p == DG_PREC_FP32 ? "autodiff_time" : "autodiff_time_%s", dt);
        snprintf(title, sizeof title, "MLP training step: hand-written vs autodiff graph, %s", dt);
        bench_chart ch = {file, title, "batch", "median ms", true, .vline = NAN};
        int points = 0;
        for (int b = 0; b < (int)(sizeof backends / sizeof *backends); b++) {
            const char *bk = backends[b];
            char t1[48], t2[48], t3[48], b0[32], b1[32], b2[32], b3[32];
            snprintf(t1, sizeof t1, "%s manual", bk);
            snprintf(t2, sizeof t2, "%s graph", bk);
            snprintf(t3, sizeof t3, "%s graph + CUDA graph", bk);
            bench_series m = bench_pick_prec(t, NULL, "manual", bk, (dg_precision)p, false, BENCH_MS, t1);
            bench_series gr = bench_pick_prec(t, NULL, "graph", bk, (dg_precision)p, false, BENCH_MS, t2);
            bench_series gc = bench_pick_prec(t, NULL, "graph-cuda", bk, (dg_precision)p, false, BENCH_MS, t3);
            bench_chart_add(&ch, m);
            bench_chart_add(&ch, gr);
            bench_chart_add(&ch, gc);
            points += m.n + gr.n + gc.n;
            /* a line per batch of the manual rows, or of the graph rows where
             * the precision has no manual step */
            const bench_series *base = m.n ? &m : &gr;
            for (int i = 0; i < base->n; i++) {
                double x = base->x[i], v[3] = {NAN, NAN, NAN};
                const bench_series *col[3] = {&m, &gr, &gc};
                for (int c = 0; c < 3; c++)
                    for (int j = 0; j < col[c]->n; j++)
                        if (col[c]->x[j] == x) v[c] = col[c]->y[j];
                fprintf(rep->sum, "| %s | %s | %.0f | %s | %s | %s | %s |\n", bk, dt, x,
                        bench_fmt_num(v[0], "%.4f", b0, sizeof b0), bench_fmt_num(v[1], "%.4f", b1, sizeof b1),
                        bench_fmt_num(v[1] / v[0], "%.3f", b2, sizeof b2), bench_fmt_num(v[2], "%.4f", b3, sizeof b3));
            }
        }
        if (points || p == DG_PREC_FP32) bench_chart_draw(rep, &ch); /* fp32's as before, rows or not */
    }
    fprintf(rep->sum, "\n");
    return true;
}
