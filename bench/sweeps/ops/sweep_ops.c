/* sweep_ops.c: memory-bound ops from 1K to 64M elements, forward and
 * backward, as GB/s (dg_node_cost: the bytes of the node's inputs and
 * outputs, each counted once in its dtype: the fewest bytes the op must
 * move), in fp32, bf16 and fp16.
 *
 * The cases are the rows of the op-case table (core/check/op_cases.c) that
 * have a `.sweep` entry, grown to N elements by the row's scaling rule.
 * Each case is the harness's graph, out = op(x...), loss = sum(out * w),
 * with its gradient graph; in bf16 and fp16 the op reads and writes 2-byte
 * storage (computing in float32, as the kernels do) between casts of its
 * float32 inputs and back (ops_dtype.h), and its backward node reads the
 * forward's 16-bit values with the 16-bit gradient of the op's output
 * (where its kernels take float32, the node is fp32's). The whole plan runs once and is checked before anything is
 * timed: its output against the float64 reference's forward (check
 * f64-fwd, the forward row), and every input's gradient against the
 * float64 reference's own backward (check f64-vjp, the backward row:
 * core/check/ref_grad.h, written apart from dg_grad's rules, so a wrong
 * gradient rule is a wrong row), each to the bound of its dtype
 * (ops_dtype.c). Then the op's forward node and its backward node are
 * timed alone, through dg_backend_compute.
 *
 * Precisions: tf32 rounds a product's operands and these ops have none, so
 * it has no rows (said once as the sweep ends). An op the graph defines on
 * float32 alone (the softmax cross-entropy, whose loss stays float32 in
 * every precision) has no bf16 or fp16 rows, nor a backward
 * node that reads no 16-bit value (it is the fp32 row's node): not listed,
 * said once on stderr, since that is the graph's definition, the same on
 * every backend. An op the graph holds in the dtype but a backend cannot
 * run is a row with status unsupported and the backend's reason: a gap of
 * that backend, shown beside the other backend's row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/harness.h"
#include "core/check/ref_grad.h"
#include "runner/runner.h"
#include "sweeps/ops/ops_dtype.h"

static const long long default_sizes[] = {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26};
static const long long quick_sizes[] = {1 << 10, 1 << 14, 1 << 18, 1 << 22};

typedef struct step_arg { dg_backend *be; const dg_step *s; } step_arg;
static dg_status run_step(void *arg) {
    step_arg *a = arg;
    return dg_backend_compute(a->be, a->s);
}

/* the forward node (under its cast back to float32 in bf16 and fp16), and
 * the backward node the case times (the last of its op in the gradient,
 * after the loss) */
static void find_steps(const dg_plan *p, const case_graph *cg, const dg_step **fwd, const dg_step **bwd) {
    int n_steps = 0;
    const dg_step *steps = p ? dg_plan_steps(p, &n_steps) : NULL;
    const dg_node *f = ops_timed_forward(cg), *b = ops_timed_backward(cg);
    *fwd = *bwd = NULL;
    for (int i = 0; i < n_steps; i++) {
        if (steps[i].node == f) *fwd = &steps[i];
        if (b && steps[i].node == b) *bwd = &steps[i];
    }
}

/* ---- the runner's view (runner/runner.h): a point is an op case at N
 * elements; an implementation a backend and a direction (0 forward, 1
 * backward), the two directions of a backend sharing one plan ---- */

static const int fwd = 0, bwd = 1;
static const bench_impl ops_impls[] = {
    {.name = "cpu-fwd", .data = &fwd}, {.name = "cpu-bwd", .data = &bwd},
    {.name = "gpu-fwd", .gpu = true, .data = &fwd}, {.name = "gpu-bwd", .gpu = true, .data = &bwd},
};

static int direction(const bench_impl *im) { return *(const int *)im->data; }

#define OPS_PRECISIONS (BENCH_PREC(DG_PREC_FP32) | BENCH_PREC(DG_PREC_BF16) | BENCH_PREC(DG_PREC_FP16))

/* one stderr line per swept case and direction that has no rows in a
 * precision the run asks for (ops_case_has: not listed, the header says
 * why) */
