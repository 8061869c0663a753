/* sweep_attention.c: scaled dot-product attention, composed and fused,
 * forward and forward + backward, over the sequence length T.
 *
 *   composed  o = matmul(softmax_ex(matmul(q, k, trans_b), 1/sqrt(Dh),
 *             causal), v): the [B,H,T,T] scores and probabilities are
 *             tensors of the plan (memory quadratic in T)
 *   fused     o = dg_attention(q, k, v, 1/sqrt(Dh), causal): the scores
 *             never stored (memory linear in T)
 *   fwd       a plan of o;  fwdbwd  a plan of dq, dk, dv = dg_grad of
 *             sum(o * w) (w a fixed seeded input: dO = w), which runs the
 *             forward too
 *
 * Cases: "full" and "causal" at B=16, H=8, Dh=64 (bench/torch_attention_
 * peer.py's configuration) for T in 128..8192 (--sizes attention=LIST; quick:
 * 128, 256); at T=1024 also H=16 Dh=32 and H=4 Dh=128 (cases
 * full-h16d32, ..., the same B*H*Dh). impl BACKEND-FORM-PASS, backend cpu,
 * gpu (node by node) or gpu-graph (CUDA-graph replay). Inputs q, k, v, w
 * uniform in [-1, 1), seeded, uploaded once (transfer = 0).
 *
 * Precisions (--dtype; the dtype column): fp32 (TF32 off); tf32, the GPU's
 * composed rows with the plan's TF32 on; bf16 and fp16, the composed rows
 * with each product's operands cast to the dtype and float32 accumulation,
 * softmax and outputs (the training step's policy, dg_model_matmul), the
 * fused rows with q, k, v cast to the dtype, the fused op in it (float32
 * softmax and sums, P rounded to the dtype before P V; dg_model_attention)
 * and its 16-bit output cast back (attention_graph.c); the inputs rounded to the dtype
 * first. A row a backend has no path for is skipped with the reason
 * (att_refusal): tf32 on the CPU, the fused form in tf32 (its products are
 * fp32-accurate whatever TF32). A composed non-fp32 row's note names the
 * implementation of its products (dg_backend_step_impl: a CPU's bf16 by
 * oneDNN's kernel or widened to float32 for the sgemm).
 * Columns: m = n = T, k = Dh, batch = B*H (the peer's); flops by
 * att_flops (sweep_attention.h, core/ops.c's convention: a row whose count
 * differs from the core's dg_attention_flops is an error); arena_bytes and
 * live_bytes of the plan (dg_plan_stats).
 *
 * Check (before any timing; check column "f64-rows+ref@1x2xT' tol X", X
 * the precision's tolerance, att_tol):
 *  - ref@1x2xT': the same graph (form, pass, mask, Dh) at B=1, H=2,
 *    T' = min(T, 128) on the same backend and implementation, every output
 *    entry against core/check/ref.c's float64 evaluation of that graph;
 *  - f64-rows: the full-size plan's first run, its outputs NaN-filled before
 *    it (every entry must then be finite: none left unwritten) and sampled
 *    rows of them (attention_check.h: 16 query rows of o or dq, 8 key rows
 *    of dk and dv) against float64 sums from the definition.
 * max_rel_err is the largest of these errors (each max |x - ref| / max
 * |ref| per output); above the precision's tolerance the row is "wrong",
 * untimed.
 *
 * Memory: every plan is first laid out without memory (plan_predict.h),
 * so each row has its arena bytes, tried or not. GPU rows then try: a
 * plan that does not fit is an `oom` row (the allocation's message, the
 * predicted bytes). CPU rows are not tried where the plan and the host
 * copies would need more than the available host memory (`oom`) or more
 * than half of the machine's (`skipped`). DG_BENCH_MEM_LIMIT=BYTES (for
 * tests, plan_predict.h) makes every row whose plan is predicted above
 * BYTES an `oom` row, not tried, on either backend. A composed row's `oom`
 * is a finding (the quadratic scores), not a failure: it leaves the exit
 * code 0; a fused row's counts as a failure.
 *
 * CPU rows respect --cpu-cap: the time of a run is predicted from the last
 * row timed of the case and implementation (first: the reduced check's
 * warm run, whose lower rate errs long), scaled by FLOPs. The prediction
 * is the sweep's own, not the runner's: it comes after the memory verdict
 * (a row skipped by it still has its plan's bytes, which the report's
 * arena table shows) and is kept per case (the composed form's causal
 * rows do the full work for half the FLOPs).
 *
 * The rows go through the runner (runner/runner.h): a point is a case at
 * one T, in the order T, then case, then precision; the implementations
 * the 12 BACKEND-FORM-PASS in att_impl_name's order. */
