/* sweep_ops.c: memory-bound ops from 1K to 64M elements, forward and
 * backward, as GB/s (bytes of the node's inputs and output, each counted
 * once: the fewest bytes the op must move).
 *
 * Each case is a small graph, out = op(x...), loss = sum(out * w), with its
 * gradient graph. The whole plan runs once and its output and gradient are
 * checked against the float64 reference; then the op's forward node and its
 * backward node are timed alone, through the backend's compute entry. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "harness.h"
#include "ref.h"
#include "sweep.h"

#define ROW 1024 /* row length of the 2-D cases */

/* One case. The chart_* flags pick the few cases the report's charts show
 * (the summary table has every case); plain booleans, so that they can move
 * with the case into a shared op-case table. */
typedef struct ops_case {
    const char *name;
    dg_op       bwd;            /* the backward node to time; DG_OP_LEAF: none */
    bool        rows2d;         /* x is [N/ROW, ROW], else [N]                  */
    bool        chart_bw;       /* ops_gbps: its forward GB/s, GPU and CPU      */
    bool        chart_speedup;  /* ops_speedup: its forward speedup             */
} ops_case;

static const ops_case cases[] = {
    /* name         backward node timed           rows2d chart_bw chart_speedup */
    {"add",         DG_OP_LEAF,                   false, true,    true},
    {"add_bcast",   DG_OP_SUM,                    true,  false,   false},
    {"mul",         DG_OP_MUL,                    false, false,   false},
    {"relu",        DG_OP_RELU_BACKWARD,          false, true,    false},
    {"gelu",        DG_OP_GELU_BACKWARD,          false, false,   false},
    {"exp",         DG_OP_MUL,                    false, false,   false},
    {"sum_rows",    DG_OP_BROADCAST_TO,           true,  true,    true},
    {"sum_cols",    DG_OP_BROADCAST_TO,           true,  false,   false},
    {"softmax",     DG_OP_SOFTMAX_BACKWARD,       true,  true,    true},
    {"softmax_ce",  DG_OP_SOFTMAX_CE_BACKWARD,    true,  false,   true},
    {"transpose",   DG_OP_PERMUTE,                true,  false,   false},
};
#define N_CASES (int)(sizeof cases / sizeof *cases)

static const long long default_sizes[] = {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26};
static const long long quick_sizes[] = {1 << 10, 1 << 14, 1 << 18, 1 << 22};

typedef struct ops_graph {
    dg_graph *g;
    dg_node  *in[2], *out, *w, *loss, *dx[2]; /* dx[i]: gradient of float input i */
    int       n_dx;
    float    *val[3];   /* in[0], in[1] (labels as int32), w */
    double   *ref[3];   /* float64 out, dx[0], dx[1]: computed once, for every backend */
} ops_graph;

static dg_node *build(const ops_case *c, dg_graph *g, dg_node **in, long long N) {
    long long rows = N / ROW;
    dg_shape s2 = DG_SHAPE(rows, ROW), s1 = DG_SHAPE(N);
    const dg_init u = {DG_INIT_FILL, 0, 0, 0};
    const char *n = c->name;
    long long side = (long long)llround(sqrt((double)N));
    in[0] = dg_param(g, "x", !strcmp(n, "transpose") ? DG_SHAPE(side, N / side) : c->rows2d ? s2 : s1, u);
    if (!strcmp(n, "add") || !strcmp(n, "mul")) {
        in[1] = dg_param(g, "y", s1, u);
        return n[0] == 'a' ? dg_add(g, in[0], in[1]) : dg_mul(g, in[0], in[1]);
    }
    if (!strcmp(n, "add_bcast")) { in[1] = dg_param(g, "b", DG_SHAPE(ROW), u); return dg_add(g, in[0], in[1]); }
    if (!strcmp(n, "relu")) return dg_relu(g, in[0]);
    if (!strcmp(n, "gelu")) return dg_gelu(g, in[0]);
    if (!strcmp(n, "exp")) return dg_exp(g, in[0]);
    if (!strcmp(n, "sum_rows")) return dg_sum(g, in[0], 2u, false);
    if (!strcmp(n, "sum_cols")) return dg_sum(g, in[0], 1u, false);
    if (!strcmp(n, "softmax")) return dg_softmax(g, in[0]);
    if (!strcmp(n, "softmax_ce")) { in[1] = dg_input_i32(g, "labels", DG_SHAPE(rows)); return dg_softmax_cross_entropy(g, in[0], in[1]); }
    return dg_transpose(g, in[0]); /* of a (nearly) square matrix */
}

