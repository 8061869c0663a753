/* sweep_scaling_mpi.c: the scaling sweep's CPU rows, data parallelism
 * over MPI ranks (cli/ranks.h: `mpirun -np N bench --sweep scaling
 * --backends cpu`), one process per rank, each a CPU backend of --threads
 * threads. Not under MPI: the one-rank rows alone.
 *
 * Cases MODEL-weak and MODEL-strong for n = 1, 2, 4, ... ranks below N
 * and N itself: the first n ranks train, each on its slice of the global
 * batch, their all_reduce nodes averaging the gradients over them
 * (bench_mpi_join_first); the others wait. impl "cpu-mpi": each node a
 * blocking MPI_Allreduce; "cpu-mpi-overlap" (n >= 2): the nodes in buckets
 * of up to DG_CPU_BUCKET_BYTES_DEFAULT, each bucket's MPI_Iallreduce
 * started as its gradients are final and waited for by the first step
 * that touches them (the optimizer's), the backward going on meanwhile. Weak
 * scaling keeps the batch per rank (the global batch grows with n), strong
 * scaling keeps the global batch (N times the batch per rank) and splits
 * it: a global batch that n does not divide is a skipped row that says so
 * (each rank takes an equal slice, as in bench train). The models, each
 * trained by SGD with momentum (lr 0.1), small enough for CI's 2 cores:
 *   mlp     784-512-512-10, 128 examples per rank: about 0.5 GFLOP a
 *           step per rank, 20 ms on one core
 *   charlm  the transformer sweep's char-LM cut to context 64, width 64,
 *           2 heads, 2 layers; 8 sequences per rank
 * (ResNet-18 does not fit: about 0.5 s a step per rank on one core, and
 * its float64 check longer.)
 * Row: m = ranks, batch = global batch, n = batch per rank, k = gradient
 * bytes (what each step all-reduces), threads = each rank's.
 *
 * Timing: a collective per step, so every rank runs the same number of
 * steps: --warmup untimed, then --reps timed, no time-based extension nor
 * retry (--min-time, --max-cv, --cpu-cap and --budget do not apply: each
 * rank's clock would end its row at another step). Each rank times its
 * own steps; the row is the slowest rank's (median, min, max, cv), the
 * note names it and gives the spread of the medians over the ranks. No
 * energy: the ranks' hosts are metered apart.
 *
 * Precisions (--dtype): every point in each one asked, the step under
 * that policy (scaling_step.h: dp_model_in; the CPU has no TF32 mode, so
 * its tf32 rows train the fp32 step and say so in the note), each row
 * checked and its efficiency reported within its precision.
 *
 * Check before timing (column check): on one rank "f64-step@b2", the step
 * at batch 2 against its float64 evaluation (core/check/step_check.h), with
 * the precision's tolerances (runner/step_tol.h). On
 * n ranks "mpi=one-process": STEPS steps of the n ranks from fresh
 * parameters; their parameters must be identical (a hash compared over the
 * ranks), and rank 0's update (the parameters' change) must equal that of
 * one process training the same STEPS steps, in the same precision, on
 * the whole global batch within mpi_update_tol (relative L2). In fp32 only
 * the order of float32 sums differs: each rank sums its slice, MPI adds
 * the slices; measured 9e-7 (MLP) and 5e-7 (char-LM), 2 ranks, 2-core
 * Xeon. Ranks that skipped the all-reduce are off by 0.77 (MLP) and 0.70
 * (char-LM), and their parameters differ from each other. In a precision
 * other than fp32 the timed graph must also carry its policy
 * (runner/step_policy.h, the same on every rank), and the check column
 * says so: "BASE+P-policy tol T".
 * A failure on any rank (out of memory, a plan over DG_BENCH_MEM_LIMIT)
 * ends every rank with its message (bench_mpi_end): the others would wait
 * in the next collective. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "cpu_backend/cpu_backend.h"
#include "runner/plan_predict.h"
#include "runner/runner.h"
#include "sweeps/scaling/scaling_step.h"
#include "sweeps/scaling/sweep_scaling.h"
#include "train/train_mpi.h"

enum { STEPS = 2, MAX_COUNTS = 32 };
#define MPI_UPDATE_TOL 1e-4
/* bf16 and fp16: the ranks' roundings to 16 bits differ from one
 * process's where float32 values that differ in their last bits (another
 * summation order, another batch in the mean's divisor, fp16's scaled
 * gradients near its subnormals) fall on either side of a 16-bit rounding
 * boundary, each a unit of the dtype (2^-8, 2^-11), and the second step
 * starts from the moved parameters. Measured, 2 ranks on the 2-core Xeon:
 * bf16 4.8e-7 (MLP) and 1.0e-4 (char-LM), fp16 1.4e-3 (MLP) and 2.2e-5
 * (char-LM). 1e-2 is 7 times the largest and far below ranks that skip
 * the all-reduce: 0.72 (MLP) and 0.94 (char-LM) in bf16, 0.73 (MLP) in
 * fp16, measured. */
