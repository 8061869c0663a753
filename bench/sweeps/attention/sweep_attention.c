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
 * gpu (node by node) or gpu-graph (CUDA-graph replay). TF32 off. Inputs q,
 * k, v, w uniform in [-1, 1), seeded, uploaded once (transfer = 0).
 * Columns: m = n = T, k = Dh, batch = B*H (the peer's); flops by
 * att_flops (sweep_attention.h, core/ops.c's convention: a row whose count
 * differs from the core's dg_attention_flops is an error); arena_bytes and
 * live_bytes of the plan (dg_plan_stats).
 *
 * Check (before any timing; check column "f64-rows+ref@1x2xT'"):
 *  - ref@1x2xT': the same graph (form, pass, mask, Dh) at B=1, H=2,
 *    T' = min(T, 128) on the same backend and implementation, every output
 *    entry against core/check/ref.c's float64 evaluation of that graph;
 *  - f64-rows: the full-size plan's first run, its outputs NaN-filled before
 *    it (every entry must then be finite: none left unwritten) and sampled
 *    rows of them (attention_check.h: 16 query rows of o or dq, 8 key rows
 *    of dk and dv) against float64 sums from the definition.
 * max_rel_err is the largest of these errors (each max |x - ref| / max
 * |ref| per output); above ATT_CHECK_TOL the row is "wrong", untimed.
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
 * row timed of the implementation (first: the reduced check's warm run,
 * whose lower rate errs long), scaled by FLOPs. */
#include "sweeps/attention/sweep_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check/attention_check.h"
#include "core/plan.h"
#include "core/status_internal.h"
#include "machine/env.h"
#include "runner/plan_predict.h"
#include "runner/sweep.h"

static const long long default_t[] = {128, 256, 512, 1024, 2048, 4096, 8192};
static const long long quick_t[] = {128, 256};


/* ---- one T and case: the full-size inputs, shared by its rows ---- */

typedef struct att_problem {
    const att_case *c;
    int             ci;
    att_dims        d;
    int64_t         n;              /* elements of q (and of each output) */
    float          *host[4];        /* q, k, v, w; NULL until a row runs  */
    float          *out;            /* [3 n]: the outputs read back       */
    att_sample     *sample;
    double          core_flops[2];  /* fwd, fwdbwd                        */
} att_problem;

static void problem_init(att_problem *pb, int ci, int64_t t) {
    const att_case *c = &att_cases[ci];
    *pb = (att_problem){.c = c, .ci = ci,
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
            return dg__fail(DG_ERR_OOM, "attention sweep: out of host memory for T=%lld's inputs", (long long)pb->d.t);
    if (!(pb->out = malloc(3 * (size_t)pb->n * sizeof(float))) || !(pb->sample = malloc(sizeof *pb->sample)))
        return dg__fail(DG_ERR_OOM, "attention sweep: out of host memory for T=%lld's outputs", (long long)pb->d.t);
    for (int i = 0; i < 4; i++) att_fill_uniform(pb->host[i], pb->n, (uint64_t)pb->d.t << 8 ^ (uint64_t)(pb->ci * 4 + i));
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

/* ---- a row ---- */

typedef struct att_state {
    bench_ctx    *ctx;
    att_reduced_check red[ATT_N_CASES][ATT_N_IMPLS];
    double        ms_per_flop[ATT_N_CASES][ATT_N_IMPLS]; /* CPU: the last row timed of the case
                                                       * (the composed form's causal rows do the
                                                       * full work for half the FLOPs); 0: none */
} att_state;

static dg_status plan_run(void *p) { return dg_plan_run(p); }

static const char *cap_verdict(const att_state *S, int ci, int ii, const att_reduced_check *rc, double flops, char *why,
                               size_t n) {
    double last = S->ms_per_flop[ci][ii], ms_per_flop = last > 0 ? last : rc->flops > 0 ? rc->ms / rc->flops : 0;
    double s = ms_per_flop * flops / 1e3;
    if (s <= S->ctx->cpu_cap_s) return NULL;
    snprintf(why, n, "predicted %.3g s per run > cap %.3g s (--cpu-cap)", s, S->ctx->cpu_cap_s);
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

static void run_row(att_state *S, att_problem *pb, int ii) {
    bench_ctx *ctx = S->ctx;
    const att_case *c = pb->c;
    const att_backend *bb = &att_backends[ii / 4];
    dg_backend *be = bb->gpu ? ctx->gpu : ctx->cpu;
    const bool fused = ii / 2 % 2 == ATT_FUSED, backward = ii % 2 == ATT_FWDBWD;
    const int64_t t = pb->d.t, t_red = t < ATT_CHECK_T ? t : ATT_CHECK_T;
    char impl[32], check[48], why[512] = ""; /* check: at most 20 characters (t_red <= 128) */
    att_impl_name(ii, impl, sizeof impl);
    snprintf(check, sizeof check, "f64-rows+ref@%dx%dx%lld", ATT_CHECK_B, ATT_CHECK_H, (long long)t_red);
    bench_row row = {.sweep = "attention", .name = c->name, .impl = impl, .backend = bb->gpu ? "gpu" : "cpu",
                     .m = t, .n = t, .k = c->dh, .batch = pb->d.b * pb->d.h, .threads = ctx->threads,
                     .warmup = ctx->timing.warmup, .st = BENCH_NO_STATS,
                     .flops = att_flops(pb->d.b, pb->d.h, t, c->dh, c->causal, backward), .max_rel_err = NAN,
                     .check = check};
    att_graph ag = {0};
    dg_plan *p = NULL;
    dg_plan_stats ps = {0};
    dg_status st = DG_OK;
    const char *status = NULL;
    if (!(fabs(row.flops - pb->core_flops[backward]) <= 1e-9 * row.flops)) {
        status = "error";
        snprintf(why, sizeof why, "the sweep's FLOPs %.6g differ from core dg_attention_flops' %.6g", row.flops,
                 pb->core_flops[backward]);
    }
    double inputs = (double)(backward ? 4 : 3) * (double)pb->n * sizeof(float), avail = bench_mem_available();
    if (!status && !bb->gpu && avail > 0 && inputs > avail) { /* not even the dry run's leaves */
        status = "oom";
        snprintf(why, sizeof why, "the inputs alone need %.4g GB of host memory, %.4g GB available: not tried",
                 inputs / 1e9, avail / 1e9);
    }
    if (!status) st = att_graph_build(&ag, &pb->d, fused, backward);
    if (!status && st == DG_OK) st = bench_plan_predict(ag.g, ag.out, ag.n_out, &ps);
    if (!status && st == DG_OK) {
        row.arena_bytes = (int64_t)ps.arena_bytes;
        row.live_bytes = (int64_t)ps.live_bytes;
        status = bench_memory_verdict(&ps, problem_bytes(pb), bb->gpu, why, sizeof why);
    }
    att_reduced_check *rc = &S->red[pb->ci][ii];
    if (!status && st == DG_OK && !(rc->done && rc->t == t_red)) att_reduced_run(rc, be, bb, c, fused, backward, t_red);
    if (!status && st == DG_OK) {
        row.max_rel_err = rc->err;
        if (rc->st != DG_OK) {
            status = bench_status_word(rc->st);
            snprintf(why, sizeof why, "%s", rc->why);
        } else if (!(rc->err <= ATT_CHECK_TOL)) {
            status = "wrong";
            snprintf(why, sizeof why, "at %dx%dx%lld the graph differs from its float64 evaluation (error %.3g)",
                     ATT_CHECK_B, ATT_CHECK_H, (long long)t_red, rc->err);
        } else if (!bb->gpu && cap_verdict(S, pb->ci, ii, rc, row.flops, why, sizeof why)) {
            status = "skipped";
        }
    }
    if (!status && st == DG_OK) st = problem_fill(pb);
    if (!status && st == DG_OK) st = dg_plan_new(&p, ag.g, be, ag.out, ag.n_out, &(dg_plan_opts){.no_replay = !bb->replay});
    double err = NAN;
    if (!status && st == DG_OK) st = full_check(pb, &ag, p, be, &err, why, sizeof why);
    if (!status && st == DG_OK) {
        row.max_rel_err = fmax(rc->err, err);
        status = row.max_rel_err <= ATT_CHECK_TOL ? "ok" : "wrong";
        if (!strcmp(status, "wrong") && !why[0])
            snprintf(why, sizeof why, "sampled rows of the full size differ from float64 (error %.3g)", err);
    }
    if (status && !strcmp(status, "ok")) st = bench_time(be, bb->gpu, plan_run, p, &ctx->timing, &row.st);
    if (st == DG_OK && status && !strcmp(status, "ok") && !bb->gpu && row.st.reps > 0)
        S->ms_per_flop[pb->ci][ii] = row.st.median_ms / row.flops;
    if (st != DG_OK) {
        status = bench_status_word(st);
        bench_plan_failure(&ps, why, sizeof why);
    }
    row.status = status;
    row.note = why[0] ? why : NULL;
    if (!fused && !strcmp(status, "oom")) bench_emit_finding(ctx, &row); /* what the composed form is for */
    else bench_emit(ctx, &row);
    dg_plan_free(p);
    dg_graph_free(ag.g);
}

static bool impl_wanted(const bench_ctx *ctx, const att_case *c, int ii) {
    char impl[32];
    att_impl_name(ii, impl, sizeof impl);
    return (att_backends[ii / 4].gpu ? ctx->gpu : ctx->cpu) && bench_wanted(ctx, c->name, impl);
}

static bool case_runs(const att_case *c, long long t) { return !c->variant || t == ATT_VARIANT_T; }

dg_status sweep_attention(bench_ctx *ctx) {
    const long long *ts;
    int nt = bench_sizes(ctx, ctx->quick ? quick_t : default_t,
                         ctx->quick ? (int)(sizeof quick_t / sizeof *quick_t) : (int)(sizeof default_t / sizeof *default_t),
                         &ts);
    att_state *S = calloc(1, sizeof *S);
    if (!S) return dg__fail(DG_ERR_OOM, "attention sweep: out of memory");
    S->ctx = ctx;
    int rows = 0;
    for (int i = 0; i < nt; i++)
        for (int ci = 0; ci < ATT_N_CASES; ci++)
            for (int ii = 0; ii < ATT_N_IMPLS && case_runs(&att_cases[ci], ts[i]); ii++)
                rows += impl_wanted(ctx, &att_cases[ci], ii);
    bench_plan_rows(ctx, rows);
    for (int i = 0; i < nt && !bench_interrupted; i++)
        for (int ci = 0; ci < ATT_N_CASES && !bench_interrupted; ci++) {
            bool any = false;
            for (int ii = 0; ii < ATT_N_IMPLS; ii++) any |= impl_wanted(ctx, &att_cases[ci], ii);
            if (!any || !case_runs(&att_cases[ci], ts[i])) continue;
            att_problem pb;
            problem_init(&pb, ci, ts[i]);
            for (int ii = 0; ii < ATT_N_IMPLS && !bench_interrupted; ii++)
                if (impl_wanted(ctx, &att_cases[ci], ii)) run_row(S, &pb, ii);
            problem_free(&pb);
        }
    free(S);
    return DG_OK;
}