static dg_status ops_graph_new(ops_graph *og, const ops_case *c, long long N) {
    memset(og, 0, sizeof *og);
    og->g = dg_graph_new();
    if (!og->g) return DG_ERR_OOM;
    og->out = build(c, og->g, og->in, N);
    og->w = dg_input(og->g, "w", og->out ? og->out->shape : DG_SHAPE(1));
    og->loss = dg_sum(og->g, dg_mul(og->g, og->out, og->w), DG_ALL_AXES, false);
    dg_node *wrt[2];
    for (int i = 0; i < 2; i++)
        if (og->in[i] && og->in[i]->dtype == DG_F32) wrt[og->n_dx++] = og->in[i];
    dg_status st = og->loss ? dg_grad(og->g, og->loss, wrt, og->n_dx, og->dx) : dg_graph_status(og->g);
    if (st != DG_OK) return st;
    dg_rng r = dg_rng_new((uint64_t)N * 31 + (uint64_t)(c - cases));
    dg_node *leaf[3] = {og->in[0], og->in[1], og->w};
    for (int i = 0; i < 3; i++) {
        if (!leaf[i]) continue;
        int64_t n = dg_node_numel(leaf[i]);
        og->val[i] = malloc((size_t)n * 4);
        if (!og->val[i]) return DG_ERR_OOM;
        for (int64_t j = 0; j < n; j++) {
            if (leaf[i]->dtype == DG_I32) ((int32_t *)og->val[i])[j] = (int32_t)(dg_rng_u64(&r) % ROW);
            else og->val[i][j] = (float)(4 * dg_rng_uniform(&r) - 2);
        }
    }
    return DG_OK;
}

static void ops_graph_free(ops_graph *og) {
    for (int i = 0; i < 3; i++) free(og->val[i]);
    for (int i = 0; i < 3; i++) free(og->ref[i]);
    dg_graph_free(og->g);
}

/* the float64 reference of out and every dx, evaluated once per case */
static dg_status ops_ref(ops_graph *og) {
    if (og->ref[0]) return DG_OK;
    int n = dg_graph_size(og->g);
    double **v = calloc((size_t)n, sizeof *v);
    if (!v) return DG_ERR_OOM;
    dg_node *leaf[3] = {og->in[0], og->in[1], og->w};
    dg_status st = DG_OK;
    for (int id = 0; id < n && st == DG_OK; id++) {
        const dg_node *x = dg_graph_node(og->g, id);
        if (x->op != DG_OP_LEAF) continue;
        int64_t cnt = dg_node_numel(x);
        if (!(v[id] = malloc((size_t)cnt * sizeof(double)))) { st = DG_ERR_OOM; break; }
        for (int i = 0; i < 3; i++)
            if (leaf[i] == x)
                for (int64_t j = 0; j < cnt; j++)
                    v[id][j] = x->dtype == DG_I32 ? ((int32_t *)og->val[i])[j] : og->val[i][j];
        if (x->leaf == DG_LEAF_CONST)
            for (int64_t j = 0; j < cnt; j++) v[id][j] = x->init.a;
    }
    if (st == DG_OK) st = ref_eval(og->g, n, v);
    dg_node *outs[3] = {og->out, og->dx[0], og->dx[1]};
    for (int i = 0; i < 1 + og->n_dx && st == DG_OK; i++) { /* keep these, free the rest */
        size_t bytes = (size_t)dg_node_numel(outs[i]) * sizeof(double);
        og->ref[i] = malloc(bytes); /* a copy: two gradients can be one node (add: dx = dy = db) */
        if (og->ref[i]) memcpy(og->ref[i], v[outs[i]->id], bytes);
        else st = DG_ERR_OOM;
    }
    ref_free(v, n);
    free(v);
    if (st != DG_OK) dg__fail(st, "float64 reference of the case failed");
    return st;
}

static double check(const ops_graph *og, float *const *res) {
    dg_node *outs[3] = {og->out, og->dx[0], og->dx[1]};
    double err = 0;
    for (int i = 0; i < 1 + og->n_dx; i++) {
        cmp_stats a = cmp_f32(res[i], og->ref[i], dg_node_numel(outs[i]));
        err = a.max_rel > err ? a.max_rel : err;
    }
    return err;
}