static void note_missing(const bench_ctx *ctx) {
    dg_precision asked[DG_PREC_COUNT];
    int n = bench_precisions(ctx, asked);
    for (int c = 0; c < dg_n_op_cases; c++) {
        const op_case *oc = &dg_op_cases[c];
        for (int d = 0; oc->sweep.name && d < 1 + (oc->sweep.bwd != DG_OP_LEAF); d++) {
            char names[64] = "", why[512] = "";
            bool fwd_refused = false;
            for (int i = 0; i < n; i++) {
                char w[512];
                if (!(OPS_PRECISIONS & BENCH_PREC(asked[i])) || ops_case_has(oc, asked[i], d, w, sizeof w)) continue;
                if (d && !ops_case_has(oc, asked[i], false, w, sizeof w)) { /* said of its forward rows */
                    fwd_refused = true;
                    continue;
                }
                snprintf(why, sizeof why, "%s", w);
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", *names ? ", " : "",
                         dg_precision_name(asked[i]));
            }
            if (*names && !fwd_refused)
                fprintf(stderr, "bench: ops: %s has no %s %srows: %s\n", oc->sweep.name, names, d ? "backward " : "",
                        why);
        }
    }
}

/* every swept case at every size (a size that is not a multiple of the
 * row length is said on stderr and left out) */
static void ops_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    (void)arg;
    note_missing(ctx);
    const long long *sizes;
    int n_default = (int)(sizeof default_sizes / sizeof *default_sizes) - !ctx->extended; /* 64M: all */
    int n = bench_sizes(ctx, ctx->quick ? quick_sizes : default_sizes, ctx->quick ? 4 : n_default, &sizes);
    for (int i = 0; i < n; i++) {
        long long N = sizes[i];
        if (N < OP_SWEEP_ROW || N % OP_SWEEP_ROW) {
            fprintf(stderr, "bench: ops: size %lld skipped (needs a multiple of %d)\n", N, OP_SWEEP_ROW);
            continue;
        }
        for (int c = 0; c < dg_n_op_cases; c++) {
            const op_case *oc = &dg_op_cases[c];
            dg_shape shape[OP_CASE_MAX_IN];
            if (oc->sweep.name && op_case_shapes_at(oc, N, shape))
                bench_points_add(out, (bench_point){.name = oc->sweep.name, .m = N, .n = 1, .k = 1, .batch = 1,
                                                    .data = oc, .index = c});
        }
    }
}

/* a backward row where the op has a backward node of its own; a row in a
 * precision the graph holds the op in */
static bool ops_applies(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im) {
    (void)ctx;
    const op_case *oc = pt->data;
    char why[512];
    int d = direction(im);
    return (d == fwd || oc->sweep.bwd != DG_OP_LEAF) && ops_case_has(oc, pt->precision, d == bwd, why, sizeof why);
}

/* one backend's plan of the case, run once and checked */
typedef struct ops_planned {
    bool       done;
    dg_status  st;
    char       why[256];      /* st's message                         */
    dg_plan   *p;
    double     err[2];        /* forward, backward against float64   */
    step_arg   step[2];       /* the nodes timed alone                */
} ops_planned;

typedef struct ops_state {
    op_case     c;            /* the case in the point's precision (cg.c) */
    dg_dtype    dtype;        /* its op's storage                      */
    case_graph  cg;
    case_ref    ref;          /* forward and own backward, once for every backend */
    ops_planned on[2];        /* cpu, gpu                              */
} ops_state;

static void ops_teardown(void *arg) {
    ops_state *s = arg;
    for (int b = 0; b < 2; b++) dg_plan_free(s->on[b].p);
    case_ref_free(&s->ref);
    case_graph_free(&s->cg);
    free(s);
}

static dg_status ops_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    (void)ctx;
    const op_case *oc = pt->data;
    dg_shape shape[OP_CASE_MAX_IN];
    op_case_shapes_at(oc, pt->m, shape);
    ops_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "ops: out of host memory for %s", oc->sweep.name);
    s->c = ops_case_in(oc, pt->precision);
    s->dtype = dg_precision_dtype(pt->precision);
    /* the same float32 inputs in every precision, rounded by the graph's
     * casts; a graph that fails halfway keeps what it built: the teardown
     * frees it */
    dg_status st = case_graph_new_at(&s->cg, &s->c, shape, (uint64_t)pt->m * 31 + (uint64_t)pt->index);
    if (st != DG_OK) {
        ops_teardown(s);
        return st;
    }
    st = case_ref_own_grad(&s->cg, s->ref.grad, &s->ref.out);
    if (st != DG_OK) {
        ops_teardown(s);
        return st;
    }
    *out = s;
    return DG_OK;
}

