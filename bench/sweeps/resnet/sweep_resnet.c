/* sweep_resnet.c: one ResNet-18 training step (forward in training mode,
 * softmax cross-entropy, backward, SGD with momentum 0.9, weight decay 5e-4
 * and lr 0.1, and the batch norms' running statistics) as one plan
 * (dg_train_step), over batch sizes, for both stems:
 *   resnet18-cifar     3x32x32 images, 10 classes, batches 8, 32, 128, 256
 *   resnet18-imagenet  3x224x224 images, 1000 classes, batches 8, 32, 64
 * impl cpu, gpu (node by node) and gpu-graph (the step captured once as a
 * CUDA graph and replayed), each with the backend's default convolutions
 * and GEMMs; beside them the implementation sets (plan options):
 * IMPL-own, the backend's own kernels (convolutions: the CPU's measured
 * choice of its strategies, the GPU's implicit GEMM; GEMMs: DG_GEMM_OWN),
 * and IMPL-vendor, the vendor libraries' (DG_CONV_VENDOR: oneDNN, cuDNN;
 * DG_GEMM_VENDOR: OpenBLAS, cuBLAS), as cpu-own, cpu-vendor,
 * gpu-graph-own and gpu-graph-vendor; and cpu-conv-own, the CPU's default
 * set with the own convolutions in place of its default's choice per
 * layer (DG_CPU_CONV_AUTO: oneDNN's or the own). The own rows' plans ask
 * for DG_CONV_OWN (the CPU's own rule per node, the GPU's implicit GEMM),
 * so no row touches the backend's settings. On the CPU the sets run only when
 * asked for (--impl, or --sweep all): the default sweep on a 2-core
 * machine would take three times as long. A set the backend does not
 * offer (no oneDNN in the build, no cuDNN found) has its rows skipped with
 * the backend's reason, said once on stderr.
 *
 * Precisions (--dtype): the step under the precision's policy
 * (dg_train_step_build_opts' .precision through bench_step_build), tf32 on
 * the GPU only; checked with the precision's tolerances
 * (runner/step_tol.h, the mlp sweep's) against the float64 reference of
 * the same graph, which rounds where the graph casts.
 *
 * The images are seeded synthetic data, uniform
 * in [0, 1), with labels uniform over the classes, of the real shapes:
 * CIFAR-10 itself is not installed, and a step's time depends on the
 * shapes, not on the pixels. Inputs are uploaded once (transfer = 0).
 *
 * Check (column check, "f64-step@b2"): at an implementation's first row
 * of a stem, before anything of it is timed, the same step at batch 2
 * (images of the full size) runs once on the same backend and
 * implementation, and its loss, every parameter's update and every running
 * statistic's update are compared with the float64 evaluation of that
 * graph (core/check/step_check.h, each tensor on its own, tolerances there). The
 * float64 reference of a full batch would take hours; at batch 2 it takes
 * about 10 s (CIFAR) and 25 s (ImageNet) on a 2-core Xeon, once per stem.
 * Not batch 1: the gradient reaching the last stage is then, per channel,
 * one constant (the global average pool's) masked by the ReLU, so batch
 * norm's backward cancels down to the mask's share and float32 rounding
 * grows to 1e-2..3e-2 in the deepest tensors (an ImageNet image, measured
 * on a 16-core Xeon's OpenBLAS), against 2e-3 at batch 2. A row's
 * max_rel_err is its implementation's check (a skipped row's is NaN:
 * nothing of its batch ran); a failed check makes its rows "wrong",
 * untimed. The full-batch plan then runs its first step once
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
 * images/s is batch / median time. CPU rows respect --cpu-cap (the
 * runner's prediction): a batch whose run is predicted to take longer
 * (from the time of the check step, then of the case's last batch timed,
 * scaled by FLOPs: the small batch's lower rate errs long) is a skipped
 * row, decided before anything is allocated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/step_check.h"
#include "core/nn/resnet.h"
#include "core/rng.h"
#include "core/status.h"
#include "runner/runner.h"
#include "runner/step_rows.h"
#include "runner/step_tol.h"

/* the reduced batch of the float64 check, and the check column */
#define CHECK_BATCH 2
#define CHECK_WORD  "f64-step@b2"

typedef struct resnet_case {
    const char    *name;         /* the case column                          */
    const char    *stem_name;    /* charts: resnet_STEM                      */
    dg_resnet_stem stem;
    long long      batches[4];   /* the default batches; --quick: n_quick    */
    int            n_batches, n_quick;
} resnet_case;

