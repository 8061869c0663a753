/* sweep_resnet.c: one ResNet-18 training step (forward in training mode,
 * softmax cross-entropy, backward, SGD with momentum 0.9, weight decay 5e-4
 * and lr 0.1, and the batch norms' running statistics) as one plan
 * (dg_train_step), over batch sizes, for both stems:
 *   resnet18-cifar     3x32x32 images, 10 classes, batches 8, 32, 128, 256
 *   resnet18-imagenet  3x224x224 images, 1000 classes, batches 8, 32, 64
 * impl cpu, gpu (node by node) and gpu-graph (the step captured once as a
 * CUDA graph and replayed). The images are seeded synthetic data, uniform
 * in [0, 1), with labels uniform over the classes, of the real shapes:
 * CIFAR-10 itself is not installed, and a step's time depends on the
 * shapes, not on the pixels. Inputs are uploaded once (transfer = 0).
 *
 * Check (column check, "f64-step@b2"): before any timing, the same step
 * at batch 2 (images of the full size) runs once on the same backend and
 * implementation, and its loss, every parameter's update and every running
 * statistic's update are compared with the float64 evaluation of that
 * graph (bench/check/check.h, each tensor on its own, tolerances there). The
 * float64 reference of a full batch would take hours; at batch 2 it takes
 * about 10 s (CIFAR) and 25 s (ImageNet) on a 2-core Xeon, once per stem.
 * Not batch 1: the gradient reaching the last stage is then, per channel,
 * one constant (the global average pool's) masked by the ReLU, so batch
 * norm's backward cancels down to the mask's share and float32 rounding
 * grows to 1e-2..3e-2 in the deepest tensors (an ImageNet image, measured
 * on a 16-core Xeon's OpenBLAS), against 2e-3 at batch 2. A row's
 * max_rel_err is its implementation's check; a failed check makes its
 * rows "wrong", untimed. The full-batch plan then runs its first step once
 * before timing and its loss must be finite: the only check of the batch
 * actually timed (batch norm in training mode makes the loss depend on the
 * whole batch, so no cheaper reference exists); a fault that leaves NaN or
 * infinity (an unwritten chunk, an overflow) makes the row "wrong".
 *
 * Row: case = the stem's name, m = batch = the batch, n = the image side,
 * k = the classes; flops = 3x the forward's FLOPs, counted as 2 per
 * multiply-add of every conv2d and matmul node of the forward (the
 * backward costs about twice the forward; batch norm, pooling and
 * elementwise work are left out), so gflops is the step's rate;
 * arena_bytes and live_bytes from the plan (dg_plan_stats). The report's
 * images/s is batch / median time. CPU rows respect --cpu-cap: a batch
 * whose run is predicted to take longer (from the time of the check step,
 * then of the last batch timed, scaled by FLOPs: the small batch's lower
 * rate errs long) is a skipped row, decided before anything is allocated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "core/nn/resnet.h"
#include "core/rng.h"
#include "core/status_internal.h"
#include "runner/sweep.h"

typedef struct resnet_case {
    const char    *name;         /* the case column                          */
    const char    *stem_name;    /* charts: resnet_STEM                      */
    dg_resnet_stem stem;
    int            check_batch;  /* the reduced batch of the float64 check   */
    const char    *check;        /* the check column (< 24 characters)       */
    long long      batches[4];   /* the default batches; --quick: n_quick    */
    int            n_batches, n_quick;
} resnet_case;

static const resnet_case cases[] = {
    {"resnet18-cifar", "cifar", DG_RESNET_CIFAR, 2, "f64-step@b2", {8, 32, 128, 256}, 4, 2},
    {"resnet18-imagenet", "imagenet", DG_RESNET_IMAGENET, 2, "f64-step@b2", {8, 32, 64}, 3, 1},
};
#define N_CASES (int)(sizeof cases / sizeof *cases)

typedef struct resnet_impl { const char *name; bool gpu, replay; } resnet_impl;
static const resnet_impl impls[] = {{"cpu", false, true}, {"gpu", true, false}, {"gpu-graph", true, true}};
#define N_IMPLS (int)(sizeof impls / sizeof *impls)