#define MPI_UPDATE_TOL_16 1e-2

/* the n ranks' update against one process's, relative L2, in precision p */
static double mpi_update_tol(dg_precision p) {
    return p == DG_PREC_BF16 || p == DG_PREC_FP16 ? MPI_UPDATE_TOL_16 : MPI_UPDATE_TOL;
}

static dg_mlp_cfg mlp_cfg = {{784, 512, 512, 10}, 4};
static dg_charlm_cfg lm_cfg = {.vocab = 96, .context = 64, .width = 64, .heads = 2, .layers = 2};

/* the sweep's state: the models, the ranks and the open group */
typedef struct ranks_run {
    bench_ctx      *ctx;
    const bench_mpi *mpi;          /* ctx->mpi, or a lone rank 0 of 1     */
    bench_mpi       lone;
    dp_model        models[2];
    int             n_models;
    int             counts[MAX_COUNTS], n_counts;
    int             n;             /* the open group's ranks, 0: none      */
    bool            overlap;       /* its all-reduce: overlapped or not    */
    dg_backend     *be;            /* this rank's backend in it, NULL: not in it */
} ranks_run;

/* a point: MODEL-weak or MODEL-strong on the first n ranks */
typedef struct ranks_point {
    ranks_run *run;
    int        n;
    int        model;              /* the index in run->models      */
    char       name[64];
} ranks_point;

typedef struct ranks_points { ranks_point p[2 * 2 * MAX_COUNTS]; int n; } ranks_points;

/* one row's measurement: the plan of this rank's slice */
typedef struct ranks_state {
    const ranks_point *sp;
    const bench_point *pt;
    dp_model m;                    /* the model in the point's precision */
    dp_graph d;
    dg_plan *p;
    void    *bx;
    int32_t *by;
    char     note[384], check[48];
} ranks_state;

static const bool blocking = false, overlapped = true;
static const bench_impl ranks_impls[] = {{.name = "cpu-mpi", .data = &blocking},
                                         {.name = "cpu-mpi-overlap", .data = &overlapped}};

/* overlap where there is an all-reduce: 2 ranks or more */
static bool ranks_applies(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im) {
    (void)ctx;
    return pt->m > 1 || !*(const bool *)im->data;
}

/* a failure of this rank: its status, or under MPI the end of every rank
 * with its message (the others would wait in the next collective) */
static dg_status rank_failed(const ranks_run *run, dg_status st) {
    if (!run->mpi->on) return st;
    fprintf(stderr, "bench: scaling: rank %d of %d: %s\n", run->mpi->rank, run->mpi->ranks, dg_last_error());
    bench_mpi_end(run->mpi, 1);
    return st; /* not reached: bench_mpi_end aborts every rank */
}

/* the first n ranks' group, this rank in it or not (a collective: every
 * rank opens every group, in the same order) */
static dg_status open_group(ranks_run *run, int n, bool overlap) {
    if (run->n == n && run->overlap == overlap) return DG_OK;
    dg_backend_free(run->be);
    run->be = NULL;
    run->n = n;
    run->overlap = overlap;
    bool in = run->mpi->rank < n;
    dg_status st = in ? dg_cpu_backend_new(&run->be, run->ctx->threads) : DG_OK;
    if (st == DG_OK && n > 1) st = bench_mpi_join_first(run->mpi, run->be, n, overlap);
    return st;
}