#include "sweeps/attention/sweep_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/attention_check.h"
#include "core/plan.h"
#include "core/status.h"
#include "machine/env.h"
#include "runner/plan_predict.h"
#include "runner/runner.h"

static const long long default_t[] = {128, 256, 512, 1024, 2048, 4096, 8192};
static const long long quick_t[] = {128, 256};


/* ---- one T and case: the full-size inputs, shared by its rows ---- */

typedef struct att_problem {
    const att_case *c;
    int             ci;
    dg_precision    prec;
    att_dims        d;
    int64_t         n;              /* elements of q (and of each output) */
    float          *host[4];        /* q, k, v, w; NULL until a row runs  */
    float          *out;            /* [3 n]: the outputs read back       */
    att_sample     *sample;
    double          core_flops[2];  /* fwd, fwdbwd                        */
} att_problem;

static void problem_init(att_problem *pb, int ci, int64_t t, dg_precision prec) {
    const att_case *c = &att_cases[ci];
    *pb = (att_problem){.c = c, .ci = ci, .prec = prec,
                        .d = {ATT_BATCH, c->heads, t, c->dh, 1.0f / sqrtf((float)c->dh), c->causal}};
    pb->n = pb->d.b * pb->d.h * pb->d.t * pb->d.dh;
    for (int pass = 0; pass < 2; pass++) pb->core_flops[pass] = att_core_flops(&pb->d, pass == ATT_FWDBWD);
}

/* host bytes of the problem's own buffers */
static double problem_bytes(const att_problem *pb) { return 7.0 * (double)pb->n * sizeof(float); }

static dg_status problem_fill(att_problem *pb) {
    if (pb->sample) return DG_OK;
    for (int i = 0; i < 4; i++)
        if (!(pb->host[i] = malloc((size_t)pb->n * sizeof(float))))
            return dg_fail(DG_ERR_OOM, "attention sweep: out of host memory for T=%lld's inputs", (long long)pb->d.t);
    if (!(pb->out = malloc(3 * (size_t)pb->n * sizeof(float))) || !(pb->sample = malloc(sizeof *pb->sample)))
        return dg_fail(DG_ERR_OOM, "attention sweep: out of host memory for T=%lld's outputs", (long long)pb->d.t);
    for (int i = 0; i < 4; i++)
        att_fill_uniform(pb->host[i], pb->n, (uint64_t)pb->d.t << 8 ^ (uint64_t)(pb->ci * 4 + i), pb->prec);
    dg_status st = att_sample_new(pb->sample, pb->d, pb->host[0], pb->host[1], pb->host[2], pb->host[3],
                                  (uint64_t)pb->d.t * 31u + (uint64_t)pb->ci);
    if (st != DG_OK) {
        free(pb->sample);
        pb->sample = NULL;
    }
    return st;
}

static void problem_free(att_problem *pb) {
    for (int i = 0; i < 4; i++) free(pb->host[i]);
    free(pb->out);
    free(pb->sample);
}

/* ---- the runner's view (runner/runner.h): a point is a case at one T;
 * an implementation BACKEND-FORM-PASS, data its index i of att_impl_name ---- */

static struct { char name[32]; int i; } impl_defs[ATT_N_IMPLS];
static bench_impl att_impls[ATT_N_IMPLS];

static void list_impls(void) {
    for (int i = 0; i < ATT_N_IMPLS; i++) {
        att_impl_name(i, impl_defs[i].name, sizeof impl_defs[i].name);
        impl_defs[i].i = i;
        att_impls[i] = (bench_impl){.name = impl_defs[i].name, .gpu = att_backends[i / 4].gpu,
                                    .data = &impl_defs[i].i};
    }
}

typedef struct att_sweep att_sweep;

/* the runner's state of one point: its problem, its check word, and the
 * graph and plan of the row under way (prepare makes them, release frees) */
typedef struct att_point {
    att_sweep    *sw;
    att_problem   pb;
    char          check[64];       /* at most 34 characters (T' <= 128) */
    att_graph     ag;
    dg_plan      *p;
    dg_plan_stats ps;
    char          why[512];        /* the row's note                    */
} att_point;