static const resnet_case cases[] = {
    {"resnet18-cifar", "cifar", DG_RESNET_CIFAR, {8, 32, 128, 256}, 4, 2},
    {"resnet18-imagenet", "imagenet", DG_RESNET_IMAGENET, {8, 32, 64}, 3, 1},
};
#define N_CASES (int)(sizeof cases / sizeof *cases)

/* the kernels a row's plan asks for: the backend's defaults, its own, the vendors' */
typedef enum resnet_set { SET_DEFAULT, SET_OWN, SET_VENDOR, SET_CONV_OWN } resnet_set;

typedef struct resnet_impl { const char *name; bool gpu, replay; resnet_set set; } resnet_impl;
static const resnet_impl impls[] = {
    {"cpu", false, true, SET_DEFAULT},          {"cpu-own", false, true, SET_OWN},
    {"cpu-vendor", false, true, SET_VENDOR},    {"gpu", true, false, SET_DEFAULT},
    {"gpu-graph", true, true, SET_DEFAULT},     {"gpu-graph-own", true, true, SET_OWN},
    {"gpu-graph-vendor", true, true, SET_VENDOR}, {"cpu-conv-own", false, true, SET_CONV_OWN},
};
#define N_IMPLS (int)(sizeof impls / sizeof *impls)

/* the plan options of a row of im: replay, and the set's kernels */
static dg_plan_opts impl_opts(const resnet_impl *im) {
    dg_plan_opts o = {.no_replay = !im->replay};
    if (im->set == SET_OWN) {
        o.conv = DG_CONV_OWN;
        o.gemm = DG_GEMM_OWN;
    } else if (im->set == SET_CONV_OWN) {
        o.conv = DG_CONV_OWN;
    } else if (im->set == SET_VENDOR) {
        o.conv = DG_CONV_VENDOR;
        o.gemm = DG_GEMM_VENDOR;
    }
    return o;
}

/* x [batch, c, h, w] uniform in [0, 1), y [batch] uniform over the classes */
static dg_status synth_batch(const dg_resnet_cfg *cfg, int batch, uint64_t seed, float **x, int32_t **y) {
    size_t n = (size_t)batch * cfg->channels * cfg->height * cfg->width;
    *x = malloc(n * sizeof **x);
    *y = malloc((size_t)batch * sizeof **y);
    if (!*x || !*y) return dg_fail(DG_ERR_OOM, "resnet: out of host memory for a batch of %d images", batch);
    dg_rng r = dg_rng_new(seed);
    for (size_t i = 0; i < n; i++) (*x)[i] = (float)dg_rng_uniform(&r);
    for (int i = 0; i < batch; i++) (*y)[i] = (int32_t)(dg_rng_u64(&r) % (uint64_t)cfg->classes);
    return DG_OK;
}

/* The step's FLOPs per image: 3x the forward's, 2 per multiply-add of the
 * forward's convolutions and matmuls (the nodes made before the loss; the
 * gradient's matmuls come after it), counted on the step's graph at the
 * check's batch (no plan, no backend); 0 where it cannot be built. */
static double step_flops_per_image(const dg_resnet_cfg *cfg) {
    bench_step_spec spec = bench_resnet_step(cfg);
    dg_graph *g = dg_graph_new();
    dg_model model;
    dg_train_step ts;
    double f = 0;
    if (g && spec.model(g, spec.cfg, 1, &model) == DG_OK &&
        dg_train_step_build(g, &model, CHECK_BATCH, &spec.optim, &ts) == DG_OK)
        for (int id = 0; id < ts.loss->id; id++) {
            const dg_node *n = dg_graph_node(g, id);
            if (n->op == DG_OP_CONV2D || n->op == DG_OP_MATMUL) f += dg_node_cost(n).flops;
        }
    dg_graph_free(g);
    return 3 * f / CHECK_BATCH;
}

/* One case during the sweep: the float64 reference of its check step in
 * each precision (same graph, same data for every implementation: one)
 * and each implementation's check in each. */
typedef struct case_run {
    const resnet_case *c;
    dg_resnet_cfg      cfg;
    double             flops_per_image;
    bench_step_ref     ref[DG_PREC_COUNT];
    bench_step_rows_check chk[N_IMPLS][DG_PREC_COUNT]; /* each implementation's, made at its first row */
} case_run;

/* a refusal said on stderr once per implementation */
typedef struct resnet_said { bool said[N_IMPLS]; } resnet_said;