static void ranks_points_of(bench_ctx *ctx, const void *varg, bench_points *out) {
    (void)ctx;
    ranks_run *run = ((void *const *)varg)[0];
    ranks_points *own = ((void *const *)varg)[1];
    int big = run->counts[run->n_counts - 1];
    for (int c = 0; c < run->n_counts; c++)
        for (int k = 0; k < run->n_models; k++)
            for (int strong = 0; strong < 2; strong++) {
                const dp_model *m = &run->models[k];
                int n = run->counts[c], global = m->per_gpu * (strong ? big : n);
                ranks_point *sp = &own->p[own->n++];
                *sp = (ranks_point){run, n, k, ""};
                snprintf(sp->name, sizeof sp->name, "%s-%s", m->name, strong ? "strong" : "weak");
                bench_points_add(out, (bench_point){.name = sp->name, .m = n, .n = global / n, .batch = global,
                                                    .data = sp});
            }
}

/* the stated rule: every rank an equal slice */
static const char *ranks_skip(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, char *why,
                              size_t n) {
    (void)ctx, (void)im;
    if (pt->batch % pt->m == 0) return NULL;
    snprintf(why, n, "global batch %lld does not split evenly over %lld ranks (each rank takes an equal slice)",
             (long long)pt->batch, (long long)pt->m);
    return why;
}

static void ranks_columns(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, bench_row *row) {
    (void)pt, (void)im;
    row->warmup = ctx->timing.warmup;
}

static dg_status ranks_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    (void)ctx;
    ranks_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "scaling: out of host memory");
    *s = (ranks_state){.sp = pt->data, .pt = pt};
    s->m = dp_model_in(&s->sp->run->models[s->sp->model], pt->precision, false);
    *out = s;
    return DG_OK;
}

static void ranks_teardown(void *arg) { free(arg); }

/* FNV-1a over the model's parameters in p: equal on ranks that hold equal ones */
static dg_status params_hash(dg_plan *p, const dg_model *model, uint64_t *h) {
    *h = 0xcbf29ce484222325ull;
    dg_status st = DG_OK;
    for (int i = 0; i < model->n_params && st == DG_OK; i++) {
        size_t bytes = dg_node_bytes(model->params[i]);
        unsigned char *buf = malloc(bytes);
        st = buf ? dg_plan_get(p, model->params[i], buf, bytes) : dg_fail(DG_ERR_OOM, "scaling: out of memory");
        for (size_t j = 0; j < bytes && st == DG_OK; j++) *h = (*h ^ buf[j]) * 0x100000001b3ull;
        free(buf);
    }
    return st;
}

/* rank 0: the relative L2 distance of the ranks' update (their parameters
 * in s->p, from fresh ones) to that of one process training STEPS steps
 * on the whole global batch */
