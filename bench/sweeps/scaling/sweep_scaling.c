/* sweep_scaling.c: data parallelism over 1, 2, 4 and 8 GPUs of one host
 * (as many as the machine has), NCCL's all-reduce underneath.
 *
 * The communication ceiling (case "allreduce"): the all-reduce (average,
 * fp32) of one message per GPU, 4 KiB to 256 MiB, two ways: NCCL's own
 * call on raw buffers issued from one thread (impl "nccl") and the graph's
 * all_reduce node, one plan per GPU run by dg_dp (impl "node": what a
 * training step pays). GB/s is the bus bandwidth, size x 2(n-1)/n per
 * second, as nccl-tests reports it (the note gives the algorithm
 * bandwidth, size per second). Check: replica r's buffer holds (r + 1)
 * times a pattern; after the call every element is checked against the
 * mean on the host.
 *
 * The models (cases MODEL-weak, MODEL-strong): one training step with SGD
 * and momentum (linear in the gradient, which the check below needs) of
 *   mlp              784-2048-2048-10, 1024 examples per GPU
 *   resnet18-cifar   3x32x32, 10 classes (weight decay 5e-4), 64 per GPU
 *   charlm           the transformer sweep's char-LM, context 256, 16 per GPU
 * on n GPUs: weak scaling keeps the batch per GPU (the global batch grows
 * with n), strong scaling keeps the global batch (the largest count's
 * weak one) and splits it. impl "gpu-dp": each replica's step is a
 * replayed CUDA graph; the time is one dg_dp_run and dg_dp_sync, all
 * replicas queued and waited for; the gradients go in buckets of up to
 * DG_GPU_BUCKET_BYTES_DEFAULT. impl "gpu-dp-unbucketed" (weak rows, n >= 2):
 * the same step with every gradient its own NCCL call. Row: m = GPUs, batch = global batch, n = batch per GPU,
 * k = the model's gradient bytes (what each step all-reduces).
 *
 * Precisions (--dtype): every model point in each one asked (the step
 * builder's policy, scaling_step.h; tf32 the plans' TF32), its
 * efficiency reported against one GPU in the same precision; the
 * all-reduce points (fp32 gradients in every policy: the masters' are
 * float32) in fp32 alone.
 *
 * Check before timing (column check): on one GPU ("f64-step@b2") the same
 * step at batch 2 against its float64 evaluation (core/check/step_check.h),
 * with the precision's tolerances (runner/step_tol.h). On n
 * GPUs ("dp=mean-of-slices"): every replica's slice also runs alone on one
 * GPU, a plain step without all-reduce; each replica's loss must equal its
 * slice's (rel 1e-5), the replicas' parameters after the step must be
 * identical to the bit, and equal the mean of the slices' updated
 * parameters (rel L2 1e-4: the first momentum step is linear in the
 * gradient, so the mean of the updates is the update of the mean
 * gradient). Batch norm's statistics are each replica's own (its slice's),
 * as in the slice's own step. The same bounds hold in bf16 and fp16: the
 * 16-bit roundings are each replica's own, the same as its slice's alone,
 * and the gradients that are averaged are float32 (fp16's are divided by
 * a power of two in the updates, after the all-reduce). In a precision other than fp32 the
 * timed graph must also carry its policy (runner/step_policy.h), and the
 * check column says so: "BASE+P-policy tol T".
 *
 * With one GPU or without NCCL the sweep says why once, in one skipped
 * row. The CPU rows, data parallelism over MPI ranks, follow where the CPU
 * backend is open (sweep_scaling_mpi.c). Under MPI these rows give way to
 * the GPU ranks' (sweep_scaling_mpi_gpu.c: one process per GPU, the same
 * models). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/step_check.h"
#include "core/nn/data_parallel.h"
#include "core/status.h"
#include "machine/energy.h"
#include "machine/gpu_monitor.h"
#include "runner/energy_window.h"
#include "runner/runner.h"
#include "sweeps/scaling/scaling_step.h"
#include "sweeps/scaling/sweep_scaling.h"
#include "train/train_mpi.h"
#include <duograd/testing.h>

const int scaling_counts[SCALING_N_COUNTS] = {1, 2, 4, 8};

#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"

static dg_mlp_cfg    mlp_cfg = {{784, 2048, 2048, 10}, 4};
static dg_resnet_cfg res_cfg;
static dg_charlm_cfg lm_cfg = {.vocab = 96, .context = 256, .width = 256, .heads = 4, .layers = 4};

int scaling_gpu_models(dp_model *m) {
    dg_optim mom = dg_optim_default(DG_OPTIM_MOMENTUM, 0.01f);
    res_cfg = dg_resnet18_default(DG_RESNET_CIFAR);
    m[0] = (dp_model){"mlp", 1024, bench_mlp_step(&mlp_cfg), {784, 10, 0, 0}, false};
    m[0].spec.optim = mom;
    m[1] = (dp_model){"resnet18-cifar", 64, bench_resnet_step(&res_cfg), {3 * 32 * 32, 10, 0, 0}, true};
    m[2] = (dp_model){"charlm", 16, bench_charlm_step(&lm_cfg), {0, 0, lm_cfg.vocab, lm_cfg.context}, false};
    m[2].spec.optim = mom;
    return 3;
}

/* the "dp=mean-of-slices" check of a dp step that has run once from fresh
 * parameters on the inputs x, y (n slices of per) */