/* ---- the runner's view (runner/runner.h): a point is a case at a batch
 * size; an implementation one of impls[] on one case (applies at that
 * case's points only), so that each case's CPU rows are predicted from its
 * own check step and rows ---- */

typedef struct case_impl {
    case_run          *run;
    const resnet_impl *im;
    bench_step_rows_check *chk;      /* [DG_PREC_COUNT] */
    bool              *said;         /* its refusal said on stderr */
} case_impl;

static const case_impl *case_impl_of(const bench_impl *im) { return im->data; }

/* every case at every batch size; arg: the case_run of each case */
static void resnet_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    const case_run *runs = arg;
    for (int ci = 0; ci < N_CASES; ci++) {
        const case_run *run = &runs[ci];
        const long long *sizes;
        int n = bench_sizes(ctx, run->c->batches, ctx->quick ? run->c->n_quick : run->c->n_batches, &sizes);
        for (int b = 0; b < n; b++)
            bench_points_add(out, (bench_point){.name = run->c->name, .m = sizes[b], .n = run->cfg.height,
                                                .k = run->cfg.classes, .batch = sizes[b],
                                                .flops = run->flops_per_image * (double)sizes[b], .data = run});
    }
}

/* an implementation runs at its case's points; the GPU's in tf32 too; the
 * CPU's own and vendor sets only when asked for (--impl, --sweep all) */
static bool resnet_applies(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im) {
    const case_impl *ci = case_impl_of(im);
    if (ci->run != pt->data || (!im->gpu && pt->precision == DG_PREC_TF32)) return false;
    return im->gpu || ci->im->set == SET_DEFAULT || ctx->impl_filter || ctx->extended;
}

/* A set the backend does not offer: its reason (once on stderr). */
static const char *resnet_skip(const bench_ctx *ctx, const bench_point *pt, const bench_impl *bim, char *why,
                               size_t n) {
    (void)pt;
    const case_impl *ci = case_impl_of(bim);
    dg_plan_opts o = impl_opts(ci->im);
    if (dg_backend_step_impl(bim->gpu ? ctx->gpu : ctx->cpu, NULL, dg_step_flags(&o), NULL, 0) == DG_OK) return NULL;
    snprintf(why, n, "%s", dg_last_error());
    if (!*ci->said) fprintf(stderr, "bench: resnet: %s rows skipped: %s\n", bim->name, why);
    *ci->said = true;
    return why;
}

/* the step spec of a case in precision p, with p's tolerances */
static bench_step_spec spec_in(const case_run *run, dg_precision p) {
    bench_step_spec spec = bench_resnet_step(&run->cfg);
    spec.precision = p;
    spec.tol = bench_step_tol_bn_in(p, spec.tol);
    return spec;
}

/* the implementation's check, run at its first call: the step at
 * CHECK_BATCH on the implementation's backend against the float64
 * reference (computed at the case's first check) */
static const bench_step_rows_check *checked(bench_ctx *ctx, const case_impl *ci, dg_precision p) {
    bench_step_rows_check *out = &ci->chk[p];
    if (out->done) return out;
    const resnet_case *c = ci->run->c;
    const resnet_impl *im = ci->im;
    bench_step_spec spec = spec_in(ci->run, p);
    bench_step_ref *ref = &ci->run->ref[p];
    float *x = NULL;
    int32_t *y = NULL;
    dg_status st = synth_batch(&ci->run->cfg, CHECK_BATCH, 1000u + (uint64_t)c->stem, &x, &y);
    dg_plan_opts opts = impl_opts(im);
    if (st == DG_OK) {
        bool fresh = !ref->done;
        double t0 = bench_now_s();
        bench_step_rows_check_run(out, im->gpu ? ctx->gpu : ctx->cpu, im->gpu, &spec, CHECK_BATCH, x, y, &opts, ref);
        if (fresh && out->st == DG_OK)
            fprintf(stderr, "bench: resnet %s: float64 reference of the batch-%d step in %s and its %s check: %.1f s\n",
                    c->name, CHECK_BATCH, dg_precision_name(p), im->name, bench_now_s() - t0);
    } else {
        *out = (bench_step_rows_check){.done = true, .st = st, .err = NAN};
        snprintf(out->why, sizeof out->why, "%s", dg_last_error());
    }
    free(x);
    free(y);
    return out;
}

/* the CPU's first rate: the warm run of its checked step (the small
 * batch's lower rate errs long); none where the check failed */