/* what outlives a point: the reduced checks (rerun only where T' changes)
 * and the CPU's rates, both per case, implementation and precision */
struct att_sweep {
    att_reduced_check red[ATT_N_CASES][ATT_N_IMPLS][DG_PREC_COUNT];
    double            ms_per_flop[ATT_N_CASES][ATT_N_IMPLS][DG_PREC_COUNT]; /* CPU: the last row timed; 0: none */
    att_point         point;      /* the point under way */
};

static dg_status plan_run(void *p) { return dg_plan_run(p); }

static const char *cap_verdict(const bench_ctx *ctx, const att_sweep *sw, const att_problem *pb, int ii,
                               const att_reduced_check *rc, double flops, char *why, size_t n) {
    double last = sw->ms_per_flop[pb->ci][ii][pb->prec];
    double ms_per_flop = last > 0 ? last : rc->flops > 0 ? rc->ms / rc->flops : 0;
    double s = ms_per_flop * flops / 1e3;
    if (s <= ctx->cpu_cap_s) return NULL;
    snprintf(why, n, "predicted %.3g s per run > cap %.3g s (--cpu-cap)", s, ctx->cpu_cap_s);
    return why;
}

/* the full-size plan's first run, checked: *err (the sampled rows' largest
 * error; infinite if an entry is not finite, then `why` says which) */
static dg_status full_check(att_problem *pb, const att_graph *ag, dg_plan *p, dg_backend *be, double *err,
                            char *why, size_t wn) {
    const size_t bytes = (size_t)pb->n * sizeof(float);
    dg_status st = DG_OK;
    for (int i = 0; i < ag->n_in && st == DG_OK; i++) st = dg_plan_set(p, ag->in[i], pb->host[i], bytes);
    /* NaN in every output first: an entry no kernel writes stays NaN */
    for (int64_t i = 0; i < pb->n; i++) pb->out[i] = NAN;
    for (int i = 0; i < ag->n_out && st == DG_OK; i++) st = dg_backend_upload(be, dg_plan_data(p, ag->out[i]), pb->out, bytes);
    if (st == DG_OK) st = dg_plan_run(p);
    if (st == DG_OK) st = dg_backend_sync(be);
    for (int i = 0; i < ag->n_out && st == DG_OK; i++) st = dg_plan_get(p, ag->out[i], pb->out + i * pb->n, bytes);
    if (st == DG_OK && ag->n_out == 3)
        st = att_sample_keys(pb->sample, pb->host[0], pb->host[1], pb->host[2], pb->host[3]);
    if (st != DG_OK) return st;
    static const char *const names[2][3] = {{"o"}, {"dq", "dk", "dv"}};
    *err = 0;
    for (int i = 0; i < ag->n_out; i++) {
        const float *x = pb->out + i * pb->n;
        int64_t bad = 0;
        for (int64_t j = 0; j < pb->n; j++) bad += !isfinite(x[j]);
        if (bad && *err < INFINITY) {
            *err = INFINITY;
            snprintf(why, wn, "%lld of %lld entries of %s not finite after the first run", (long long)bad,
                     (long long)pb->n, names[ag->n_out == 3][i]);
        }
        att_out which = ag->n_out == 3 ? (att_out)(ATT_DQ + i) : ATT_O;
        double e = att_sample_error(pb->sample, which, x);
        *err = fmax(*err, isnan(e) ? INFINITY : e);
    }
    return DG_OK;
}

static bool case_runs(const att_case *c, long long t) { return !c->variant || t == ATT_VARIANT_T; }

/* every case at every T (the head-size variants at ATT_VARIANT_T only);
 * data: arg, the address of the sweep's att_sweep * */
static void att_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    const long long *ts;
    int nt = bench_sizes(ctx, ctx->quick ? quick_t : default_t,
                         ctx->quick ? (int)(sizeof quick_t / sizeof *quick_t) : (int)(sizeof default_t / sizeof *default_t),
                         &ts);
    for (int i = 0; i < nt; i++)
        for (int ci = 0; ci < ATT_N_CASES; ci++) {
            const att_case *c = &att_cases[ci];
            if (case_runs(c, ts[i]))
                bench_points_add(out, (bench_point){.name = c->name, .m = ts[i], .n = ts[i], .k = c->dh,
                                                    .batch = (int64_t)ATT_BATCH * c->heads, .data = arg, .index = ci});
        }
}