static dg_status check_dp(dg_backend *alone, dg_dp *dp, const dp_graph *d, const dp_model *m, const void *x,
                          const int32_t *y, int per, double *err, bool *ok) {
    int n = dg_dp_replicas(dp);
    dp_graph s;
    dg_plan *p = NULL;
    dg_plan_opts po = dp_plan_opts(m);
    double num = 0, den = 0, loss_err = 0;
    bool identical = true;
    dg_status st = dp_graph_new(&s, m, per, false);
    double **mean = calloc((size_t)d->model.n_params, sizeof *mean);
    float *buf = NULL, *buf0 = NULL;
    if (st == DG_OK && !mean) st = dg_fail(DG_ERR_OOM, "scaling: out of memory for the check");
    for (int i = 0; i < d->model.n_params && st == DG_OK; i++)
        if (!(mean[i] = calloc((size_t)dg_node_numel(d->model.params[i]), sizeof **mean)))
            st = dg_fail(DG_ERR_OOM, "scaling: out of memory for the check");
    size_t most = 0;
    for (int i = 0; i < d->model.n_params; i++)
        if (dg_node_bytes(d->model.params[i]) > most) most = dg_node_bytes(d->model.params[i]);
    if (st == DG_OK && (!(buf = malloc(most)) || !(buf0 = malloc(most))))
        st = dg_fail(DG_ERR_OOM, "scaling: out of memory for the check");
    for (int r = 0; r < n && st == DG_OK; r++) {
        float l_alone, l_dp;
        st = dg_plan_new(&p, s.g, alone, s.ts.outputs, s.ts.n_outputs, &po);
        if (st == DG_OK) st = dp_set_slice(p, &s, m, x, y, r * per, per);
        if (st == DG_OK) st = dg_plan_run(p);
        if (st == DG_OK) st = dg_plan_get(p, s.ts.loss, &l_alone, sizeof l_alone);
        if (st == DG_OK) st = dg_plan_get(dg_dp_plan(dp, r), d->ts.loss, &l_dp, sizeof l_dp);
        if (st == DG_OK) loss_err = fmax(loss_err, fabs((double)l_dp - l_alone) / fmax(fabs(l_alone), 1e-30));
        for (int i = 0; i < d->model.n_params && st == DG_OK; i++) {
            int64_t cnt = dg_node_numel(d->model.params[i]);
            st = dg_plan_get(p, s.model.params[i], buf, (size_t)cnt * sizeof *buf);
            for (int64_t j = 0; j < cnt && st == DG_OK; j++) mean[i][j] += buf[j] / (double)n;
        }
        dg_plan_free(p);
        p = NULL;
    }
    for (int i = 0; i < d->model.n_params && st == DG_OK; i++) {
        int64_t cnt = dg_node_numel(d->model.params[i]);
        size_t bytes = (size_t)cnt * sizeof *buf;
        st = dg_plan_get(dg_dp_plan(dp, 0), d->model.params[i], buf0, bytes);
        for (int r = 1; r < n && st == DG_OK; r++) {
            st = dg_plan_get(dg_dp_plan(dp, r), d->model.params[i], buf, bytes);
            identical = identical && memcmp(buf, buf0, bytes) == 0;
        }
        for (int64_t j = 0; j < cnt && st == DG_OK; j++) {
            double e = buf0[j] - mean[i][j];
            num += isnan(e) ? INFINITY : e * e;
            den += mean[i][j] * mean[i][j];
        }
    }
    double upd = sqrt(num / fmax(den, 1e-300));
    *err = fmax(loss_err, upd);
    *ok = st == DG_OK && identical && loss_err <= 1e-5 && upd <= 1e-4;
    for (int i = 0; mean && i < d->model.n_params; i++) free(mean[i]);
    free(mean);
    free(buf);
    free(buf0);
    dp_graph_free(&s);
    return st;
}