static dg_status against_one(ranks_state *s, double *err) {
    const dp_model *m = &s->m;
    dg_plan_opts po = dp_plan_opts(m);
    int global = (int)s->pt->batch;
    size_t total = dp_grad_bytes(&s->d.model) / sizeof(float);
    dp_graph one;
    dg_backend *be = NULL;
    dg_plan *p = NULL;
    /* fresh, the ranks' and the one process's parameters, each [total] */
    float *fresh = malloc(3 * total * sizeof *fresh), *ranks = fresh + total, *alone = ranks + total;
    dg_status st = fresh ? dp_graph_new(&one, m, global, false) : dg_fail(DG_ERR_OOM, "scaling: out of memory");
    if (st == DG_OK) st = dg_cpu_backend_new(&be, s->sp->run->ctx->threads);
    if (st == DG_OK) st = dg_plan_new(&p, one.g, be, one.ts.outputs, one.ts.n_outputs, &po);
    if (st == DG_OK) st = dp_set_slice(p, &one, m, s->bx, s->by, 0, global);
    for (int i = 0, at = 0; i < one.model.n_params && st == DG_OK; i++) {
        size_t bytes = dg_node_bytes(one.model.params[i]);
        st = dg_plan_get(p, one.model.params[i], fresh + at, bytes);
        if (st == DG_OK) st = dg_plan_get(s->p, s->d.model.params[i], ranks + at, bytes);
        at += (int)(bytes / sizeof *fresh);
    }
    for (int k = 0; k < STEPS && st == DG_OK; k++) st = dg_plan_run(p);
    for (int i = 0, at = 0; i < one.model.n_params && st == DG_OK; i++) {
        size_t bytes = dg_node_bytes(one.model.params[i]);
        st = dg_plan_get(p, one.model.params[i], alone + at, bytes);
        at += (int)(bytes / sizeof *fresh);
    }
    double num = 0, den = 0;
    for (size_t j = 0; j < total && st == DG_OK; j++) {
        double want = (double)alone[j] - fresh[j], e = (double)ranks[j] - alone[j];
        num += isnan(e) ? INFINITY : e * e;
        den += want * want;
    }
    *err = sqrt(num / fmax(den, 1e-300));
    free(fresh);
    dg_plan_free(p);
    dg_backend_free(be);
    if (fresh) dp_graph_free(&one);
    return st;
}

/* the n ranks' check: STEPS steps from fresh parameters, the ranks'
 * parameters identical, rank 0's update against one process's */
static dg_status check_ranks(ranks_state *s, bool in, double *err, bool *ok) {
    const ranks_run *run = s->sp->run;
    uint64_t h = 0;
    bool same = false;
    dg_status st = DG_OK;
    for (int k = 0; k < STEPS && in && st == DG_OK; k++) st = dg_plan_run(s->p);
    if (st == DG_OK && in) st = params_hash(s->p, &s->d.model, &h);
    if (st != DG_OK) return rank_failed(run, st);
    if ((st = bench_mpi_same(run->mpi, in, h, &same)) != DG_OK) return rank_failed(run, st);
    double res[2] = {0, 0}; /* rank 0's error and verdict */
    if (run->mpi->rank == 0) {
        if ((st = against_one(s, &res[0])) != DG_OK) return rank_failed(run, st);
        res[1] = same && res[0] <= mpi_update_tol(s->m.spec.precision);
    }
    if ((st = bench_mpi_share(run->mpi, res, 2)) != DG_OK) return rank_failed(run, st);
    *err = res[0];
    *ok = res[1] != 0;
    if (!same) snprintf(s->note, sizeof s->note, "the ranks' parameters differ after %d steps", STEPS);
    else if (!*ok)
        snprintf(s->note, sizeof s->note, "the ranks' update differs from one process's by %.3g (> %.2g)", res[0],
                 mpi_update_tol(s->m.spec.precision));
    return DG_OK;
}

/* one rank's step alone at batch 2 against float64 */
static dg_status check_f64(ranks_state *s, double *err, bool *ok) {
    const dp_model *m = &s->m;
    bench_step c = {0};
    bench_step_ref ref = {0};
    void *cx = NULL;
    int32_t *cy = NULL;
    dg_status st = bench_synth_batch(m->in, 2, 5, &cx, &cy);
    if (st == DG_OK) st = bench_step_new(&c, s->sp->run->be, &m->spec, 2, cx, cy, NULL, &ref, err, ok);
    bench_step_free(&c);
    bench_step_ref_free(&ref);
    free(cx);
    free(cy);
    if (st == DG_OK && !*ok)
        snprintf(s->note, sizeof s->note, "the step differs from its float64 evaluation: %.3g", *err);
    return st;
}

static dg_status noop(void *arg) {
    (void)arg;
    return DG_OK;
}

static dg_status run_step(void *p) { return dg_plan_run(p); }

/* this rank's slice planned and checked; a rank outside the group times
 * nothing, the same number of times */
