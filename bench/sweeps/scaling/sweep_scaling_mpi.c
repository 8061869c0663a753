/* sweep_scaling_mpi.c: the scaling sweep's rows of MPI ranks
 * (scaling_ranks.h), and its CPU rows, data parallelism over MPI ranks
 * (cli/ranks.h: `mpirun -np N bench --sweep scaling --backends cpu`), one
 * process per rank, each a CPU backend of --threads threads. Not under
 * MPI: the one-rank rows alone. The GPU ranks' rows
 * (sweep_scaling_mpi_gpu.c) are these with a GPU per rank.
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
 * the precision's tolerances (runner/step_tol.h; scaling_step.h:
 * dp_check_f64). On
 * n ranks "mpi=one-process": STEPS steps of the n ranks from fresh
 * parameters; their parameters must be identical (a hash compared over the
 * ranks), and rank 0's update (the parameters' change) must equal that of
 * one process training the same STEPS steps, in the same precision, on
 * the whole global batch within mpi_tol (relative L2). In fp32 only
 * the order of float32 sums differs: each rank sums its slice, MPI adds
 * the slices; measured 9e-7 (MLP) and 5e-7 (char-LM), 2 ranks, 2-core
 * Xeon. Ranks that skipped the all-reduce are off by 0.77 (MLP) and 0.70
 * (char-LM), and their parameters differ from each other. A model with
 * batch norm (the GPU ranks' ResNet-18) normalises each rank's slice by
 * its own statistics, which one process on the whole batch does not:
 * "mpi=mean-of-slices" instead, one step of the n ranks, their parameters
 * identical, and rank 0's equal to the mean of those of one process
 * stepping each slice alone from fresh parameters (the first momentum
 * step is linear in the gradient) within MPI_SLICES_TOL of the
 * parameters (relative L2), the one-process GPU rows' check (sweep_scaling.c)
 * across processes. In a precision
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
#include "sweeps/scaling/scaling_ranks.h"
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
 * fp16, measured. A GPU's tf32 rounds the products' operands to 10 bits
 * as fp16 does, with the same effect: its tolerance too. */
#define MPI_UPDATE_TOL_16 1e-2
/* mean-of-slices: the one-process GPU rows' bound (sweep_scaling.c) */
#define MPI_SLICES_TOL 1e-4

/* the n ranks' check's bound for m (in its precision) on GPUs or CPUs:
 * mean-of-slices, or the update against one process's (relative L2) */
static double mpi_tol(const dp_model *m, bool gpu) {
    dg_precision p = m->spec.precision;
    bool short_operands = p == DG_PREC_BF16 || p == DG_PREC_FP16 || (gpu && p == DG_PREC_TF32);
    return m->batch_norm ? MPI_SLICES_TOL : short_operands ? MPI_UPDATE_TOL_16 : MPI_UPDATE_TOL;
}

/* the sweep's state: the models, the ranks and the open group */
typedef struct ranks_run {
    bench_ctx        *ctx;
    const ranks_kind *kind;
    const bench_mpi  *mpi;         /* ctx->mpi, or a lone rank 0 of 1     */
    bench_mpi         lone;
    dp_model          models[RANKS_MAX_MODELS];
    int               n_models;
    int               counts[MAX_COUNTS], n_counts;
    int               n;           /* the open group's ranks, 0: none      */
    const bench_impl *im;          /* its implementation                   */
    dg_backend       *be;          /* this rank's backend in it, NULL: not in it */
} ranks_run;

/* a point: MODEL-weak or MODEL-strong on the first n ranks */
typedef struct ranks_point {
    ranks_run *run;
    int        n;
    int        model;              /* the index in run->models      */
    char       name[64];
} ranks_point;

typedef struct ranks_points { ranks_point p[2 * RANKS_MAX_MODELS * MAX_COUNTS]; int n; } ranks_points;

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