/* plans the case on be, runs it once and checks both directions */
static void plan_on(ops_state *s, ops_planned *on, dg_backend *be) {
    case_result res;
    on->done = true;
    on->err[0] = on->err[1] = NAN;
    on->st = case_run_planned(&s->cg, be, &on->p, &res);
    if (on->st == DG_OK) {
        ops_errors(&s->cg, &res, &s->ref, s->dtype, on->err);
    } else {
        snprintf(on->why, sizeof on->why, "%s", dg_last_error());
    }
    case_result_free(&res);
    const dg_step *which[2];
    find_steps(on->p, &s->cg, &which[0], &which[1]);
    for (int d = 0; d < 2; d++) on->step[d] = (step_arg){be, which[d]};
}

/* checked first: the plan's output or gradients against float64; then the
 * direction's node alone is timed */
static dg_status ops_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    ops_state *s = arg;
    ops_planned *on = &s->on[im->gpu];
    int d = direction(im);
    if (!on->done) plan_on(s, on, im->gpu ? ctx->gpu : ctx->cpu);
    row->check = d == fwd ? "f64-fwd" : "f64-vjp";
    if (on->st != DG_OK) {
        row->status = bench_status_word(on->st);
        row->note = on->why;
        return DG_OK;
    }
    /* no such node: the gradient is a pass-through or a view at this shape (add; a [1,n] bias) */
    if (d == bwd && !on->step[d].s) {
        work->no_row = true;
        return DG_OK;
    }
    row->max_rel_err = on->err[d];
    if (!on->step[d].s) {
        row->status = "error";
        row->note = "the plan has no step for this node";
        return DG_OK;
    }
    const dg_node *node = on->step[d].s->node;
    if (!(on->err[d] <= ops_tol(s->dtype, s->c.op, ops_reduction_length(node), d == bwd))) {
        row->status = "wrong";
        return DG_OK;
    }
    /* a row of a dtype times a node that reads or writes it: never an fp32
     * node under a bf16 label */
    if (!ops_node_in(node, s->dtype)) {
        row->status = "error";
        snprintf(on->why, sizeof on->why, "the timed %s node holds no %s", dg_op_name(node->op),
                 dg_dtype_name(s->dtype));
        row->note = on->why;
        return DG_OK;
    }
    dg_cost cost = dg_node_cost(node);
    row->bytes = cost.bytes;
    row->flops = cost.flops;
    *work = (bench_work){.fn = run_step, .arg = &on->step[d], .be = on->step[d].be, .events = im->gpu};
    return DG_OK;
}

dg_status sweep_ops(bench_ctx *ctx) {
    static const bench_sweep_spec spec = {
        .name = "ops", .impls = ops_impls, .n_impls = 4, .points = ops_points, .applies = ops_applies,
        .precisions = OPS_PRECISIONS,
        .precisions_why = "tf32 rounds a product's operands, and these ops have none",
        .setup = ops_setup, .teardown = ops_teardown, .prepare = ops_prepare,
    };
    return bench_run_spec(ctx, &spec);
}

/* The forward charts of precision p: GB/s against the copy ceilings (bytes
 * move the same in any dtype) and the speedup, of the cases the op-case
 * table flags; fp32 keeps the names of the runs before the precision axis
 * (ops_gbps, ops_speedup), the others end in the dtype (ops_gbps_bf16).
 * One summary line per swept case that has rows in p: the crossovers, and
 * GB/s at the largest size measured. x = elements. */