static dg_status ranks_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    ranks_state *s = arg;
    ranks_run *run = s->sp->run;
    const dp_model *m = &s->m;
    int n = s->sp->n, global = (int)s->pt->batch, per = global / n;
    bool in = run->mpi->rank < n, ok = false;
    char why[512], tol[32];
    dg_status st = open_group(run, n, *(const bool *)im->data);
    dg_plan_opts po = dp_plan_opts(m);
    if (n == 1) dp_f64_tol(tol, sizeof tol, m);
    else snprintf(tol, sizeof tol, "%.2g", mpi_update_tol(m->spec.precision));
    row->check = dp_check_word(s->check, sizeof s->check, m, n == 1 ? "f64-step@b2" : "mpi=one-process", tol);
    if (st == DG_OK) st = bench_synth_batch(m->in, global, 77u + (uint64_t)global, &s->bx, &s->by);
    if (st == DG_OK) st = dp_graph_new(&s->d, m, per, n > 1);
    if (st == DG_OK && in) {
        dg_plan_stats ps;
        const char *verdict = bench_plan_predict(s->d.g, s->d.ts.outputs, s->d.ts.n_outputs, &ps) == DG_OK
                                  ? bench_memory_verdict(&ps, 0, false, why, sizeof why)
                                  : NULL;
        if (verdict) st = dg_fail(DG_ERR_OOM, "%s", why);
    }
    if (st == DG_OK && in) st = dg_plan_new(&s->p, s->d.g, run->be, s->d.ts.outputs, s->d.ts.n_outputs, &po);
    if (st == DG_OK && in) st = dp_set_slice(s->p, &s->d, m, s->bx, s->by, run->mpi->rank * per, per);
    if (st != DG_OK) return rank_failed(run, st);
    st = n == 1 ? (in ? check_f64(s, &row->max_rel_err, &ok) : DG_OK) : check_ranks(s, in, &row->max_rel_err, &ok);
    if (st == DG_OK && n == 1 && run->mpi->on) { /* rank 0's verdict for the others, which wait */
        double res[2] = {row->max_rel_err, ok};
        st = bench_mpi_share(run->mpi, res, 2);
        row->max_rel_err = res[0];
        ok = res[1] != 0;
    }
    if (st != DG_OK) return rank_failed(run, st);
    /* the timed graph in the row's precision: built alike on every rank, so
     * every rank comes to the same verdict */
    if (ok && !dp_policy(&s->d, row->precision, false, s->note, sizeof s->note)) ok = false;
    if (!ok) {
        row->status = "wrong";
        row->note = s->note;
        return DG_OK;
    }
    row->threads = ctx->threads;
    row->arena_bytes = in ? (int64_t)dg_plan_stats_get(s->p).arena_bytes : 0;
    row->k = (int64_t)dp_grad_bytes(&s->d.model);
    row->flops = 0;
    for (int i = 0; i < dg_graph_size(s->d.g); i++) row->flops += dg_node_cost(dg_graph_node(s->d.g, i)).flops;
    row->flops *= n; /* every rank's */
    *work = in ? (bench_work){.fn = run_step, .arg = s->p, .be = run->be}
               : (bench_work){.fn = noop, .arg = NULL};
    if (run->mpi->on) work->energy_none = "MPI ranks: each host metered apart";
    return DG_OK;
}

/* the row: the slowest rank's times, the spread in the note */
static bool ranks_check(void *arg, const bench_impl *im, bench_row *row) {
    ranks_state *s = arg;
    const ranks_run *run = s->sp->run;
    int n = s->sp->n;
    size_t len = (size_t)snprintf(s->note, sizeof s->note, "%d %sgradients, %.2f MB per step", s->d.model.n_params,
                                  n > 1 ? "all-reduced " : "", (double)row->k / 1e6);
    if (row->precision == DG_PREC_TF32) /* dp_model_in: the fp32 step */
        len += (size_t)snprintf(s->note + len, sizeof s->note - len, ", no TF32 on the CPU: the fp32 step");
    if (*(const bool *)im->data)
        len += (size_t)snprintf(s->note + len, sizeof s->note - len, ", in buckets of up to %d KiB overlapping the "
                                "backward", DG_CPU_BUCKET_BYTES_DEFAULT >> 10);
    if (!run->mpi->on) {
        snprintf(s->note + len, sizeof s->note - len, "; one process (launch by mpirun for more ranks)");
        row->note = s->note;
        return true;
    }
    double v[5] = {row->st.median_ms, row->st.min_ms, row->st.max_ms, row->st.cv_pct, row->st.reps}, least;
    int slowest;
    dg_status st = bench_mpi_slowest(run->mpi, run->mpi->rank < n, v, 5, &least, &slowest);
    if (st != DG_OK) rank_failed(run, st);
    row->st.median_ms = v[0], row->st.min_ms = v[1], row->st.max_ms = v[2], row->st.cv_pct = v[3];
    row->st.reps = (int)v[4];
    snprintf(s->note + len, sizeof s->note - len, "; slowest rank %d; median over %d ranks %.3f..%.3f ms", slowest,
             n, least, v[0]);
    row->note = s->note;
    return true;
}