/* x [batch, c, h, w] uniform in [0, 1), y [batch] uniform over the classes */
static dg_status synth_batch(const dg_resnet_cfg *cfg, int batch, uint64_t seed, float **x, int32_t **y) {
    size_t n = (size_t)batch * cfg->channels * cfg->height * cfg->width;
    *x = malloc(n * sizeof **x);
    *y = malloc((size_t)batch * sizeof **y);
    if (!*x || !*y) return dg__fail(DG_ERR_OOM, "resnet: out of host memory for a batch of %d images", batch);
    dg_rng r = dg_rng_new(seed);
    for (size_t i = 0; i < n; i++) (*x)[i] = (float)dg_rng_uniform(&r);
    for (int i = 0; i < batch; i++) (*y)[i] = (int32_t)(dg_rng_u64(&r) % (uint64_t)cfg->classes);
    return DG_OK;
}

/* 2 FLOPs per multiply-add of the forward's convolutions and matmuls: the
 * nodes made before the loss (the gradient's matmuls come after it) */
static double forward_flops(const bench_step *s) {
    double f = 0;
    for (int id = 0; id < s->ts.loss->id; id++) {
        const dg_node *n = dg_graph_node(s->g, id);
        if (n->op == DG_OP_CONV2D || n->op == DG_OP_MATMUL) f += dg_node_cost(n).flops;
    }
    return f;
}

/* One implementation's check on a case, shared by its rows. */
typedef struct impl_check {
    dg_status st;
    double    err;
    bool      ok;
    double    step_flops_per_image;
    double    last_ms, last_flops;   /* the CPU's time predictor: the last run timed */
} impl_check;

static dg_status run_plan(void *arg) { return dg_plan_run(arg); }

static void check_impl(const resnet_case *c, const dg_resnet_cfg *cfg, const resnet_impl *im, dg_backend *be,
                       bench_step_ref *ref, impl_check *out) {
    bench_step_spec spec = bench_resnet_step(cfg);
    float *x = NULL;
    int32_t *y = NULL;
    bench_step s = {0};
    *out = (impl_check){.err = NAN};
    dg_status st = synth_batch(cfg, c->check_batch, 1000u + (uint64_t)c->stem, &x, &y);
    dg_plan_opts opts = {.no_replay = !im->replay};
    if (st == DG_OK) st = bench_step_build(&s, be, &spec, c->check_batch, x, y, &opts);
    bool fresh = !ref->done;
    double t0 = bench_now_s();
    if (st == DG_OK) st = bench_step_check(&s, &spec, x, y, ref, &out->err, &out->ok);
    if (st == DG_OK && fresh)
        fprintf(stderr, "bench: resnet %s: float64 reference of the batch-%d step and its %s check: %.1f s\n", c->name,
                c->check_batch, im->name, bench_now_s() - t0);
    if (st == DG_OK) out->step_flops_per_image = 3 * forward_flops(&s) / c->check_batch;
    if (st == DG_OK && out->ok && !im->gpu) { /* the CPU's first prediction: one more run, warm */
        t0 = bench_now_s();
        st = dg_plan_run(s.p);
        out->last_ms = 1e3 * (bench_now_s() - t0);
        out->last_flops = out->step_flops_per_image * c->check_batch;
    }
    out->st = st;
    bench_step_free(&s);
    free(x);
    free(y);
}

/* Why a CPU batch is not timed (a skipped row), or NULL */
static const char *cpu_skip_reason(const bench_ctx *ctx, const impl_check *chk, double flops, char *why, size_t n) {
    double predicted_s = chk->last_ms > 0 ? chk->last_ms * flops / chk->last_flops / 1e3 : 0;
    if (predicted_s <= ctx->cpu_cap_s) return NULL;
    snprintf(why, n, "predicted %.1f s per run > cap %.1f s (--cpu-cap)", predicted_s, ctx->cpu_cap_s);
    return why;
}