static bool ranks_applies(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im) {
    const ranks_point *sp = pt->data;
    (void)ctx;
    return sp->run->kind->applies(im, sp->n);
}

/* a failure of this rank: its status, or under MPI the end of every rank
 * with its message (the others would wait in the next collective) */
static dg_status rank_failed(const ranks_run *run, dg_status st) {
    if (!run->mpi->on) return st;
    fprintf(stderr, "bench: scaling: rank %d of %d: %s\n", run->mpi->rank, run->mpi->ranks, dg_last_error());
    bench_mpi_end(run->mpi, 1);
    return st; /* not reached: bench_mpi_end aborts every rank */
}

/* the first n ranks' group for im, this rank in it or not (a collective:
 * every rank opens every group, in the same order) */
static dg_status open_group(ranks_run *run, int n, const bench_impl *im) {
    if (run->n == n && run->im == im) return DG_OK;
    dg_backend_free(run->be);
    run->be = NULL;
    run->n = n;
    run->im = im;
    return run->kind->open(run->ctx, run->mpi, im, n, &run->be);
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
    const ranks_run *run = s->sp->run;
    s->m = dp_model_in(&run->models[s->sp->model], pt->precision, run->kind->gpu);
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

/* the model's parameters in p, one after another, into out */
static dg_status params_get(dg_plan *p, const dg_model *model, float *out) {
    dg_status st = DG_OK;
    for (int i = 0; i < model->n_params && st == DG_OK; i++) {
        size_t bytes = dg_node_bytes(model->params[i]);
        st = dg_plan_get(p, model->params[i], out, bytes);
        out += bytes / sizeof *out;
    }
    return st;
}

/* rank 0: the relative L2 distance of the ranks' parameters in s->p
 * (after `steps` steps from fresh ones) to the mean of those of one
 * process stepping each of `slices` equal slices of the global batch
 * alone, `steps` times from fresh parameters: of the update (the change
 * from the fresh parameters) where !of_params, else of the parameters */
static dg_status against_one(ranks_state *s, int slices, int steps, bool of_params, double *err) {
    const dp_model *m = &s->m;
    const ranks_run *run = s->sp->run;
    dg_plan_opts po = dp_plan_opts(m);
    int per = (int)s->pt->batch / slices;
    size_t total = dp_grad_bytes(&s->d.model) / sizeof(float);
    dp_graph one;
    dg_backend *be = NULL;
    dg_plan *p = NULL;
    /* fresh, the ranks' and one slice's parameters, each [total]; their mean over the slices */
    float *fresh = malloc(3 * total * sizeof *fresh), *ranks = fresh + total, *slice = ranks + total;
    double *mean = calloc(total, sizeof *mean);
    bool made = fresh && mean;
    dg_status st = made ? dp_graph_new(&one, m, per, false) : dg_fail(DG_ERR_OOM, "scaling: out of memory");
    if (st == DG_OK) st = run->kind->alone(run->ctx, run->mpi, &be);
    if (st == DG_OK) st = params_get(s->p, &s->d.model, ranks);
    for (int j = 0; j < slices && st == DG_OK; j++) {
        st = dg_plan_new(&p, one.g, be, one.ts.outputs, one.ts.n_outputs, &po);
        if (st == DG_OK) st = dp_set_slice(p, &one, m, s->bx, s->by, j * per, per);
        if (st == DG_OK && j == 0) st = params_get(p, &one.model, fresh);
        for (int k = 0; k < steps && st == DG_OK; k++) st = dg_plan_run(p);
        if (st == DG_OK) st = params_get(p, &one.model, slice);
        for (size_t i = 0; i < total && st == DG_OK; i++) mean[i] += slice[i] / (double)slices;
        dg_plan_free(p);
        p = NULL;
    }
    double num = 0, den = 0;
    for (size_t j = 0; j < total && st == DG_OK; j++) {
        double want = of_params ? mean[j] : mean[j] - fresh[j], e = (double)ranks[j] - mean[j];
        num += isnan(e) ? INFINITY : e * e;
        den += want * want;
    }
    *err = sqrt(num / fmax(den, 1e-300));
    free(fresh);
    free(mean);
    dg_backend_free(be);
    if (made) dp_graph_free(&one);
    return st;
}

/* the n ranks' check: their steps from fresh parameters, the ranks'
 * parameters identical, rank 0's against one process's: on the whole
 * global batch (STEPS steps), or with batch norm the mean of its slices
 * alone (one step) */
static dg_status check_ranks(ranks_state *s, bool in, double *err, bool *ok) {
    const ranks_run *run = s->sp->run;
    bool slices = s->m.batch_norm, same = false;
    int steps = slices ? 1 : STEPS;
    double tol = mpi_tol(&s->m, run->kind->gpu);
    uint64_t h = 0;
    dg_status st = DG_OK;
    for (int k = 0; k < steps && in && st == DG_OK; k++) st = dg_plan_run(s->p);
    if (st == DG_OK && in) st = params_hash(s->p, &s->d.model, &h);
    if (st != DG_OK) return rank_failed(run, st);
    if ((st = bench_mpi_same(run->mpi, in, h, &same)) != DG_OK) return rank_failed(run, st);
    double res[2] = {0, 0}; /* rank 0's error and verdict */
    if (run->mpi->rank == 0) {
        if ((st = against_one(s, slices ? s->sp->n : 1, steps, slices, &res[0])) != DG_OK) return rank_failed(run, st);
        res[1] = same && res[0] <= tol;
    }
    if ((st = bench_mpi_share(run->mpi, res, 2)) != DG_OK) return rank_failed(run, st);
    *err = res[0];
    *ok = res[1] != 0;
    if (!same) snprintf(s->note, sizeof s->note, "the ranks' parameters differ after %d step%s", steps,
                        steps > 1 ? "s" : "");
    else if (!*ok)
        snprintf(s->note, sizeof s->note, "the ranks' %s differs from one process's by %.3g (> %.2g)",
                 slices ? "parameters" : "update", res[0], tol);
    return DG_OK;
}

/* one rank's step alone at batch 2 against float64 */
static dg_status check_f64(ranks_state *s, double *err, bool *ok) {
    dg_status st = dp_check_f64(s->sp->run->be, &s->m, err, ok);
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
    const ranks_kind *kind = run->kind;
    const dp_model *m = &s->m;
    int n = s->sp->n, global = (int)s->pt->batch, per = global / n;
    bool in = run->mpi->rank < n, ok = false;
    char why[512], tol[32];
    dg_status st = open_group(run, n, im);
    dg_plan_opts po = dp_plan_opts(m);
    if (n == 1) dp_f64_tol(tol, sizeof tol, m);
    else snprintf(tol, sizeof tol, "%.2g", mpi_tol(m, kind->gpu));
    row->check = dp_check_word(s->check, sizeof s->check, m,
                               n == 1 ? dp_f64_base(m) : m->batch_norm ? "mpi=mean-of-slices" : "mpi=one-process", tol);
    if (st == DG_OK) st = bench_synth_batch(m->in, global, 77u + (uint64_t)global, &s->bx, &s->by);
    if (st == DG_OK) st = dp_graph_new(&s->d, m, per, n > 1);
    if (st == DG_OK && in) {
        dg_plan_stats ps;
        const char *verdict = bench_plan_predict(s->d.g, s->d.ts.outputs, s->d.ts.n_outputs, &ps) == DG_OK
                                  ? bench_memory_verdict(&ps, 0, kind->gpu, why, sizeof why)
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
    if (ok && !dp_policy(&s->d, row->precision, kind->gpu, s->note, sizeof s->note)) ok = false;
    if (!ok) {
        row->status = "wrong";
        row->note = s->note;
        return DG_OK;
    }
    row->threads = kind->gpu ? 0 : ctx->threads;
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
    run->kind->note(im, n, row->precision, s->p, s->note + len, sizeof s->note - len);
    len = strlen(s->note);
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

dg_status sweep_scaling_ranks_of(bench_ctx *ctx, const ranks_kind *kind) {
    ranks_run *run = calloc(1, sizeof *run);
    ranks_points *own = calloc(1, sizeof *own);
    if (!run || !own) {
        free(run);
        free(own);
        return dg_fail(DG_ERR_OOM, "scaling: out of host memory");
    }
    run->ctx = ctx;
    run->kind = kind;
    run->lone = (bench_mpi){.rank = 0, .ranks = 1, .local_ranks = 1};
    run->mpi = ctx->mpi && ctx->mpi->on ? ctx->mpi : &run->lone;
    run->n_models = kind->models(run->models);
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
        .name = "scaling", .impls = kind->impls, .n_impls = kind->n_impls, .precisions = BENCH_PREC_ALL,
        .hot = true, .points = ranks_points_of, .arg = arg,
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

/* ---- the CPU ranks ---- */

static dg_mlp_cfg mlp_cfg = {{784, 512, 512, 10}, 4};
static dg_charlm_cfg lm_cfg = {.vocab = 96, .context = 64, .width = 64, .heads = 2, .layers = 2};

static int cpu_models(dp_model *m) {
    m[0] = (dp_model){"mlp", 128, bench_mlp_step(&mlp_cfg), {784, 10, 0, 0}, false};
    m[1] = (dp_model){"charlm", 8, bench_charlm_step(&lm_cfg), {0, 0, lm_cfg.vocab, lm_cfg.context}, false};
    for (int k = 0; k < 2; k++) m[k].spec.optim = dg_optim_default(DG_OPTIM_MOMENTUM, 0.1f);
    return 2;
}

static const bool blocking = false, overlapped = true;
static const bench_impl cpu_impls[] = {{.name = "cpu-mpi", .data = &blocking},
                                       {.name = "cpu-mpi-overlap", .data = &overlapped}};

/* overlap where there is an all-reduce: 2 ranks or more */
static bool cpu_applies(const bench_impl *im, int n) { return n > 1 || !*(const bool *)im->data; }

static dg_status cpu_open(const bench_ctx *ctx, const bench_mpi *m, const bench_impl *im, int n, dg_backend **be) {
    *be = NULL;
    dg_status st = m->rank < n ? dg_cpu_backend_new(be, ctx->threads) : DG_OK;
    if (st == DG_OK && n > 1) st = bench_mpi_join_first(m, *be, n, *(const bool *)im->data);
    return st;
}

static dg_status cpu_alone(const bench_ctx *ctx, const bench_mpi *m, dg_backend **be) {
    (void)m;
    return dg_cpu_backend_new(be, ctx->threads);
}

static void cpu_note(const bench_impl *im, int n, dg_precision prec, const dg_plan *p, char *buf, size_t len) {
    (void)n, (void)p;
    size_t at = 0;
    buf[0] = '\0';
    if (prec == DG_PREC_TF32) /* dp_model_in: the fp32 step */
        at += (size_t)snprintf(buf, len, ", no TF32 on the CPU: the fp32 step");
    if (*(const bool *)im->data && at < len)
        snprintf(buf + at, len - at, ", in buckets of up to %d KiB overlapping the backward",
                 DG_CPU_BUCKET_BYTES_DEFAULT >> 10);
}

static const ranks_kind cpu_ranks = {
    .gpu = false, .impls = cpu_impls, .n_impls = 2, .models = cpu_models, .applies = cpu_applies,
    .open = cpu_open, .alone = cpu_alone, .note = cpu_note,
};

dg_status sweep_scaling_ranks(bench_ctx *ctx) { return sweep_scaling_ranks_of(ctx, &cpu_ranks); }