static void ranks_release(void *arg, const bench_impl *im, bench_work *work) {
    (void)im, (void)work;
    ranks_state *s = arg;
    dg_plan_free(s->p);
    dp_graph_free(&s->d);
    free(s->bx);
    free(s->by);
    s->p = NULL;
    s->d = (dp_graph){0};
    s->bx = NULL;
    s->by = NULL;
}

/* 1, 2, 4, ... below ranks, then ranks */
static int rank_counts(int ranks, int *out) {
    int n = 0;
    for (int c = 1; c < ranks && n < MAX_COUNTS - 1; c *= 2) out[n++] = c;
    out[n++] = ranks;
    return n;
}

dg_status sweep_scaling_ranks(bench_ctx *ctx) {
    ranks_run *run = calloc(1, sizeof *run);
    ranks_points *own = calloc(1, sizeof *own);
    if (!run || !own) {
        free(run);
        free(own);
        return dg_fail(DG_ERR_OOM, "scaling: out of host memory");
    }
    run->ctx = ctx;
    run->lone = (bench_mpi){.rank = 0, .ranks = 1};
    run->mpi = ctx->mpi && ctx->mpi->on ? ctx->mpi : &run->lone;
    run->models[0] = (dp_model){"mlp", 128, bench_mlp_step(&mlp_cfg), {784, 10, 0, 0}, false};
    run->models[1] = (dp_model){"charlm", 8, bench_charlm_step(&lm_cfg), {0, 0, lm_cfg.vocab, lm_cfg.context}, false};
    run->n_models = 2;
    for (int k = 0; k < run->n_models; k++) run->models[k].spec.optim = dg_optim_default(DG_OPTIM_MOMENTUM, 0.1f);
    run->n_counts = rank_counts(run->mpi->ranks, run->counts);
    /* every rank the same steps: a fixed count, nothing ended by a clock */
    bench_timing saved = ctx->timing;
    double cap = ctx->cpu_cap_s, deadline = ctx->deadline_s;
    if (run->mpi->on) {
        ctx->timing.warmup_s = ctx->timing.min_time_s = ctx->timing.max_cv_pct = 0;
        ctx->timing.max_retries = 0;
        ctx->timing.max_reps = ctx->timing.min_reps;
        ctx->timing.cold = false;
        ctx->cpu_cap_s = INFINITY;
        ctx->deadline_s = 0;
    }
    void *arg[2] = {run, own};
    const bench_sweep_spec spec = {
        .name = "scaling", .impls = ranks_impls, .n_impls = 2, .precisions = BENCH_PREC_ALL, .hot = true,
        .points = ranks_points_of, .arg = arg,
        .applies = ranks_applies,
        .skip = ranks_skip, .columns = ranks_columns, .setup = ranks_setup, .teardown = ranks_teardown,
        .prepare = ranks_prepare, .check = ranks_check, .release = ranks_release,
    };
    dg_status st = bench_run_spec(ctx, &spec);
    ctx->timing = saved;
    ctx->cpu_cap_s = cap;
    ctx->deadline_s = deadline;
    dg_backend_free(run->be);
    free(run);
    free(own);
    return st;
}