static void resnet_probe(bench_ctx *ctx, const bench_impl *im, const bench_point *pt, double *ms, double *work) {
    const bench_step_rows_check *chk = checked(ctx, case_impl_of(im), pt->precision);
    if (chk->st != DG_OK || !chk->ok) return;
    *ms = chk->warm_ms;
    *work = case_impl_of(im)->run->flops_per_image * CHECK_BATCH;
}

/* one case at one batch: its images, the same for every implementation,
 * and the implementation under way's step */
typedef struct resnet_state {
    float     *x;        /* [batch, c, h, w] */
    int32_t   *y;        /* [batch]          */
    bench_step s;
    char       why[256]; /* a row's note     */
} resnet_state;

static void resnet_teardown(void *arg) {
    resnet_state *s = arg;
    free(s->x);
    free(s->y);
    free(s);
}

static dg_status resnet_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    (void)ctx;
    const case_run *run = pt->data;
    resnet_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "resnet: out of host memory");
    dg_status st = synth_batch(&run->cfg, (int)pt->batch, (uint64_t)pt->batch, &s->x, &s->y);
    if (st != DG_OK) {
        resnet_teardown(s);
        return st;
    }
    *out = s;
    return DG_OK;
}

/* the implementation's check (a failed one makes its rows "wrong",
 * untimed), then the full-batch plan's first step, whose loss must be
 * finite, then the plan's memory; the step is timed */
static dg_status resnet_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    resnet_state *s = arg;
    const case_impl *ci = case_impl_of(im);
    bench_step_spec spec = spec_in(ci->run, row->precision);
    dg_plan_opts opts = impl_opts(ci->im);
    const bench_step_rows_check *chk = checked(ctx, ci, row->precision);
    return bench_step_rows_prepare(chk, "the reduced-batch step differs from its float64 reference", &s->s,
                                   im->gpu ? ctx->gpu : ctx->cpu, im->gpu, &spec, s->x, s->y, &opts, row, s->why,
                                   sizeof s->why, work);
}

static void resnet_release(void *arg, const bench_impl *im, bench_work *work) {
    (void)im; (void)work;
    bench_step_free(&((resnet_state *)arg)->s);
}

dg_status sweep_resnet(bench_ctx *ctx) {
    case_run runs[N_CASES] = {0};
    resnet_said said = {{false}};
    case_impl data[N_CASES * N_IMPLS];
    bench_impl runner_impls[N_CASES * N_IMPLS];
    for (int ci = 0; ci < N_CASES; ci++) {
        case_run *run = &runs[ci];
        run->c = &cases[ci];
        run->cfg = dg_resnet18_default(cases[ci].stem);
        run->flops_per_image = step_flops_per_image(&run->cfg);
        for (int i = 0; i < N_IMPLS; i++) {
            int k = ci * N_IMPLS + i;
            data[k] = (case_impl){run, &impls[i], run->chk[i], &said.said[i]};
            runner_impls[k] = (bench_impl){.name = impls[i].name, .gpu = impls[i].gpu, .data = &data[k]};
        }
    }
    bench_sweep_spec spec = {
        .name = "resnet", .check_word = CHECK_WORD, .impls = runner_impls, .n_impls = N_CASES * N_IMPLS,
        .precisions = BENCH_PREC_ALL, .points = resnet_points, .arg = runs, .applies = resnet_applies,
        .skip = resnet_skip, .probe = resnet_probe,
        .setup = resnet_setup, .teardown = resnet_teardown, .prepare = resnet_prepare, .release = resnet_release,
    };
    dg_status st = bench_run_spec(ctx, &spec);
    for (int ci = 0; ci < N_CASES; ci++)
        for (int p = 0; p < DG_PREC_COUNT; p++) bench_step_ref_free(&runs[ci].ref[p]);
    return st;
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

/* the implementations of case `name` in t with rows in precision p, in
 * file order (the sweep's own and any a peer script wrote, such as
 * torch-eager); at most `max` */
static int impls_of(const bench_table *t, const char *name, dg_precision p, const char **out, int max) {
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        if (strcmp(t->r[i].name, name) || t->r[i].precision != p) continue;
        bool seen = false;
        for (int j = 0; j < n && !seen; j++) seen = !strcmp(out[j], t->r[i].impl);
        if (!seen && n < max) out[n++] = t->r[i].impl;
    }
    return n;
}

/* one table row: step ms and images/s per implementation (or the row's
 * status), then the plan's arena, its peak of live bytes and their ratio */