/* one step of every replica, waited for (the host clock times it) */
static dg_status run_dp(void *dp) {
    dg_status st = dg_dp_run(dp);
    return st == DG_OK ? dg_dp_sync(dp) : st;
}

/* the all-reduce ceiling: NCCL on raw buffers, and the graph's node */
typedef struct raw_arg { dg_backend **bes; int n; float **buf; size_t count; } raw_arg;
static dg_status run_raw(void *p) {
    raw_arg *a = p;
    return dg_gpu_all_reduce_raw(a->bes, a->n, a->buf, a->count);
}

/* replica r's buffer: (r + 1) (i % 251) / 16 */
static float pattern(int r, size_t i) { return (float)(r + 1) * (float)(i % 251) / 16.0f; }

/* element i holds the mean over n replicas: (n + 1) / 2 times the pattern */
static bool averaged_at(const float *h, size_t i, int n) {
    double want = (double)(n + 1) / 2 * (double)(i % 251) / 16.0;
    return fabs(h[i] - want) <= 1e-6 * (1 + fabs(want));
}

/* every 997th element and the last */
static bool averaged(const float *h, size_t count, int n) {
    for (size_t i = 0; i < count; i += 997)
        if (!averaged_at(h, i, n)) return false;
    return averaged_at(h, count - 1, n);
}

/* ---- the runner's view (runner/runner.h). Points, for each GPU count n
 * the machine has: the all-reduce at every message size (n >= 2), each
 * model weak and strong, then (n >= 2) each model weak again with every
 * gradient its own all-reduce. The GPUs of a point are one group, opened
 * when its first row comes and kept while the next points use the same
 * count and bucketing (a backend joins one group for life); a group that
 * cannot be opened skips its rows with the reason. ---- */

enum { ALLREDUCE, MODEL };
static const int kind_allreduce = ALLREDUCE, kind_model = MODEL;
/* gpu-dp first: it names the one row of a machine without 2 GPUs */
static const bench_impl scaling_impls[] = {
    {.name = "gpu-dp", .gpu = true, .data = &kind_model},
    {.name = "gpu-dp-unbucketed", .gpu = true, .data = &kind_model},
    {.name = "nccl", .gpu = true, .data = &kind_allreduce},
    {.name = "node", .gpu = true, .data = &kind_allreduce},
};

/* the sweep's state over all its points: the models and the open group */
typedef struct scaling_run {
    dp_model    models[3];
    int         n_models;
    int         n, bucket;         /* the open group: GPUs, all_reduce_bucket_bytes (-1: none) */
    dg_backend *bes[DG_DP_MAX_REPLICAS];
    dg_status   open_st;
    char        why[768];          /* why the group could not be opened     */
    /* the group's energy: the sum of its GPUs' NVML counters, or why none */
    bool               no_energy;  /* --no-energy                            */
    bench_gpu_monitor *mon[DG_DP_MAX_REPLICAS];
    bench_energy_meter *energy;
    char               energy_why[64];
} scaling_run;

/* a point: what it measures, on which group */
typedef struct scaling_point {
    scaling_run *run;
    int          kind;             /* ALLREDUCE or MODEL                    */
    int          n, bucket;        /* its group                             */
    int          model;            /* MODEL: the index in run->models        */
    char         name[64];         /* MODEL: MODEL-weak or MODEL-strong     */
} scaling_point;

static void close_group(scaling_run *run) {
    bench_energy_close(run->energy);
    run->energy = NULL;
    for (int r = 0; r < run->n; r++) {
        bench_gpu_monitor_close(run->mon[r]);
        dg_backend_free(run->bes[r]);
        run->mon[r] = NULL;
        run->bes[r] = NULL;
    }
    run->n = 0;
}

