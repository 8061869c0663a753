/* sweep_ops.c: memory-bound ops from 1K to 64M elements, forward and
 * backward, as GB/s (dg_node_cost: the bytes of the node's inputs and
 * outputs, each counted once: the fewest bytes the op must move).
 *
 * The cases are the rows of the op-case table (core/check/op_cases.c) that
 * have a `.sweep` entry, grown to N elements by the row's scaling rule.
 * Each case is the harness's graph, out = op(x...), loss = sum(out * w),
 * with its gradient graph. The whole plan runs once and is checked before
 * anything is timed: its output against the float64 reference's forward
 * (check f64-fwd, the forward row), and every input's gradient against the
 * float64 reference's own backward (check f64-vjp, the backward row:
 * core/check/ref_grad.h, written apart from dg_grad's rules, so a wrong
 * gradient rule is a wrong row). Then the op's forward node and its
 * backward node are timed alone, through dg_backend_compute. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/harness.h"
#include "core/check/ref_grad.h"
#include "runner/sweep.h"

#define OPS_TOL 1e-5 /* long reductions lose a little more than the tests' tolerance */

static const long long default_sizes[] = {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26};
static const long long quick_sizes[] = {1 << 10, 1 << 14, 1 << 18, 1 << 22};

typedef struct step_arg { dg_backend *be; const dg_step *s; } step_arg;
static dg_status run_step(void *arg) {
    step_arg *a = arg;
    return dg_backend_compute(a->be, a->s);
}

/* the forward node, and the backward node the case times (the last of its
 * op in the gradient, after the loss) */
static void find_steps(const dg_plan *p, const case_graph *cg, const dg_step **fwd, const dg_step **bwd) {
    int n_steps = 0;
    const dg_step *steps = p ? dg_plan_steps(p, &n_steps) : NULL;
    *fwd = *bwd = NULL;
    for (int i = 0; i < n_steps; i++) {
        if (steps[i].node == cg->out) *fwd = &steps[i];
        if (steps[i].node->id > cg->loss->id && steps[i].node->op == cg->c->sweep.bwd) *bwd = &steps[i];
    }
}

static const char *impl_name(bool gpu, int dir) {
    static const char *const names[2][2] = {{"cpu-fwd", "cpu-bwd"}, {"gpu-fwd", "gpu-bwd"}};
    return names[gpu][dir];
}

/* the worst relative error of the gradients against the own backward */
static double grad_error(const case_graph *cg, const case_result *res, const case_ref *ref) {
    double err = 0;
    for (int i = 0; i < cg->c->n_in; i++)
        if (ref->grad[i]) err = fmax(err, cmp_f32(res->grad[i], ref->grad[i], res->n_grad[i]).max_rel);
    return err;
}

/* Plans the case on be, runs it once, checks it, then times its nodes. */
static void run_backend(bench_ctx *ctx, dg_backend *be, case_graph *cg, const case_ref *ref, long long N) {
    const op_case *c = cg->c;
    bool gpu = be == ctx->gpu;
    bench_row row = {.sweep = "ops", .name = c->sweep.name, .backend = gpu ? "gpu" : "cpu", .m = N, .n = 1, .k = 1,
                     .batch = 1, .threads = ctx->threads, .warmup = ctx->timing.warmup};
    dg_plan *p;
    case_result res;
    double err[2] = {NAN, NAN};
    dg_status st = case_run_planned(cg, be, &p, &res);
    if (st == DG_OK) {
        err[0] = cmp_f32(res.out, ref->out, res.n_out).max_rel;
        err[1] = grad_error(cg, &res, ref);
    } else {
        row.note = dg_last_error();
    }
    case_result_free(&res);
    const dg_step *which[2];
    find_steps(p, cg, &which[0], &which[1]);
    for (int d = 0; d < 2; d++) {
        /* no such node: the gradient is a pass-through or a view at this shape (add; a [1,n] bias) */
        if (d == 1 && (c->sweep.bwd == DG_OP_LEAF || (st == DG_OK && !which[1]))) continue;
        row.impl = impl_name(gpu, d);
        if (!bench_wanted(ctx, row.name, row.impl)) continue;
        row.st = BENCH_NO_STATS;
        row.max_rel_err = err[d];
        row.check = d == 0 ? "f64-fwd" : "f64-vjp";
        row.status = st != DG_OK ? bench_status_word(st) : err[d] <= OPS_TOL ? "ok" : "wrong";
        if (!strcmp(row.status, "ok")) {
            if (!which[d]) {
                row.status = "error";
                row.note = "the plan has no step for this node";
            } else {
                dg_cost cost = dg_node_cost(which[d]->node);
                row.bytes = cost.bytes;
                row.flops = cost.flops;
                step_arg a = {be, which[d]};
                dg_status ts = bench_time(be, gpu, run_step, &a, &ctx->timing, &row.st);
                if (ts != DG_OK) {
                    row.status = bench_status_word(ts);
                    row.note = dg_last_error();
                }
            }
        }
        bench_emit(ctx, &row);
    }
    dg_plan_free(p);
}