typedef struct step_arg { dg_backend *be; const dg_step *s; } step_arg;
static dg_status run_step(void *arg) {
    step_arg *a = arg;
    return a->be->iface->compute(a->be, a->s);
}

static double node_bytes(const dg_node *n) {
    double b = (double)dg_node_bytes(n);
    for (int i = 0; i < n->n_in; i++) b += (double)dg_node_bytes(n->in[i]);
    return b;
}

static void run_backend(bench_ctx *ctx, dg_backend *be, const ops_case *c, ops_graph *og, long long N) {
    /* og->ref holds the float64 reference */
    bool gpu = be == ctx->gpu;
    bench_row row = {.sweep = "ops", .name = c->name, .backend = gpu ? "gpu" : "cpu", .m = N, .n = 1, .k = 1,
                     .batch = 1, .threads = ctx->threads, .warmup = ctx->timing.warmup, .max_rel_err = NAN};
    dg_node *outs[3] = {og->out, og->dx[0], og->dx[1]};
    int n_outs = 1 + og->n_dx;
    dg_plan *p = NULL;
    float *res[3] = {NULL, NULL, NULL};
    dg_status st = DG_OK;
    for (int i = 0; i < n_outs && st == DG_OK; i++)
        if (!(res[i] = malloc(dg_node_bytes(outs[i])))) st = dg__fail(DG_ERR_OOM, "host memory for results");
    if (st == DG_OK) st = dg_plan_new(&p, og->g, be, outs, n_outs, NULL);
    dg_node *leaf[3] = {og->in[0], og->in[1], og->w};
    for (int i = 0; i < 3 && st == DG_OK; i++)
        if (leaf[i]) st = dg_plan_set(p, leaf[i], og->val[i], dg_node_bytes(leaf[i]));
    if (st == DG_OK) st = dg_plan_run(p);
    for (int i = 0; i < n_outs && st == DG_OK; i++) st = dg_plan_get(p, outs[i], res[i], dg_node_bytes(outs[i]));
    if (st == DG_OK) row.max_rel_err = check(og, res);
    const char *verdict = st != DG_OK ? bench_status_word(st) : row.max_rel_err <= 1e-5 ? "ok" : "wrong";
    if (st != DG_OK) fprintf(stderr, "bench: ops %s %lld on %s: %s\n", c->name, N, row.backend, dg_last_error());
    /* the forward node, then the chosen backward node (last of its op) */
    int n_steps = 0;
    const dg_step *steps = p ? dg_plan_steps(p, &n_steps) : NULL;
    const dg_step *fwd = NULL, *bwd = NULL;
    for (int i = 0; i < n_steps; i++) {
        if (steps[i].node == og->out) fwd = &steps[i];
        if (steps[i].node->id > og->loss->id && steps[i].node->op == c->bwd) bwd = &steps[i];
    }
    const dg_step *which[2] = {fwd, bwd};
    for (int d = 0; d < 2; d++) {
        /* no such node: the gradient is a pass-through or a view at this shape (add; a [1,n] bias) */
        if (d == 1 && (c->bwd == DG_OP_LEAF || (st == DG_OK && !bwd))) continue;
        row.impl = d == 0 ? (gpu ? "gpu-fwd" : "cpu-fwd") : (gpu ? "gpu-bwd" : "cpu-bwd");
        row.st = (bench_stats){NAN, NAN, NAN, NAN, 0};
        row.status = verdict;
        if (st == DG_OK && strcmp(verdict, "ok") == 0) {
            if (!which[d]) row.status = "error";
            else {
                row.bytes = node_bytes(which[d]->node);
                step_arg a = {be, which[d]};
                dg_status ts = bench_time(be, gpu, run_step, &a, &ctx->timing, &row.st);
                if (ts != DG_OK) row.status = bench_status_word(ts);
            }
        }
        bench_emit(ctx, &row);
    }
    dg_plan_free(p);
    for (int i = 0; i < 3; i++) free(res[i]);
}

