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
 * Check before timing (column check): on one GPU ("f64-step@b2") the same
 * step at batch 2 against its float64 evaluation (bench/check/check.h). On n
 * GPUs ("dp=mean-of-slices"): every replica's slice also runs alone on one
 * GPU, a plain step without all-reduce; each replica's loss must equal its
 * slice's (rel 1e-5), the replicas' parameters after the step must be
 * identical to the bit, and equal the mean of the slices' updated
 * parameters (rel L2 1e-4: the first momentum step is linear in the
 * gradient, so the mean of the updates is the update of the mean
 * gradient). Batch norm's statistics are each replica's own (its slice's),
 * as in the slice's own step.
 *
 * Without CUDA, with one GPU or without NCCL the sweep says why once, in
 * one skipped row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "core/nn/data_parallel.h"
#include "core/status_internal.h"
#include "runner/sweep.h"
#include "sweeps/scaling/sweep_scaling.h"
#include <duograd/testing.h>

const int scaling_counts[SCALING_N_COUNTS] = {1, 2, 4, 8};

#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"

/* a model of the sweep: its step (spec) and the shapes of its inputs */
typedef struct dp_model {
    const char     *name;
    int             per_gpu;       /* examples per GPU of the weak rows */
    bench_step_spec spec;
    bench_batch_shape in;          /* its inputs per example            */
} dp_model;

static dg_mlp_cfg    mlp_cfg = {{784, 2048, 2048, 10}, 4};
static dg_resnet_cfg res_cfg;
static dg_charlm_cfg lm_cfg = {.vocab = 96, .context = 256, .width = 256, .heads = 4, .layers = 4};

static int models_new(dp_model *m) {
    dg_optim mom = dg_optim_default(DG_OPTIM_MOMENTUM, 0.01f);
    res_cfg = dg_resnet18_default(DG_RESNET_CIFAR);
    m[0] = (dp_model){"mlp", 1024, bench_mlp_step(&mlp_cfg), {784, 10, 0, 0}};
    m[0].spec.optim = mom;
    m[1] = (dp_model){"resnet18-cifar", 64, bench_resnet_step(&res_cfg), {3 * 32 * 32, 10, 0, 0}};
    m[2] = (dp_model){"charlm", 16, bench_charlm_step(&lm_cfg), {0, 0, lm_cfg.vocab, lm_cfg.context}};
    m[2].spec.optim = mom;
    return 3;
}

/* a step graph for `batch` examples per replica, all-reduced or not */
typedef struct dp_graph { dg_graph *g; dg_model model; dg_train_step ts; } dp_graph;

static dg_status graph_new(dp_graph *d, const dp_model *m, int batch, bool all_reduce) {
    *d = (dp_graph){.g = dg_graph_new()};
    dg_status st = d->g ? m->spec.model(d->g, m->spec.cfg, 1, &d->model) : dg__fail(DG_ERR_OOM, "scaling: out of memory");
    if (st == DG_OK) st = dg_train_step_build_ex(d->g, &d->model, batch, &m->spec.optim, all_reduce, &d->ts);
    return st;
}

static void graph_free(dp_graph *d) { dg_graph_free(d->g); }

/* bytes of one example's input and labels */
static size_t x_bytes(const dp_model *m) {
    return 4 * (m->in.lm_vocab ? (size_t)m->in.lm_context : m->in.example_floats);
}
static size_t y_bytes(const dp_model *m) { return m->in.lm_vocab ? 4 * (size_t)m->in.lm_context : 4; }

static dg_status set_slice(dg_plan *p, const dp_graph *d, const dp_model *m, const void *x, const int32_t *y, int first,
                           int count) {
    dg_status st = dg_plan_set(p, d->ts.x, (const char *)x + (size_t)first * x_bytes(m), (size_t)count * x_bytes(m));
    if (st == DG_OK)
        st = dg_plan_set(p, d->ts.y, (const char *)y + (size_t)first * y_bytes(m), (size_t)count * y_bytes(m));
    return st;
}

static size_t grad_bytes(const dg_model *m) {
    size_t b = 0;
    for (int i = 0; i < m->n_params; i++) b += dg_node_bytes(m->params[i]);
    return b;
}

/* the "dp=mean-of-slices" check of a dp step that has run once from fresh
 * parameters on the inputs x, y (n slices of per) */
static dg_status check_dp(dg_backend *alone, dg_dp *dp, const dp_graph *d, const dp_model *m, const void *x,
                          const int32_t *y, int per, double *err, bool *ok) {
    int n = dg_dp_replicas(dp);
    dp_graph s;
    dg_plan *p = NULL;
    double num = 0, den = 0, loss_err = 0;
    bool identical = true;
    dg_status st = graph_new(&s, m, per, false);
    double **mean = calloc((size_t)d->model.n_params, sizeof *mean);
    float *buf = NULL, *buf0 = NULL;
    if (st == DG_OK && !mean) st = dg__fail(DG_ERR_OOM, "scaling: out of memory for the check");
    for (int i = 0; i < d->model.n_params && st == DG_OK; i++)
        if (!(mean[i] = calloc((size_t)dg_node_numel(d->model.params[i]), sizeof **mean)))
            st = dg__fail(DG_ERR_OOM, "scaling: out of memory for the check");
    size_t most = 0;
    for (int i = 0; i < d->model.n_params; i++)
        if (dg_node_bytes(d->model.params[i]) > most) most = dg_node_bytes(d->model.params[i]);
    if (st == DG_OK && (!(buf = malloc(most)) || !(buf0 = malloc(most))))
        st = dg__fail(DG_ERR_OOM, "scaling: out of memory for the check");
    for (int r = 0; r < n && st == DG_OK; r++) {
        float l_alone, l_dp;
        st = dg_plan_new(&p, s.g, alone, s.ts.outputs, s.ts.n_outputs, NULL);
        if (st == DG_OK) st = set_slice(p, &s, m, x, y, r * per, per);
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
    graph_free(&s);
    return st;
}

/* one step of every replica, waited for (the host clock times it) */
static dg_status run_dp(void *dp) {
    dg_status st = dg_dp_run(dp);
    return st == DG_OK ? dg_dp_sync(dp) : st;
}

/* writes the row; a failure's status and message (why: the row's note
 * buffer, n bytes) replace what it had */
static void emit_row(bench_ctx *ctx, bench_row *row, dg_status st, char *why, size_t n) {
    if (st != DG_OK) {
        row->status = bench_status_word(st);
        snprintf(why, n, "%s", dg_last_error());
    }
    if (why[0]) row->note = why;
    bench_emit(ctx, row);
}

/* The scaling rows stay hot under --cold: their work spans several GPUs,
 * whose L2s bench_time cannot flush, and emptying the host's caches would
 * time nothing the GPUs do (the rows' cold column says 0). */
static bench_timing hot_timing(const bench_ctx *ctx) {
    bench_timing t = ctx->timing;
    t.cold = false;
    return t;
}

/* one model row: n GPUs (bes), `global` examples split evenly; impl
 * names how the backends bucket the all-reduces */
static void model_row(bench_ctx *ctx, dg_backend **bes, int n, const dp_model *m, const char *kind, int global,
                      const char *impl) {
    char name[64], why[512] = "", note[256];
    snprintf(name, sizeof name, "%s-%s", m->name, kind);
    if (!bench_wanted(ctx, name, impl)) return;
    int per = global / n;
    bench_row row = {.sweep = "scaling", .name = name, .impl = impl, .backend = "gpu", .m = n, .n = per,
                     .batch = global, .st = BENCH_NO_STATS, .max_rel_err = NAN,
                     .check = n == 1 ? "f64-step@b2" : "dp=mean-of-slices", .status = "ok"};
    dp_graph d = {0};
    dg_dp *dp = NULL;
    void *x = NULL;
    int32_t *y = NULL;
    bool ok = false;
    dg_status st = bench_synth_batch(m->in, global, 77u + (uint64_t)global, &x, &y);
    if (st == DG_OK) st = graph_new(&d, m, per, n > 1);
    if (st == DG_OK) st = dg_dp_new(&dp, bes, n, d.g, d.ts.outputs, d.ts.n_outputs, NULL);
    for (int r = 0; r < n && st == DG_OK; r++) st = set_slice(dg_dp_plan(dp, r), &d, m, x, y, r * per, per);
    if (st == DG_OK) st = dg_dp_run(dp);
    if (st == DG_OK && n > 1) st = check_dp(bes[0], dp, &d, m, x, y, per, &row.max_rel_err, &ok);
    if (st == DG_OK && n == 1) { /* the same step at batch 2 against float64 */
        bench_step c = {0};
        bench_step_ref ref = {0};
        void *cx = NULL;
        int32_t *cy = NULL;
        dg_charlm_cfg small = lm_cfg;
        bench_step_spec spec = m->spec;
        bench_batch_shape in = m->in;
        if (in.lm_vocab) { /* float64 attention over 256 positions takes long: the check's context is 64 */
            in.lm_context = small.context = 64;
            spec.cfg = &small;
        }
        st = bench_synth_batch(in, 2, 5, &cx, &cy);
        if (st == DG_OK) st = bench_step_new(&c, bes[0], &spec, 2, cx, cy, NULL, &ref, &row.max_rel_err, &ok);
        if (in.lm_vocab) row.check = "f64-step@b2t64";
        bench_step_free(&c);
        bench_step_ref_free(&ref);
        free(cx);
        free(cy);
    }
    if (st == DG_OK && !ok) {
        row.status = "wrong";
        snprintf(why, sizeof why, "the step differs from its reference (%s): %.3g", row.check, row.max_rel_err);
    }
    if (st == DG_OK && ok) {
        row.arena_bytes = (int64_t)dg_plan_stats_get(dg_dp_plan(dp, 0)).arena_bytes;
        row.k = (int64_t)grad_bytes(&d.model);
        for (int i = 0; i < dg_graph_size(d.g); i++) row.flops += dg_node_cost(dg_graph_node(d.g, i)).flops;
        row.flops *= n; /* every replica's */
        bench_timing hot = hot_timing(ctx);
        st = bench_time(NULL, false, run_dp, dp, &hot, &row.st);
        if (n == 1)
            snprintf(note, sizeof note, "%d gradients, %.1f MB per step", d.model.n_params, row.k / 1e6);
        else if (!strcmp(impl, "gpu-dp"))
            snprintf(note, sizeof note, "%d all-reduced gradients, %.1f MB per step, in buckets of up to %lld KiB",
                     d.model.n_params, row.k / 1e6, DG_GPU_BUCKET_BYTES_DEFAULT >> 10);
        else
            snprintf(note, sizeof note, "%d all-reduced gradients, %.1f MB per step, each its own all-reduce",
                     d.model.n_params, row.k / 1e6);
        row.note = note;
    }
    emit_row(ctx, &row, st, why, sizeof why);
    dg_dp_free(dp);
    graph_free(&d);
    free(x);
    free(y);
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

static void allreduce_rows(bench_ctx *ctx, dg_backend **bes, int n, size_t bytes) {
    size_t count = bytes / sizeof(float);
    float *host = malloc(bytes), *dev[DG_DP_MAX_REPLICAS] = {0};
    dp_graph g = {0};
    dg_dp *dp = NULL;
    dg_status st = host ? DG_OK : dg__fail(DG_ERR_OOM, "scaling: out of host memory");
    /* raw: one device buffer per GPU */
    for (int r = 0; r < n && st == DG_OK; r++) {
        for (size_t i = 0; i < count; i++) host[i] = pattern(r, i);
        st = dg_backend_alloc(bes[r], bytes, (void **)&dev[r]);
        if (st == DG_OK) st = dg_backend_upload(bes[r], dev[r], host, bytes);
    }
    for (int impl = 0; impl < 2; impl++) {
        const char *iname = impl ? "node" : "nccl";
        if (!bench_wanted(ctx, "allreduce", iname)) continue;
        char why[512] = "", note[128];
        bench_row row = {.sweep = "scaling", .name = "allreduce", .impl = iname, .backend = "gpu", .m = n,
                         .n = (int64_t)bytes, .st = BENCH_NO_STATS, .max_rel_err = NAN, .check = "host-mean",
                         .status = "ok", .bytes = 2.0 * (n - 1) / n * (double)bytes};
        raw_arg a = {bes, n, dev, count};
        bool ok = true;
        dg_node *x = NULL, *y = NULL;
        if (st == DG_OK && impl == 1) { /* x -> all_reduce(x), one plan per GPU */
            g.g = dg_graph_new();
            x = g.g ? dg_input(g.g, "x", DG_SHAPE((int64_t)count)) : NULL;
            y = x ? dg_all_reduce(g.g, x) : NULL;
            st = y ? dg_dp_new(&dp, bes, n, g.g, &y, 1, NULL) : dg__fail(DG_ERR_OOM, "scaling: out of memory");
            for (int r = 0; r < n && st == DG_OK; r++) {
                for (size_t i = 0; i < count; i++) host[i] = pattern(r, i);
                st = dg_plan_set(dg_dp_plan(dp, r), x, host, bytes);
            }
        }
        /* the check: once, from the patterns */
        if (st == DG_OK) st = impl ? run_dp(dp) : run_raw(&a);
        for (int r = 0; r < n && st == DG_OK && ok; r++) {
            st = impl ? dg_plan_get(dg_dp_plan(dp, r), y, host, bytes) : dg_backend_download(bes[r], host, dev[r], bytes);
            ok = st == DG_OK && averaged(host, count, n);
        }
        row.max_rel_err = ok ? 0 : INFINITY;
        if (st == DG_OK && !ok) {
            row.status = "wrong";
            snprintf(why, sizeof why, "a replica's result is not the mean of the %d buffers", n);
        }
        if (st == DG_OK && ok) {
            bench_timing hot = hot_timing(ctx);
            st = bench_time(NULL, false, impl ? run_dp : run_raw, impl ? (void *)dp : (void *)&a, &hot, &row.st);
            if (st == DG_OK && row.st.median_ms > 0) {
                snprintf(note, sizeof note, "algorithm bandwidth %.2f GB/s", bytes / (row.st.median_ms * 1e6));
                row.note = note;
            }
        }
        emit_row(ctx, &row, st, why, sizeof why);
        dg_dp_free(dp);
        dp = NULL;
        dg_graph_free(g.g);
        g.g = NULL;
        st = DG_OK; /* the next implementation gets its own chance */
    }
    for (int r = 0; r < n; r++) dg_backend_release(bes[r], dev[r]);
    free(host);
}

static void skipped_row(bench_ctx *ctx, const char *why) {
    fprintf(stderr, "bench: scaling: %s\n", why);
    bench_row row = {.sweep = "scaling", .name = "scaling", .impl = "gpu-dp", .backend = "gpu", .st = BENCH_NO_STATS,
                     .max_rel_err = NAN, .status = "skipped", .note = why};
    bench_emit(ctx, &row);
}

/* GPU backends on devices 0..n-1 with all_reduce_bucket_bytes = bucket,
 * grouped when n >= 2; a failure is one skipped row (bes then holds what
 * was opened, for the caller to free) */
static dg_status open_group(bench_ctx *ctx, dg_backend **bes, int n, long long bucket) {
    dg_status st = DG_OK;
    for (int r = 0; r < n; r++) bes[r] = NULL;
    for (int r = 0; r < n && st == DG_OK; r++)
        st = dg_gpu_backend_new(&bes[r], &(dg_gpu_opts){.device = r, .all_reduce_bucket_bytes = bucket});
    if (st == DG_OK && n > 1) st = dg_backend_group(bes, n);
    if (st != DG_OK) {
        char why[768];
        snprintf(why, sizeof why, "%d GPUs: %s", n, dg_last_error());
        skipped_row(ctx, why);
    }
    return st;
}

static void close_group(dg_backend **bes, int n) {
    for (int r = 0; r < n; r++) {
        dg_backend_free(bes[r]);
        bes[r] = NULL;
    }
}

static const long long default_bytes[] = {4096, 65536, 1 << 20, 16 << 20, 256 << 20};
static const long long quick_bytes[] = {65536, 16 << 20};

dg_status sweep_scaling(bench_ctx *ctx) {
    int devices = dg_gpu_device_count();
    if (devices < 2) {
        char why[256];
        snprintf(why, sizeof why, "%d CUDA device%s: data parallelism needs 2 or more", devices,
                 devices == 1 ? "" : "s");
        skipped_row(ctx, why);
        return DG_OK;
    }
    dp_model models[3];
    int n_models = models_new(models), max_n = 1;
    for (int c = 0; c < SCALING_N_COUNTS; c++)
        if (scaling_counts[c] <= devices) max_n = scaling_counts[c];
    const long long *sizes;
    int n_sizes = bench_sizes(ctx, ctx->quick ? quick_bytes : default_bytes, ctx->quick ? 2 : 5, &sizes);
    for (int c = 0; c < SCALING_N_COUNTS && !bench_interrupted; c++) {
        int n = scaling_counts[c];
        if (n > devices) break;
        /* fresh backends per count: a backend joins one group for life */
        dg_backend *bes[DG_DP_MAX_REPLICAS] = {0};
        if (open_group(ctx, bes, n, 0) == DG_OK) {
            for (int i = 0; i < n_sizes && n > 1 && !bench_interrupted; i++)
                allreduce_rows(ctx, bes, n, (size_t)sizes[i]);
            for (int k = 0; k < n_models && !bench_interrupted; k++) {
                model_row(ctx, bes, n, &models[k], "weak", models[k].per_gpu * n, "gpu-dp");
                model_row(ctx, bes, n, &models[k], "strong", models[k].per_gpu * max_n, "gpu-dp");
            }
        }
        close_group(bes, n);
        /* the weak steps again with every gradient its own all-reduce: what
         * the buckets buy */
        if (n > 1 && !bench_interrupted && open_group(ctx, bes, n, -1) == DG_OK)
            for (int k = 0; k < n_models && !bench_interrupted; k++)
                model_row(ctx, bes, n, &models[k], "weak", models[k].per_gpu * n, "gpu-dp-unbucketed");
        close_group(bes, n);
    }
    return DG_OK;
}
#else
dg_status sweep_scaling(bench_ctx *ctx) {
    fprintf(stderr, "bench: scaling: this build has no CUDA backend\n");
    bench_row row = {.sweep = "scaling", .name = "scaling", .impl = "gpu-dp", .backend = "gpu", .st = BENCH_NO_STATS,
                     .max_rel_err = NAN, .status = "skipped", .note = "this build has no CUDA backend"};
    bench_emit(ctx, &row);
    return DG_OK;
}
#endif