/* the meter summing the open group's GPUs (every row of the group is the
 * work of all of them), or why there is none */
static void open_group_energy(scaling_run *run) {
    char why[768];
    int have = 0;
    for (int r = 0; r < run->n; r++) have += (run->mon[r] = bench_gpu_monitor_for(run->bes[r])) != NULL;
    if (have < run->n) snprintf(why, sizeof why, "NVML not available for every GPU of the group");
    else run->energy = bench_energy_open_nvml(run->mon, run->n, why, sizeof why);
    if (!run->energy) snprintf(run->energy_why, sizeof run->energy_why, "%.*s", (int)strcspn(why, ":"), why);
}

/* GPU backends on devices 0..n-1 with all_reduce_bucket_bytes = bucket,
 * grouped when n >= 2, unless that group is open already */
static dg_status open_group(scaling_run *run, int n, int bucket) {
    if (run->n == n && run->bucket == bucket) return run->open_st;
    close_group(run);
    run->n = n;
    run->bucket = bucket;
    dg_status st = DG_OK;
    for (int r = 0; r < n && st == DG_OK; r++)
        st = dg_gpu_backend_new(&run->bes[r], &(dg_gpu_opts){.device = r, .all_reduce_bucket_bytes = bucket});
    if (st == DG_OK && n > 1) st = dg_backend_group(run->bes, n);
    if (st != DG_OK) snprintf(run->why, sizeof run->why, "%d GPUs: %s", n, dg_last_error());
    if (st == DG_OK && !run->no_energy) open_group_energy(run);
    return run->open_st = st;
}

static const char *scaling_unavailable(bench_ctx *ctx, char *why, size_t n) {
    (void)ctx;
    int devices = dg_gpu_device_count();
    if (devices >= 2) return NULL;
    snprintf(why, n, "%d CUDA device%s: data parallelism needs 2 or more", devices, devices == 1 ? "" : "s");
    return why;
}

static const long long default_bytes[] = {4096, 65536, 1 << 20, 16 << 20, 256 << 20};
static const long long quick_bytes[] = {65536, 16 << 20};

/* the points' own descriptions live as long as the sweep: one array of
 * them, as many as the points (at most counts x (sizes + 3 models x 3)) */
typedef struct scaling_points { scaling_point p[SCALING_N_COUNTS * (BENCH_MAX_SIZES + 9)]; int n; } scaling_points;

static void add_point(bench_points *out, scaling_points *own, scaling_point sp, bench_point pt) {
    scaling_point *p = &own->p[own->n++];
    *p = sp;
    if (sp.kind == MODEL) pt.name = p->name;
    pt.data = p;
    bench_points_add(out, pt);
}

typedef struct scaling_arg { scaling_run *run; scaling_points *own; } scaling_arg;

static void scaling_points_of(bench_ctx *ctx, const void *varg, bench_points *out) {
    const scaling_arg *arg = varg;
    scaling_run *run = arg->run;
    int devices = dg_gpu_device_count(), max_n = 1;
    for (int c = 0; c < SCALING_N_COUNTS; c++)
        if (scaling_counts[c] <= devices) max_n = scaling_counts[c];
    const long long *sizes;
    int n_sizes = bench_sizes(ctx, ctx->quick ? quick_bytes : default_bytes, ctx->quick ? 2 : 5, &sizes);
    for (int c = 0; c < SCALING_N_COUNTS && scaling_counts[c] <= devices; c++) {
        int n = scaling_counts[c];
        for (int i = 0; i < n_sizes && n > 1; i++)
            add_point(out, arg->own, (scaling_point){run, ALLREDUCE, n, 0, 0, ""},
                      (bench_point){.name = "allreduce", .m = n, .n = sizes[i],
                                    .bytes = 2.0 * (n - 1) / n * (double)sizes[i]});
        for (int bucketed = 1; bucketed >= 0; bucketed--)
            for (int k = 0; k < run->n_models && (bucketed || n > 1); k++)
                for (int strong = 0; strong < 1 + bucketed; strong++) {
                    const dp_model *m = &run->models[k];
                    int global = m->per_gpu * (strong ? max_n : n);
                    scaling_point sp = {run, MODEL, n, bucketed ? 0 : -1, k, ""};
                    snprintf(sp.name, sizeof sp.name, "%s-%s", m->name, strong ? "strong" : "weak");
                    add_point(out, arg->own, sp, (bench_point){.m = n, .n = global / n, .batch = global});
                }
    }
}