dg_status sweep_ops(bench_ctx *ctx) {
    const long long *sizes;
    int n_default = (int)(sizeof default_sizes / sizeof *default_sizes) - !ctx->extended; /* 64M: all */
    int n = bench_sizes(ctx, ctx->quick ? quick_sizes : default_sizes, ctx->quick ? 4 : n_default, &sizes);
    for (int i = 0; i < n && !bench_interrupted; i++) {
        long long N = sizes[i];
        if (N < ROW || N % ROW) {
            fprintf(stderr, "bench: ops: size %lld skipped (needs a multiple of %d)\n", N, ROW);
            continue;
        }
        for (int c = 0; c < N_CASES && !bench_interrupted; c++) {
            ops_graph og;
            dg_status st = ops_graph_new(&og, &cases[c], N);
            if (st == DG_OK) st = ops_ref(&og);
            if (st != DG_OK) {
                fprintf(stderr, "bench: ops %s %lld: %s\n", cases[c].name, N, dg_last_error());
                ops_graph_free(&og);
                continue;
            }
            if (ctx->cpu) run_backend(ctx, ctx->cpu, &cases[c], &og, N);
            if (ctx->gpu) run_backend(ctx, ctx->gpu, &cases[c], &og, N);
            ops_graph_free(&og);
        }
    }
    return DG_OK;
}

/* Charts ops_gbps (forward GB/s against the copy ceilings) and ops_speedup
 * (forward) for the cases flagged; the summary table for every case: the
 * crossovers, and GB/s at the largest size measured. x = elements. */
bool bench_report_ops(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    bench_chart bw = {"ops_gbps", "forward ops: bandwidth against measured copy ceilings", "elements", "GB/s", true,
                      .vline = NAN};
    bench_chart sp = {"ops_speedup", "forward ops: speedup, GPU over CPU (>1: GPU faster)", "elements", "speedup",
                      true, .vline = NAN};
    fprintf(rep->sum, "## Ops (crossover in elements; GPU GB/s at the largest size)\n\n"
                      "| op | fwd crossover | bwd crossover | GPU fwd GB/s | GPU bwd GB/s | CPU fwd GB/s |\n"
                      "|---|---|---|---|---|---|\n");
    for (int i = 0; i < N_CASES; i++) {
        const char *name = cases[i].name;
        char t1[64], t2[64], c0[96], c1[96], b1[32], b2[32], b3[32];
        snprintf(t1, sizeof t1, "gpu %s", name);
        snprintf(t2, sizeof t2, "cpu %s", name);
        bench_series gf = bench_pick(t, name, "gpu-fwd", NULL, false, BENCH_GBPS, t1);
        bench_series cf = bench_pick(t, name, "cpu-fwd", NULL, false, BENCH_GBPS, t2);
        bench_series gb = bench_pick(t, name, "gpu-bwd", NULL, false, BENCH_GBPS, "");
        bench_series gt = bench_pick(t, name, "gpu-fwd", NULL, false, BENCH_MS, "");
        bench_series ct = bench_pick(t, name, "cpu-fwd", NULL, false, BENCH_MS, "");
        bench_series gbt = bench_pick(t, name, "gpu-bwd", NULL, false, BENCH_MS, "");
        bench_series cbt = bench_pick(t, name, "cpu-bwd", NULL, false, BENCH_MS, "");
        bench_series s = bench_speedup(&ct, &gt, name), sb = bench_speedup(&cbt, &gbt, "");
        if (cases[i].chart_bw) {
            bench_chart_add(&bw, gf);
            bench_chart_add(&bw, cf);
        }
        if (cases[i].chart_speedup) bench_chart_add(&sp, s);
        bench_crossover_str(&s, c0, sizeof c0);
        if (sb.n) bench_crossover_str(&sb, c1, sizeof c1);
        else snprintf(c1, sizeof c1, "-");
        fprintf(rep->sum, "| %s | %s | %s | %s | %s | %s |\n", name, c0, c1,
                bench_fmt_num(gf.n ? gf.y[gf.n - 1] : NAN, "%.0f", b1, sizeof b1),
                bench_fmt_num(gb.n ? gb.y[gb.n - 1] : NAN, "%.0f", b2, sizeof b2),
                bench_fmt_num(cf.n ? cf.y[cf.n - 1] : NAN, "%.1f", b3, sizeof b3));
    }
    fprintf(rep->sum, "\n");
    bench_chart_hline(&bw, rep->ceil.cpu_gbps, "CPU copy ceiling");
    bench_chart_hline(&bw, rep->ceil.gpu_gbps, "GPU copy ceiling");
    bench_chart_hline(&sp, 1.0, "break-even");
    bench_chart_draw(rep, &bw);
    bench_chart_draw(rep, &sp);
    return true;
}