static void run_batch(bench_ctx *ctx, const resnet_case *c, const dg_resnet_cfg *cfg, const resnet_impl *im,
                      dg_backend *be, impl_check *chk, int batch) {
    bench_row row = {.sweep = "resnet", .name = c->name, .impl = im->name, .backend = im->gpu ? "gpu" : "cpu",
                     .m = batch, .n = cfg->height, .k = cfg->classes, .batch = batch, .threads = ctx->threads,
                     .warmup = ctx->timing.warmup, .flops = chk->step_flops_per_image * batch,
                     .max_rel_err = chk->err, .check = c->check};
    char why[160];
    float *x = NULL;
    int32_t *y = NULL;
    bench_step s = {0};
    dg_status st = chk->st;
    if (st == DG_OK && !chk->ok) {
        row.status = "wrong";
        row.note = "the reduced-batch step differs from its float64 reference";
    } else if (st == DG_OK && !im->gpu && (row.note = cpu_skip_reason(ctx, chk, row.flops, why, sizeof why))) {
        row.status = "skipped";
    } else if (st == DG_OK) {
        bench_step_spec spec = bench_resnet_step(cfg);
        st = synth_batch(cfg, batch, (uint64_t)batch, &x, &y);
        dg_plan_opts opts = {.no_replay = !im->replay};
        if (st == DG_OK) st = bench_step_build(&s, be, &spec, batch, x, y, &opts);
        float loss = NAN;
        if (st == DG_OK) st = dg_plan_run(s.p);
        if (st == DG_OK) st = dg_plan_get(s.p, s.ts.loss, &loss, sizeof loss);
        if (st == DG_OK && !isfinite(loss)) {
            row.status = "wrong";
            snprintf(why, sizeof why, "first full-batch loss %g, not finite", (double)loss);
            row.note = why;
        } else if (st == DG_OK) {
            dg_plan_stats ps = dg_plan_stats_get(s.p);
            row.arena_bytes = (int64_t)ps.arena_bytes;
            row.live_bytes = (int64_t)ps.live_bytes;
            st = bench_time(be, im->gpu, run_plan, s.p, &ctx->timing, &row.st);
        }
        if (st == DG_OK && !row.status) {
            row.status = "ok";
            chk->last_ms = row.st.median_ms;
            chk->last_flops = row.flops;
        }
    }
    if (st != DG_OK) {
        row.status = bench_status_word(st);
        row.note = dg_last_error();
    }
    bench_emit(ctx, &row);
    bench_step_free(&s);
    free(x);
    free(y);
}

dg_status sweep_resnet(bench_ctx *ctx) {
    dg_backend *backends[N_IMPLS];
    int n_rows = 0;
    for (int i = 0; i < N_IMPLS; i++) backends[i] = impls[i].gpu ? ctx->gpu : ctx->cpu;
    const long long *sizes[N_CASES];
    int n_sizes[N_CASES];
    for (int ci = 0; ci < N_CASES; ci++) {
        const resnet_case *c = &cases[ci];
        n_sizes[ci] = bench_sizes(ctx, c->batches, ctx->quick ? c->n_quick : c->n_batches, &sizes[ci]);
        for (int i = 0; i < N_IMPLS; i++)
            if (backends[i] && bench_wanted(ctx, c->name, impls[i].name)) n_rows += n_sizes[ci];
    }
    bench_plan_rows(ctx, n_rows);
    for (int ci = 0; ci < N_CASES && !bench_interrupted; ci++) {
        const resnet_case *c = &cases[ci];
        dg_resnet_cfg cfg = dg_resnet18_default(c->stem);
        bench_step_ref ref = {0}; /* same graph, same data for every implementation: one reference */
        for (int i = 0; i < N_IMPLS && !bench_interrupted; i++) {
            if (!backends[i] || !bench_wanted(ctx, c->name, impls[i].name)) continue;
            impl_check chk;
            check_impl(c, &cfg, &impls[i], backends[i], &ref, &chk);
            for (int b = 0; b < n_sizes[ci] && !bench_interrupted; b++)
                run_batch(ctx, c, &cfg, &impls[i], backends[i], &chk, (int)sizes[ci][b]);
        }
        bench_step_ref_free(&ref);
    }
    return DG_OK;
}

/* ---- report ---- */

/* a step-time series as images per second: batch / time (the slowest run
 * gives the low end of the error bar) */
static bench_series images_per_s(bench_series s) {
    for (int i = 0; i < s.n; i++) {
        double ms = s.y[i], lo_ms = s.lo[i], hi_ms = s.hi[i];
        s.y[i] = 1e3 * s.x[i] / ms;
        s.lo[i] = 1e3 * s.x[i] / hi_ms;
        s.hi[i] = 1e3 * s.x[i] / lo_ms;
    }
    return s;
}

/* the implementations of case `name` in t, in file order (the sweep's own
 * and any a peer script wrote, such as torch-eager); at most `max` */
static int impls_of(const bench_table *t, const char *name, const char **out, int max) {
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        if (strcmp(t->r[i].name, name)) continue;
        bool seen = false;
        for (int j = 0; j < n && !seen; j++) seen = !strcmp(out[j], t->r[i].impl);
        if (!seen && n < max) out[n++] = t->r[i].impl;
    }
    return n;
}