/* all-reduce points by nccl and node, in fp32; model points by gpu-dp on
 * the bucketed group, gpu-dp-unbucketed on the other */
static bool scaling_applies(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im) {
    (void)ctx;
    const scaling_point *sp = pt->data;
    if (sp->kind != *(const int *)im->data) return false;
    if (sp->kind == ALLREDUCE) return pt->precision == DG_PREC_FP32;
    return (sp->bucket == 0) == !strcmp(im->name, "gpu-dp");
}

/* the point's group, opened here: a group that cannot be opened skips its rows */
static const char *scaling_skip(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, char *why,
                                size_t n) {
    (void)ctx; (void)im;
    const scaling_point *sp = pt->data;
    if (open_group(sp->run, sp->n, sp->bucket) == DG_OK) return NULL;
    snprintf(why, n, "%s", sp->run->why);
    return why;
}

/* one point's measurement: an all-reduce's buffers, or a model step on
 * every replica, with the note and check word the row gets */
typedef struct scaling_state {
    const scaling_point *sp;
    const bench_point   *pt;
    dp_model             m;        /* MODEL: the model in the point's precision */
    /* ALLREDUCE: host pattern, one raw device buffer per GPU, the node's plans */
    float  *host, *dev[DG_DP_MAX_REPLICAS];
    raw_arg raw;
    /* both: the graph and its replicas */
    dp_graph d;
    dg_dp   *dp;
    dg_node *x, *y;
    void    *bx;                   /* MODEL: the global batch's inputs and labels */
    int32_t *by;
    char     note[256], check[48];
} scaling_state;

static void scaling_teardown(void *arg) {
    scaling_state *s = arg;
    for (int r = 0; r < s->sp->n; r++) dg_backend_release(s->sp->run->bes[r], s->dev[r]);
    free(s->host);
    free(s);
}

/* an all-reduce point: replica r's raw buffer holds (r + 1) times the pattern */
static dg_status scaling_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    (void)ctx;
    const scaling_point *sp = pt->data;
    scaling_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "scaling: out of host memory");
    s->sp = sp;
    s->pt = pt;
    *out = s;
    if (sp->kind != ALLREDUCE) {
        s->m = dp_model_in(&sp->run->models[sp->model], pt->precision, true);
        return DG_OK;
    }
    size_t bytes = (size_t)pt->n, count = bytes / sizeof(float);
    dg_backend **bes = sp->run->bes;
    s->raw = (raw_arg){bes, sp->n, s->dev, count};
    dg_status st = (s->host = malloc(bytes)) ? DG_OK : dg_fail(DG_ERR_OOM, "scaling: out of host memory");
    for (int r = 0; r < sp->n && st == DG_OK; r++) {
        for (size_t i = 0; i < count; i++) s->host[i] = pattern(r, i);
        st = dg_backend_alloc(bes[r], bytes, (void **)&s->dev[r]);
        if (st == DG_OK) st = dg_backend_upload(bes[r], s->dev[r], s->host, bytes);
    }
    if (st != DG_OK) {
        scaling_teardown(s);
        *out = NULL;
    }
    return st;
}

/* x -> all_reduce(x), one plan per GPU, each replica's x its pattern */
static dg_status node_new(scaling_state *s, size_t count) {
    dg_backend **bes = s->sp->run->bes;
    size_t bytes = count * sizeof(float);
    s->d.g = dg_graph_new();
    s->x = s->d.g ? dg_input(s->d.g, "x", DG_SHAPE((int64_t)count)) : NULL;
    s->y = s->x ? dg_all_reduce(s->d.g, s->x) : NULL;
    dg_status st = s->y ? dg_dp_new(&s->dp, bes, s->sp->n, s->d.g, &s->y, 1, NULL)
                        : dg_fail(DG_ERR_OOM, "scaling: out of memory");
    for (int r = 0; r < s->sp->n && st == DG_OK; r++) {
        for (size_t i = 0; i < count; i++) s->host[i] = pattern(r, i);
        st = dg_plan_set(dg_dp_plan(s->dp, r), s->x, s->host, bytes);
    }
    return st;
}

