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
 * the step (bench/check/check.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "core/graph_internal.h"
#include "core/rng.h"
#include "core/status_internal.h"
#include "runner/sweep.h"

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
    dg_node *in4[4] = {dg_const(g, "dloss", DG_SHAPE(1), 1.0f), z[L - 1], mm->y, mm->loss->side[0]};
    dg_node *dz = dg__node_new(g, DG_OP_SOFTMAX_CE_BACKWARD, z[L - 1]->shape, 4, in4);
    dg_node *params[2 * DG_MLP_MAX_LAYERS], *grads[2 * DG_MLP_MAX_LAYERS], *upd[2 * DG_MLP_MAX_LAYERS];
    for (int i = L - 1; i >= 0 && dz; i--) { /* backward, by hand */
        params[2 * i] = W[2 * i];
        params[2 * i + 1] = W[2 * i + 1];
        grads[2 * i] = dg_matmul(g, a[i], dz, true, false);   /* dW = a^T dz   */
        grads[2 * i + 1] = dg_sum(g, dz, 1u, false);           /* db = sum_rows dz */
        if (i > 0) {
            dg_node *in2[2] = {dg_matmul(g, dz, W[2 * i], false, true), z[i - 1]}; /* da = dz W^T */
            dz = in2[0] ? dg__node_new(g, DG_OP_RELU_BACKWARD, z[i - 1]->shape, 2, in2) : NULL;
        }
    }
    if (dg_graph_status(g) != DG_OK) return dg_graph_status(g);
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    if ((st = dg_optim_apply(g, &o, params, grads, 2 * L, upd)) != DG_OK) return st;

    int n = dg_graph_size(g);
    mm->buf = calloc((size_t)n, sizeof *mm->buf);
    mm->steps = calloc((size_t)n, sizeof *mm->steps);
    float *host = malloc(dg_node_bytes(W[0]) > (size_t)batch * w[0] * 4 ? dg_node_bytes(W[0])
                                                                      : (size_t)batch * w[0] * 4);
    if (!mm->buf || !mm->steps || !host) { free(host); return dg__fail(DG_ERR_OOM, "autodiff: out of memory"); }
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

static void emit(bench_ctx *ctx, dg_backend *be, const char *impl, int batch, double flops, double err, bool ok,
                 dg_status st, const bench_stats *stats) {
    bench_row row = {.sweep = "autodiff", .name = WIDTHS, .impl = impl, .backend = be == ctx->cpu ? "cpu" : "gpu",
                     .m = batch, .n = 256, .k = 784, .batch = batch, .threads = ctx->threads,
                     .warmup = ctx->timing.warmup, .flops = flops, .max_rel_err = err, .st = *stats,
                     .check = BENCH_STEP_CHECK};
    row.status = st != DG_OK ? bench_status_word(st) : ok ? "ok" : "wrong";
    if (st != DG_OK) row.note = dg_last_error();
    if (st != DG_OK) fprintf(stderr, "bench: autodiff %s batch %d: %s\n", impl, batch, dg_last_error());
    bench_emit(ctx, &row);
}

static void run_backend(bench_ctx *ctx, dg_backend *be, int batch, const float *x, const int32_t *y) {
    dg_mlp_cfg cfg;
    dg_mlp_parse_widths(WIDTHS, &cfg);
    double flops = 6.0 * batch * (784.0 * 256 + 256.0 * 100 + 100.0 * 10);
    bench_step_spec spec = bench_mlp_step(&cfg);
    bench_step_ref ref = {0}; /* the float64 first step, for every version */
    /* graph: dg_grad + plan (GPU: also with CUDA-graph replay) */
    for (int cuda = 0; cuda < (be == ctx->gpu ? 2 : 1); cuda++) {
        const char *impl = cuda ? "graph-cuda" : "graph";
        bool wanted = bench_wanted(ctx, WIDTHS, impl);
        if (cuda && !wanted) continue; /* the first one also gives the manual step its reference */
        bench_stats s = BENCH_NO_STATS;
        double err = NAN;
        bool ok = false;
        bench_step bs;
        dg_status st =
            bench_step_new(&bs, be, &spec, batch, x, y, &(dg_plan_opts){.no_replay = !cuda}, &ref, &err, &ok);
        if (wanted && st == DG_OK && ok) st = bench_time(be, be == ctx->gpu, plan_run, bs.p, &ctx->timing, &s);
        if (wanted) emit(ctx, be, impl, batch, flops, err, ok, st, &s);
        bench_step_free(&bs);
    }
    if (!bench_wanted(ctx, WIDTHS, "manual")) {
        bench_step_ref_free(&ref);
        return;
    }
    manual mm = {.be = be};
    bench_stats s = BENCH_NO_STATS;
    double err = NAN;
    float loss = NAN;
    dg_status st = build_manual(&mm, &cfg, batch);
    if (st == DG_OK) st = dg_backend_upload(be, mm.buf[mm.x->id], x, dg_node_bytes(mm.x));
    if (st == DG_OK) st = dg_backend_upload(be, mm.buf[mm.y->id], y, dg_node_bytes(mm.y));
    if (st == DG_OK) st = manual_run(&mm);
    if (st == DG_OK) st = dg_backend_download(be, &loss, mm.buf[mm.loss->id], sizeof loss);
    if (st == DG_OK && !ref.done) st = dg__fail(DG_ERR_INVALID, "autodiff: no float64 reference (the graph step failed)");
    bool ok = false;
    if (st == DG_OK) st = bench_step_error(&mm.mlp, manual_fetch, &mm, loss, &ref, spec.tol, &err, &ok);
    if (st == DG_OK && ok) st = bench_time(be, be == ctx->gpu, manual_run, &mm, &ctx->timing, &s);
    emit(ctx, be, "manual", batch, flops, err, ok, st, &s);
    manual_free(&mm);
    bench_step_ref_free(&ref);
}

dg_status sweep_autodiff(bench_ctx *ctx) {
    const long long *sizes;
    int n = bench_sizes(ctx, ctx->quick ? quick_batches : default_batches,
                        ctx->quick ? 2 : (int)(sizeof default_batches / sizeof *default_batches), &sizes);
    bench_plan_rows(ctx, n * (2 * !!ctx->cpu + 3 * !!ctx->gpu));
    for (int i = 0; i < n && !bench_interrupted; i++) {
        int batch = (int)sizes[i];
        float *x = malloc((size_t)batch * 784 * sizeof(float));
        int32_t *y = malloc((size_t)batch * sizeof(int32_t));
        if (!x || !y) { free(x); free(y); return dg__fail(DG_ERR_OOM, "autodiff: out of memory"); }
        dg_rng r = dg_rng_new((uint64_t)batch + 99);
        for (long long j = 0; j < (long long)batch * 784; j++) x[j] = (float)dg_rng_uniform(&r);
        for (int j = 0; j < batch; j++) y[j] = (int32_t)(dg_rng_u64(&r) % 10);
        if (ctx->cpu) run_backend(ctx, ctx->cpu, batch, x, y);
        if (ctx->gpu) run_backend(ctx, ctx->gpu, batch, x, y);
        free(x);
        free(y);
    }
    return DG_OK;
}

/* One chart (manual, graph, graph + CUDA graph per backend over the batch
 * size); the summary's table of medians per backend and batch. */
bool bench_report_autodiff(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    fprintf(rep->sum, "## Autodiff: hand-written step vs dg_grad graph (MLP " WIDTHS ", Adam), median ms\n\n"
                      "| backend | batch | manual | graph | graph / manual | graph + CUDA graph |\n"
                      "|---|---|---|---|---|---|\n");
    bench_chart ch = {"autodiff_time", "MLP training step: hand-written vs autodiff graph", "batch", "median ms", true,
                      .vline = NAN};
    static const char *const backends[] = {"cpu", "gpu"};
    for (int b = 0; b < (int)(sizeof backends / sizeof *backends); b++) {
        const char *bk = backends[b];
        char t1[48], t2[48], t3[48], b1[32], b2[32], b3[32];
        snprintf(t1, sizeof t1, "%s manual", bk);
        snprintf(t2, sizeof t2, "%s graph", bk);
        snprintf(t3, sizeof t3, "%s graph + CUDA graph", bk);
        bench_series m = bench_pick(t, NULL, "manual", bk, false, BENCH_MS, t1);
        bench_series gr = bench_pick(t, NULL, "graph", bk, false, BENCH_MS, t2);
        bench_series gc = bench_pick(t, NULL, "graph-cuda", bk, false, BENCH_MS, t3);
        bench_chart_add(&ch, m);
        bench_chart_add(&ch, gr);
        bench_chart_add(&ch, gc);
        for (int i = 0; i < m.n; i++) {
            double g1 = NAN, g2 = NAN;
            for (int j = 0; j < gr.n; j++) if (gr.x[j] == m.x[i]) g1 = gr.y[j];
            for (int j = 0; j < gc.n; j++) if (gc.x[j] == m.x[i]) g2 = gc.y[j];
            fprintf(rep->sum, "| %s | %.0f | %.4f | %s | %s | %s |\n", bk, m.x[i], m.y[i],
                    bench_fmt_num(g1, "%.4f", b1, sizeof b1), bench_fmt_num(g1 / m.y[i], "%.3f", b2, sizeof b2),
                    bench_fmt_num(g2, "%.4f", b3, sizeof b3));
        }
    }
    fprintf(rep->sum, "\n");
    bench_chart_draw(rep, &ch);
    return true;
}