/* one table row: step ms and images/s per implementation (or the row's
 * status), then the plan's arena, its peak of live bytes and their ratio */
static void table_row(FILE *f, const bench_table *t, const char *name, const char *const *im, int n_im,
                      long long batch) {
    long long arena = 0, live = 0;
    fprintf(f, "| %lld |", batch);
    for (int j = 0; j < n_im; j++) {
        const csv_rec *r = bench_table_row(t, name, im[j], batch);
        double rate = r ? 1e3 * (double)batch / r->median_ms : NAN;
        if (r && bench_row_measured(r)) fprintf(f, " %.1f ms, %.*f/s |", r->median_ms, rate < 100 ? 1 : 0, rate);
        else fprintf(f, " %s |", r ? r->status : "-");
        if (r && r->arena_bytes > 0 && !arena) {
            arena = r->arena_bytes;
            live = r->live_bytes;
        }
    }
    char b1[32], b2[32], b3[32];
    fprintf(f, " %s | %s | %s |\n", bench_fmt_num(arena ? (double)arena / 1e6 : NAN, "%.1f", b1, sizeof b1),
            bench_fmt_num(live ? (double)live / 1e6 : NAN, "%.1f", b2, sizeof b2),
            bench_fmt_num(arena && live ? (double)arena / (double)live : NAN, "%.3f", b3, sizeof b3));
}

/* Per stem: a chart of images/s over the batch for every implementation
 * found (the crossover of graph replay over the CPU marked), the
 * crossovers, and a table of step time, images/s and memory per batch. */
bool bench_report_resnet(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    FILE *f = rep->sum;
    fprintf(f, "## ResNet-18 training step (SGD, momentum 0.9, weight decay 5e-4), images/s\n\n"
               "| stem | GPU (graph replay) vs CPU | GPU (no graph) vs CPU |\n|---|---|---|\n");
    for (int ci = 0; ci < N_CASES; ci++) {
        const resnet_case *c = &cases[ci];
        const char *im[12];
        int n_im = impls_of(t, c->name, im, 12);
        if (!n_im) continue;
        char file[32], title[96], c0[96], c1[96];
        snprintf(file, sizeof file, "resnet_%s", c->stem_name);
        snprintf(title, sizeof title, "ResNet-18 training step, %s stem: images/s", c->stem_name);
        bench_chart ch = {file, title, "batch", "images/s", true, .vline = NAN};
        for (int j = 0; j < n_im; j++)
            bench_chart_add(&ch, images_per_s(bench_pick(t, c->name, im[j], NULL, false, BENCH_MS, im[j])));
        bench_series cpu = bench_pick(t, c->name, "cpu", NULL, false, BENCH_MS, "cpu");
        bench_series gpu = bench_pick(t, c->name, "gpu", NULL, false, BENCH_MS, "gpu");
        bench_series graph = bench_pick(t, c->name, "gpu-graph", NULL, false, BENCH_MS, "gpu-graph");
        bench_series s0 = bench_speedup(&cpu, &graph, ""), s1 = bench_speedup(&cpu, &gpu, "");
        ch.vline = bench_crossover(&s0);
        bench_crossover_str(&s0, c0, sizeof c0);
        bench_crossover_str(&s1, c1, sizeof c1);
        fprintf(f, "| %s | %s | %s |\n", c->stem_name, c0, c1);
        bench_chart_draw(rep, &ch);
    }
    fprintf(f, "\n");
    for (int ci = 0; ci < N_CASES; ci++) {
        const resnet_case *c = &cases[ci];
        const char *im[12];
        long long batches[BENCH_MAX_PTS];
        int n_im = impls_of(t, c->name, im, 12), n_b = bench_table_ms(t, c->name, batches, 0, BENCH_MAX_PTS);
        if (!n_im) continue;
        fprintf(f, "### %s: step time and images/s per implementation, plan memory (MB)\n\n| batch |", c->name);
        for (int j = 0; j < n_im; j++) fprintf(f, " %s |", im[j]);
        fprintf(f, " arena | peak live | arena / live |\n|---|");
        for (int j = 0; j < n_im + 3; j++) fprintf(f, "---|");
        fprintf(f, "\n");
        for (int b = 0; b < n_b; b++) table_row(f, t, c->name, im, n_im, batches[b]);
        fprintf(f, "\n");
    }
    return true;
}