/* A case that could not be built or referenced: a failed row for each of
 * its rows that would have run, with the reason. */
static void emit_failed(bench_ctx *ctx, const op_case *oc, long long N, const char *why) {
    bench_row row = {.sweep = "ops", .name = oc->sweep.name, .m = N, .n = 1, .k = 1, .batch = 1,
                     .threads = ctx->threads, .warmup = ctx->timing.warmup, .st = BENCH_NO_STATS,
                     .max_rel_err = NAN, .status = "failed", .note = why};
    for (int gpu = 0; gpu < 2; gpu++) {
        if (!(gpu ? ctx->gpu : ctx->cpu)) continue;
        row.backend = gpu ? "gpu" : "cpu";
        for (int d = 0; d < (oc->sweep.bwd == DG_OP_LEAF ? 1 : 2); d++) {
            row.impl = impl_name(gpu, d);
            if (bench_wanted(ctx, row.name, row.impl)) bench_emit(ctx, &row);
        }
    }
}

/* whether --case / --impl leave any row of this case */
static bool case_wanted(const bench_ctx *ctx, const op_case *oc) {
    for (int gpu = 0; gpu < 2; gpu++)
        for (int d = 0; d < 2; d++)
            if ((gpu ? ctx->gpu : ctx->cpu) && bench_wanted(ctx, oc->sweep.name, impl_name(gpu, d))) return true;
    return false;
}

/* builds case c at N elements, its references, and runs it on each backend */
static void run_case(bench_ctx *ctx, int c, long long N) {
    const op_case *oc = &dg_op_cases[c];
    dg_shape shape[OP_CASE_MAX_IN];
    if (!oc->sweep.name || !op_case_shapes_at(oc, N, shape) || !case_wanted(ctx, oc)) return;
    case_graph cg;
    case_ref ref = {0}; /* forward and own backward, once for every backend */
    dg_status st = case_graph_new_at(&cg, oc, shape, (uint64_t)N * 31 + (uint64_t)c);
    if (st == DG_OK) st = case_ref_own_grad(&cg, ref.grad, &ref.out);
    if (st == DG_OK) {
        if (ctx->cpu) run_backend(ctx, ctx->cpu, &cg, &ref, N);
        if (ctx->gpu) run_backend(ctx, ctx->gpu, &cg, &ref, N);
    } else {
        emit_failed(ctx, oc, N, dg_last_error());
    }
    case_ref_free(&ref);
    case_graph_free(&cg);
}

dg_status sweep_ops(bench_ctx *ctx) {
    const long long *sizes;
    int n_default = (int)(sizeof default_sizes / sizeof *default_sizes) - !ctx->extended; /* 64M: all */
    int n = bench_sizes(ctx, ctx->quick ? quick_sizes : default_sizes, ctx->quick ? 4 : n_default, &sizes);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < dg_n_op_cases; c++) {
            dg_shape shape[OP_CASE_MAX_IN];
            const op_case *oc = &dg_op_cases[c];
            if (oc->sweep.name && op_case_shapes_at(oc, sizes[i], shape))
                bench_plan_rows(ctx, (1 + (oc->sweep.bwd != DG_OP_LEAF)) * (!!ctx->cpu + !!ctx->gpu));
        }
    for (int i = 0; i < n && !bench_interrupted; i++) {
        long long N = sizes[i];
        if (N < OP_SWEEP_ROW || N % OP_SWEEP_ROW) {
            fprintf(stderr, "bench: ops: size %lld skipped (needs a multiple of %d)\n", N, OP_SWEEP_ROW);
            continue;
        }
        for (int c = 0; c < dg_n_op_cases && !bench_interrupted; c++) run_case(ctx, c, N);
    }
    return DG_OK;
}

/* Charts ops_gbps (forward GB/s against the copy ceilings) and ops_speedup
 * (forward) for the cases the op-case table flags; the summary table for
 * every swept case: the crossovers, and GB/s at the largest size measured.
 * x = elements. */
bool bench_report_ops(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    bench_chart bw = {"ops_gbps", "forward ops: bandwidth against measured copy ceilings", "elements", "GB/s", true,
                      .vline = NAN};
    bench_chart sp = {"ops_speedup", "forward ops: speedup, GPU over CPU (>1: GPU faster)", "elements", "speedup",
                      true, .vline = NAN};
    fprintf(rep->sum, "## Ops (crossover in elements; GPU GB/s at the largest size)\n\n"
                      "| op | fwd crossover | bwd crossover | GPU fwd GB/s | GPU bwd GB/s | CPU fwd GB/s |\n"
                      "|---|---|---|---|---|---|\n");
    for (int i = 0; i < dg_n_op_cases; i++) {
        const op_sweep *sw = &dg_op_cases[i].sweep;
        const char *name = sw->name;
        if (!name) continue;
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
        if (sw->chart_bw) {
            bench_chart_add(&bw, gf);
            bench_chart_add(&bw, cf);
        }
        if (sw->chart_speedup) bench_chart_add(&sp, s);
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