/* a row's energy: its group's GPUs together */
static void group_energy(const scaling_run *run, bench_work *work) {
    work->energy = run->energy;
    work->energy_none = run->energy ? NULL : run->energy_why;
}

/* checked once, from the patterns, before it is timed: every replica's
 * result is the mean of the n buffers */
static dg_status allreduce_prepare(scaling_state *s, const bench_impl *im, bench_row *row, bench_work *work) {
    int n = s->sp->n;
    size_t bytes = (size_t)s->pt->n, count = bytes / sizeof(float);
    bool node = !strcmp(im->name, "node");
    row->check = "host-mean";
    dg_status st = node ? node_new(s, count) : DG_OK;
    if (st == DG_OK) st = node ? run_dp(s->dp) : run_raw(&s->raw);
    bool ok = true;
    for (int r = 0; r < n && st == DG_OK && ok; r++) {
        st = node ? dg_plan_get(dg_dp_plan(s->dp, r), s->y, s->host, bytes)
                  : dg_backend_download(s->sp->run->bes[r], s->host, s->dev[r], bytes);
        ok = st == DG_OK && averaged(s->host, count, n);
    }
    if (st != DG_OK) return st;
    row->max_rel_err = ok ? 0 : INFINITY;
    if (!ok) {
        row->status = "wrong";
        snprintf(s->note, sizeof s->note, "a replica's result is not the mean of the %d buffers", n);
        row->note = s->note;
    }
    *work = node ? (bench_work){.fn = run_dp, .arg = s->dp} : (bench_work){.fn = run_raw, .arg = &s->raw};
    group_energy(s->sp->run, work);
    return DG_OK;
}

/* the step on every replica from fresh parameters, checked before it is
 * timed: on one GPU the same step at batch 2 against float64, on n the
 * mean of the slices */
static dg_status model_prepare(scaling_state *s, const bench_impl *im, bench_row *row, bench_work *work) {
    const scaling_point *sp = s->sp;
    const dp_model *m = &s->m;
    dg_backend **bes = sp->run->bes;
    int n = sp->n, global = (int)s->pt->batch, per = global / n;
    bool ok = false;
    char tol[32];
    row->check = n == 1 ? dp_check_word(s->check, sizeof s->check, m, dp_f64_base(m), dp_f64_tol(tol, sizeof tol, m))
                        : dp_check_word(s->check, sizeof s->check, m, "dp=mean-of-slices", "1e-5/1e-4");
    dg_plan_opts po = dp_plan_opts(m);
    dg_status st = bench_synth_batch(m->in, global, 77u + (uint64_t)global, &s->bx, &s->by);
    if (st == DG_OK) st = dp_graph_new(&s->d, m, per, n > 1);
    if (st == DG_OK) st = dg_dp_new(&s->dp, bes, n, s->d.g, s->d.ts.outputs, s->d.ts.n_outputs, &po);
    for (int r = 0; r < n && st == DG_OK; r++)
        st = dp_set_slice(dg_dp_plan(s->dp, r), &s->d, m, s->bx, s->by, r * per, per);
    if (st == DG_OK) st = dg_dp_run(s->dp);
    if (st == DG_OK && n > 1) st = check_dp(bes[0], s->dp, &s->d, m, s->bx, s->by, per, &row->max_rel_err, &ok);
    if (st == DG_OK && n == 1) st = dp_check_f64(bes[0], m, &row->max_rel_err, &ok);
    if (st != DG_OK) return st;
    if (!ok) {
        row->status = "wrong";
        snprintf(s->note, sizeof s->note, "the step differs from its reference (%s): %.3g", row->check,
                 row->max_rel_err);
        row->note = s->note;
        return DG_OK;
    }
    if (!dp_policy(&s->d, row->precision, true, s->note, sizeof s->note)) { /* the timed graph is not the row's */
        row->status = "wrong";
        row->note = s->note;
        return DG_OK;
    }
    row->arena_bytes = (int64_t)dg_plan_stats_get(dg_dp_plan(s->dp, 0)).arena_bytes;
    row->k = (int64_t)dp_grad_bytes(&s->d.model);
    row->flops = 0;
    for (int i = 0; i < dg_graph_size(s->d.g); i++) row->flops += dg_node_cost(dg_graph_node(s->d.g, i)).flops;
    row->flops *= n; /* every replica's */
    if (n == 1)
        snprintf(s->note, sizeof s->note, "%d gradients, %.1f MB per step", s->d.model.n_params, row->k / 1e6);
    else if (!strcmp(im->name, "gpu-dp"))
        snprintf(s->note, sizeof s->note, "%d all-reduced gradients, %.1f MB per step, in buckets of up to %lld KiB",
                 s->d.model.n_params, row->k / 1e6, DG_GPU_BUCKET_BYTES_DEFAULT >> 10);
    else
        snprintf(s->note, sizeof s->note, "%d all-reduced gradients, %.1f MB per step, each its own all-reduce",
                 s->d.model.n_params, row->k / 1e6);
    row->note = s->note;
    *work = (bench_work){.fn = run_dp, .arg = s->dp};
    group_energy(sp->run, work);
    return DG_OK;
}