static void report_precision(bench_report *rep, const bench_table *t, dg_precision p) {
    const char *dt = dg_precision_name(p);
    char f1[32], f2[32], t1[96], t2[96];
    snprintf(f1, sizeof f1, p == DG_PREC_FP32 ? "ops_gbps" : "ops_gbps_%s", dt);
    snprintf(f2, sizeof f2, p == DG_PREC_FP32 ? "ops_speedup" : "ops_speedup_%s", dt);
    snprintf(t1, sizeof t1, "forward ops, %s: bandwidth against measured copy ceilings", dt);
    snprintf(t2, sizeof t2, "forward ops, %s: speedup, GPU over CPU (>1: GPU faster)", dt);
    bench_chart bw = {f1, t1, "elements", "GB/s", true, .vline = NAN};
    bench_chart sp = {f2, t2, "elements", "speedup", true, .vline = NAN};
    int drawn = 0;
    for (int i = 0; i < dg_n_op_cases; i++) {
        const op_sweep *sw = &dg_op_cases[i].sweep;
        const char *name = sw->name;
        if (!name) continue;
        char l1[64], l2[64], c0[96], c1[96], b1[32], b2[32], b3[32];
        snprintf(l1, sizeof l1, "gpu %s", name);
        snprintf(l2, sizeof l2, "cpu %s", name);
        bench_series gf = bench_pick_prec(t, name, "gpu-fwd", NULL, p, false, BENCH_GBPS, l1);
        bench_series cf = bench_pick_prec(t, name, "cpu-fwd", NULL, p, false, BENCH_GBPS, l2);
        bench_series gb = bench_pick_prec(t, name, "gpu-bwd", NULL, p, false, BENCH_GBPS, "");
        bench_series gt = bench_pick_prec(t, name, "gpu-fwd", NULL, p, false, BENCH_MS, "");
        bench_series ct = bench_pick_prec(t, name, "cpu-fwd", NULL, p, false, BENCH_MS, "");
        bench_series gbt = bench_pick_prec(t, name, "gpu-bwd", NULL, p, false, BENCH_MS, "");
        bench_series cbt = bench_pick_prec(t, name, "cpu-bwd", NULL, p, false, BENCH_MS, "");
        if (!gf.n && !cf.n && !gb.n && !cbt.n) continue;
        bench_series sf = bench_speedup(&ct, &gt, name), sb = bench_speedup(&cbt, &gbt, "");
        if (sw->chart_bw) {
            bench_chart_add(&bw, gf);
            bench_chart_add(&bw, cf);
            drawn += gf.n + cf.n;
        }
        if (sw->chart_speedup) bench_chart_add(&sp, sf);
        bench_crossover_str(&sf, c0, sizeof c0);
        if (sb.n) bench_crossover_str(&sb, c1, sizeof c1);
        else snprintf(c1, sizeof c1, "-");
        fprintf(rep->sum, "| %s | %s | %s | %s | %s | %s | %s |\n", name, dt, c0, c1,
                bench_fmt_num(gf.n ? gf.y[gf.n - 1] : NAN, "%.0f", b1, sizeof b1),
                bench_fmt_num(gb.n ? gb.y[gb.n - 1] : NAN, "%.0f", b2, sizeof b2),
                bench_fmt_num(cf.n ? cf.y[cf.n - 1] : NAN, "%.1f", b3, sizeof b3));
    }
    if (!drawn && p != DG_PREC_FP32) return; /* fp32 draws its charts as before, rows or not */
    bench_chart_hline(&bw, rep->ceil.cpu_gbps, "CPU copy ceiling");
    bench_chart_hline(&bw, rep->ceil.gpu_gbps, "GPU copy ceiling");
    bench_chart_hline(&sp, 1.0, "break-even");
    bench_chart_draw(rep, &bw);
    bench_chart_draw(rep, &sp);
}

/* The summary's ops table, grouped by dtype (fp32, then bf16 and fp16),
 * and each precision's charts. */
bool bench_report_ops(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    fprintf(rep->sum, "## Ops (crossover in elements; GB/s at the largest size, 2-byte elements in bf16 and fp16)\n\n"
                      "| op | dtype | fwd crossover | bwd crossover | GPU fwd GB/s | GPU bwd GB/s | CPU fwd GB/s |\n"
                      "|---|---|---|---|---|---|---|\n");
    for (int p = 0; p < DG_PREC_COUNT; p++) report_precision(rep, t, (dg_precision)p);
    fprintf(rep->sum, "\n");
    return true;
}