/* the point's problem, its inputs allocated only once a row gets as far as
 * its full-size check */
static dg_status att_setup(bench_ctx *ctx, const bench_point *pt, void **state) {
    (void)ctx;
    att_sweep *sw = *(att_sweep *const *)pt->data;
    att_point *pp = &sw->point;
    *pp = (att_point){.sw = sw};
    problem_init(&pp->pb, (int)pt->index, pt->m, pt->precision);
    snprintf(pp->check, sizeof pp->check, "f64-rows+ref@%dx%dx%lld tol %.2g", ATT_CHECK_B, ATT_CHECK_H,
             (long long)(pt->m < ATT_CHECK_T ? pt->m : ATT_CHECK_T), att_tol(pt->precision));
    *state = pp;
    return DG_OK;
}

static void att_teardown(void *state) { problem_free(&((att_point *)state)->pb); }

/* a form and precision the backend has no path for: skipped, with why */
static const char *att_skip(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, char *why, size_t n) {
    (void)ctx;
    const int ii = *(const int *)im->data;
    const char *no = att_refusal(&att_backends[ii / 4], ii / 2 % 2 == ATT_FUSED, pt->precision);
    if (no) snprintf(why, n, "%s", no);
    return no ? why : NULL;
}

/* "products: IMPL" of the first product in the graph under the plan's
 * options (dg_backend_step_impl: "cpu-openblas-bf16-widened",
 * "gpu-cublas-bf16"), into why; nothing where the backend names none */
static void products_note(dg_backend *be, const att_graph *ag, const dg_plan_opts *po, char *why, size_t wn) {
    for (int id = 0; id < dg_graph_size(ag->g); id++) {
        const dg_node *nd = dg_graph_node(ag->g, id);
        char impl[64];
        if (nd->op != DG_OP_MATMUL) continue;
        if (dg_backend_step_impl(be, nd, dg_step_flags(po), impl, sizeof impl) == DG_OK)
            snprintf(why, wn, "products: %s", impl);
        return;
    }
}

/* Everything of a row but its timing, in this order: the FLOP convention,
 * the inputs against the host memory, the plan laid out without memory
 * (the row's arena and live bytes, tried or not) and its memory verdict,
 * the reduced check, the --cpu-cap prediction, then the full-size plan and
 * its first run checked. The first of these that fails is the row's
 * status; a composed row's oom is a finding. Nothing of a row can run out
 * of memory once timed: its plan holds all of it and has run once (a
 * replayed one captured). */