static void table_row(FILE *f, const bench_table *t, const char *name, dg_precision p, const char *const *im,
                      int n_im, long long batch) {
    long long arena = 0, live = 0;
    fprintf(f, "| %lld |", batch);
    for (int j = 0; j < n_im; j++) {
        const csv_rec *r = bench_table_row_prec(t, name, im[j], batch, p);
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

/* Images per joule over the batch for every implementation of stem c with
 * energy in precision p (the GPU board's, the CPU packages' and DRAM's);
 * no chart where none has */
static void energy_chart(bench_report *rep, const bench_table *t, const resnet_case *c, dg_precision p) {
    const char *im[16];
    int n_im = impls_of(t, c->name, p, im, 16), points = 0;
    char file[48], title[112];
    if (p == DG_PREC_FP32) snprintf(file, sizeof file, "resnet_energy_%s", c->stem_name);
    else snprintf(file, sizeof file, "resnet_energy_%s_%s", c->stem_name, dg_precision_name(p));
    snprintf(title, sizeof title, "ResNet-18 training step, %s stem, %s: images per joule", c->stem_name,
             dg_precision_name(p));
    bench_chart ch = {file, title, "batch", "images / J", true, .vline = NAN};
    for (int j = 0; j < n_im && ch.n < (int)(sizeof ch.s / sizeof ch.s[0]); j++) {
        bench_series s = bench_pick_prec(t, c->name, im[j], NULL, p, false, BENCH_SAMPLES_PER_J, im[j]);
        if (!s.n) continue;
        points += s.n;
        bench_chart_add(&ch, s);
    }
    if (points) bench_chart_draw(rep, &ch);
}

/* Per stem: a chart of images/s over the batch for every implementation
 * found in fp32 (the crossover of graph replay over the CPU marked), the
 * crossovers, and per precision a table of step time, images/s and memory
 * per batch of every implementation with rows in it: the sweep's sets and
 * PyTorch's rows (bench/peers/torch_resnet.py) in the same dtype. */
bool bench_report_resnet(bench_report *rep, const bench_table *t) {
    if (!t->n) return false;
    FILE *f = rep->sum;
    fprintf(f, "## ResNet-18 training step (SGD, momentum 0.9, weight decay 5e-4), images/s\n\n"
               "| stem | GPU (graph replay) vs CPU | GPU (no graph) vs CPU | energy: GPU (graph replay) vs CPU |\n"
               "|---|---|---|---|\n");
    for (int ci = 0; ci < N_CASES; ci++) {
        const resnet_case *c = &cases[ci];
        const char *im[16];
        int n_im = impls_of(t, c->name, DG_PREC_FP32, im, 16);
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
        /* from which batch a step on the GPU board costs fewer joules than
         * on the CPU packages and DRAM */
        bench_series ce = bench_pick(t, c->name, "cpu", NULL, false, BENCH_JOULES, "");
        bench_series ge = bench_pick(t, c->name, "gpu-graph", NULL, false, BENCH_JOULES, "");
        bench_series se = bench_speedup(&ce, &ge, "");
        char c2[96];
        bench_energy_crossover_str(&se, c2, sizeof c2);
        fprintf(f, "| %s | %s | %s | %s |\n", c->stem_name, c0, c1, c2);
        bench_chart_draw(rep, &ch);
    }
    fprintf(f, "\n");
    for (int ci = 0; ci < N_CASES; ci++)
        for (int p = 0; p < DG_PREC_COUNT; p++) energy_chart(rep, t, &cases[ci], (dg_precision)p);
    for (int ci = 0; ci < N_CASES; ci++)
        for (int p = 0; p < DG_PREC_COUNT; p++) {
            const resnet_case *c = &cases[ci];
            const char *im[16];
            long long batches[BENCH_MAX_PTS];
            int n_im = impls_of(t, c->name, (dg_precision)p, im, 16);
            int n_b = bench_table_ms(t, c->name, batches, 0, BENCH_MAX_PTS);
            if (!n_im) continue;
            fprintf(f, "### %s%s%s: step time and images/s per implementation, plan memory (MB)\n\n| batch |",
                    c->name, p == DG_PREC_FP32 ? "" : " in ", p == DG_PREC_FP32 ? "" : dg_precision_name((dg_precision)p));
            for (int j = 0; j < n_im; j++) fprintf(f, " %s |", im[j]);
            fprintf(f, " arena | peak live | arena / live |\n|---|");
            for (int j = 0; j < n_im + 3; j++) fprintf(f, "---|");
            fprintf(f, "\n");
            for (int b = 0; b < n_b; b++) table_row(f, t, c->name, (dg_precision)p, im, n_im, batches[b]);
            fprintf(f, "\n");
        }
    return true;
}