/* the host clock times every replica's work, all queued and waited for */
/* every row, measured or not: the work is the GPUs', timed without the
 * CPU backend's threads, and its warm-up is the check's run */
static void scaling_columns(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im, bench_row *row) {
    (void)ctx; (void)pt; (void)im;
    row->threads = 0;
    row->warmup = 0;
}

static dg_status scaling_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    (void)ctx;
    scaling_state *s = arg;
    return s->sp->kind == ALLREDUCE ? allreduce_prepare(s, im, row, work) : model_prepare(s, im, row, work);
}

/* checked in prepare; an all-reduce row's note gives its algorithm
 * bandwidth (size per second), beside the bus bandwidth of its GB/s */
static bool scaling_check(void *arg, const bench_impl *im, bench_row *row) {
    (void)im;
    scaling_state *s = arg;
    if (s->sp->kind == ALLREDUCE && row->st.median_ms > 0) {
        snprintf(s->note, sizeof s->note, "algorithm bandwidth %.2f GB/s", (double)s->pt->n / (row->st.median_ms * 1e6));
        row->note = s->note;
    }
    return true;
}

static void scaling_release(void *arg, const bench_impl *im, bench_work *work) {
    (void)im; (void)work;
    scaling_state *s = arg;
    dg_dp_free(s->dp);
    s->dp = NULL;
    dp_graph_free(&s->d);
    s->d = (dp_graph){0};
    free(s->bx);
    free(s->by);
    s->bx = NULL;
    s->by = NULL;
}

/* the GPU rows: one process driving every GPU of the host */
static dg_status sweep_scaling_gpus(bench_ctx *ctx) {
    scaling_run *run = calloc(1, sizeof *run);
    scaling_points *own = calloc(1, sizeof *own);
    if (!run || !own) {
        free(run);
        free(own);
        return dg_fail(DG_ERR_OOM, "scaling: out of host memory");
    }
    run->n_models = scaling_gpu_models(run->models);
    run->no_energy = ctx->no_energy;
    scaling_arg arg = {run, own};
    const bench_sweep_spec spec = {
        .name = "scaling", .impls = scaling_impls, .n_impls = 4, .precisions = BENCH_PREC_ALL,
        .unavailable = scaling_unavailable,
        .hot = true, .points = scaling_points_of, .arg = &arg, .applies = scaling_applies, .skip = scaling_skip,
        .columns = scaling_columns,
        .setup = scaling_setup, .teardown = scaling_teardown, .prepare = scaling_prepare, .check = scaling_check,
        .release = scaling_release,
    };
    dg_status st = bench_run_spec(ctx, &spec);
    close_group(run);
    free(run);
    free(own);
    return st;
}
#endif

/* the GPU rows where a GPU is open (under MPI the GPU ranks',
 * sweep_scaling_mpi_gpu.c), then the CPU ranks' where the CPU is */
dg_status sweep_scaling(bench_ctx *ctx) {
    dg_status st = DG_OK;
#ifdef DG_HAVE_CUDA
    if (ctx->gpu) st = ctx->mpi && ctx->mpi->on ? sweep_scaling_gpu_ranks(ctx) : sweep_scaling_gpus(ctx);
#endif
    if (st == DG_OK && ctx->cpu) st = sweep_scaling_ranks(ctx);
    return st;
}