static dg_status att_prepare(bench_ctx *ctx, void *state, const bench_impl *im, bench_row *row, bench_work *work) {
    att_point *pp = state;
    att_problem *pb = &pp->pb;
    const att_case *c = pb->c;
    const int ii = *(const int *)im->data;
    const att_backend *bb = &att_backends[ii / 4];
    dg_backend *be = bb->gpu ? ctx->gpu : ctx->cpu;
    const bool fused = ii / 2 % 2 == ATT_FUSED, backward = ii % 2 == ATT_FWDBWD;
    const int64_t t = pb->d.t, t_red = t < ATT_CHECK_T ? t : ATT_CHECK_T;
    const double tol = att_tol(pb->prec);
    const dg_plan_opts po = att_plan_opts(bb, pb->prec);
    char *why = pp->why;
    const size_t wn = sizeof pp->why;
    why[0] = '\0';
    row->check = pp->check;
    row->flops = att_flops(pb->d.b, pb->d.h, t, c->dh, c->causal, backward);
    dg_status st = DG_OK;
    const char *status = NULL;
    if (!(fabs(row->flops - pb->core_flops[backward]) <= 1e-9 * row->flops)) {
        status = "error";
        snprintf(why, wn, "the sweep's FLOPs %.6g differ from core dg_attention_flops' %.6g", row->flops,
                 pb->core_flops[backward]);
    }
    double inputs = (double)(backward ? 4 : 3) * (double)pb->n * sizeof(float), avail = bench_mem_available();
    if (!status && !bb->gpu && avail > 0 && inputs > avail) { /* not even the dry run's leaves */
        status = "oom";
        snprintf(why, wn, "the inputs alone need %.4g GB of host memory, %.4g GB available: not tried", inputs / 1e9,
                 avail / 1e9);
    }
    if (!status) st = att_graph_build(&pp->ag, &pb->d, fused, backward, pb->prec);
    if (!status && st == DG_OK) st = bench_plan_predict(pp->ag.g, pp->ag.out, pp->ag.n_out, &pp->ps);
    if (!status && st == DG_OK) {
        row->arena_bytes = (int64_t)pp->ps.arena_bytes;
        row->live_bytes = (int64_t)pp->ps.live_bytes;
        status = bench_memory_verdict(&pp->ps, problem_bytes(pb), bb->gpu, why, wn);
    }
    att_reduced_check *rc = &pp->sw->red[pb->ci][ii][pb->prec];
    if (!status && st == DG_OK && !(rc->done && rc->t == t_red))
        att_reduced_run(rc, be, bb, c, fused, backward, t_red, pb->prec);
    if (!status && st == DG_OK) {
        row->max_rel_err = rc->err;
        if (rc->st != DG_OK) {
            status = bench_status_word(rc->st);
            snprintf(why, wn, "%s", rc->why);
        } else if (!(rc->err <= tol)) {
            status = "wrong";
            snprintf(why, wn, "at %dx%dx%lld the %s graph differs from its float64 evaluation (error %.3g > %.2g)",
                     ATT_CHECK_B, ATT_CHECK_H, (long long)t_red, dg_precision_name(pb->prec), rc->err, tol);
        } else if (!bb->gpu && cap_verdict(ctx, pp->sw, pb, ii, rc, row->flops, why, wn)) {
            status = "skipped";
        }
    }
    if (!status && st == DG_OK) st = problem_fill(pb);
    if (!status && st == DG_OK)
        st = dg_plan_new(&pp->p, pp->ag.g, be, pp->ag.out, pp->ag.n_out, &po);
    double err = NAN;
    if (!status && st == DG_OK) st = full_check(pb, &pp->ag, pp->p, be, &err, why, wn);
    if (!status && st == DG_OK) {
        row->max_rel_err = fmax(rc->err, err);
        if (!(row->max_rel_err <= tol)) {
            status = "wrong";
            if (!why[0])
                snprintf(why, wn, "sampled rows of the full size differ from float64 (error %.3g > %.2g)", err, tol);
        }
    }
    if (!status && st == DG_OK && pb->prec != DG_PREC_FP32) products_note(be, &pp->ag, &po, why, wn);
    if (st != DG_OK) {
        status = bench_status_word(st);
        bench_plan_failure(&pp->ps, why, wn);
    }
    row->note = why[0] ? why : NULL;
    row->status = status;
    if (status) work->finding = !fused && !strcmp(status, "oom"); /* what the composed form is for */
    else *work = (bench_work){.fn = plan_run, .arg = pp->p, .be = be, .events = bb->gpu};
    return DG_OK;
}

/* checked before timing (prepare); after it, the row's rate is the next
 * prediction of its case and CPU implementation */
static bool att_timed(void *state, const bench_impl *im, bench_row *row) {
    att_point *pp = state;
    if (!im->gpu && row->st.reps > 0)
        pp->sw->ms_per_flop[pp->pb.ci][*(const int *)im->data][pp->pb.prec] = row->st.median_ms / row->flops;
    return true;
}

static void att_release(void *state, const bench_impl *im, bench_work *work) {
    (void)im; (void)work;
    att_point *pp = state;
    dg_plan_free(pp->p);
    dg_graph_free(pp->ag.g);
    pp->p = NULL;
    pp->ag = (att_graph){0};
    pp->ps = (dg_plan_stats){0};
}

dg_status sweep_attention(bench_ctx *ctx) {
    att_sweep *sw = calloc(1, sizeof *sw);
    if (!sw) return dg_fail(DG_ERR_OOM, "attention sweep: out of memory");
    list_impls();
    /* no check_word: prepare writes each point's; no flops on the points:
     * the runner predicts nothing, the cap is prepare's (per case, and
     * after the plan's memory, so a skipped row keeps its arena bytes) */
    const bench_sweep_spec spec = {
        .name = "attention", .impls = att_impls, .n_impls = ATT_N_IMPLS, .points = att_points, .arg = &sw,
        .precisions = BENCH_PREC_ALL, .skip = att_skip, .setup = att_setup, .teardown = att_teardown, .prepare = att_prepare, .check = att_timed,
        .release = att_release,
    };
    dg_status st = bench_run_spec(ctx, &spec);
    free(sw);
    return st;
}
