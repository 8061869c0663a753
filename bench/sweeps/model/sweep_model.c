/* sweep_model.c: the training step of an ONNX file's model (bench --model
 * FILE.onnx, model_file.h: softmax cross-entropy on its output, SGD with
 * momentum) as one plan, over batch sizes, in every precision of --dtype:
 * the mlp and resnet sweeps' rows for a network the user brings. A sweep
 * of its own rather than a case of those two: their cases, charts and
 * report tables are keyed by their built-in networks (the MLP's widths,
 * ResNet-18's stems), while a file's model has one case, named after the
 * file (onnx-STEM), and shapes known only once it is loaded.
 *
 * impl cpu, gpu (node by node) and gpu-graph (the step captured once as a
 * CUDA graph and replayed); tf32 on the GPU only. The examples are seeded
 * synthetic data of the file's input shape, uniform in [0, 1), labels
 * uniform over the output's classes (a step's time depends on the shapes,
 * not the values); inputs are uploaded once (transfer = 0).
 *
 * Check (column check, "f64-step@b2"), as the resnet sweep's: at an
 * implementation's first row in a precision, before anything of it is
 * timed, the same step at batch 2 runs once on the same backend and
 * implementation, and its loss, every parameter's update and every running
 * statistic's update are compared with the float64 evaluation of that
 * graph (core/check/step_check.h, each tensor on its own; the batch-norm
 * tolerances of runner/step_tol.h where the model has a batch norm).
 * Batch 2 because a batch norm makes the loss depend on the
 * whole batch, so no cheaper reference of a large batch exists. A failed
 * check makes the implementation's rows "wrong", untimed, with its error
 * in max_rel_err; then each full-batch plan runs its first step once and
 * its loss must be finite.
 *
 * Row: case = onnx-STEM, m = batch = the batch, n = one example's floats,
 * k = the classes; flops = 3x the forward's FLOPs (2 per multiply-add of
 * every conv2d and matmul node, as the resnet sweep counts), so gflops is
 * the step's rate; arena_bytes and live_bytes from the plan. CPU rows
 * respect --cpu-cap, first predicted from a warm run of the check step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/graph.h"
#include "core/status.h"
#include "profile/profile.h"
#include "runner/runner.h"
#include "runner/step_rows.h"
#include "runner/step_tol.h"
#include "sweeps/model/model_file.h"

#define CHECK_BATCH 2
#define CHECK_WORD  "f64-step@b2"

static const long long default_batches[] = {8, 32, 128, 512, 2048};
static const long long quick_batches[] = {8, 64};

/* cpu, gpu, gpu-graph: whether the plan replays (the CPU's plans have no
 * replay to turn off: the flag is the default there) */
typedef struct impl_kind { const char *name; bool gpu, replay; } impl_kind;
static const impl_kind kinds[] = {{"cpu", false, true}, {"gpu", true, false}, {"gpu-graph", true, true}};
#define N_IMPLS (int)(sizeof kinds / sizeof *kinds)

/* the sweep under way: the file's model, its float64 references per
 * precision and each implementation's checks */
typedef struct model_run {
    const dg_onnx  *onnx;
    char            name[80];        /* onnx-STEM: the case column        */
    bool            has_batch_norm;  /* batch-norm tolerances (model_file.h) */
    size_t          example_floats;
    int             classes;
    double          flops_per_example;
    bench_step_ref  ref[DG_PREC_COUNT];
    bench_step_rows_check chk[N_IMPLS][DG_PREC_COUNT]; /* each implementation's, made at its first row */
} model_run;

/* a runner implementation's data: the run and which kind */
typedef struct model_impl { model_run *run; int index; } model_impl;

/* the step spec in precision p, with p's tolerances */
static bench_step_spec spec_in(const model_run *run, dg_precision p) {
    bench_step_spec spec = bench_model_step(run->onnx);
    spec.precision = p;
    spec.tol = run->has_batch_norm ? bench_step_tol_bn_in(p, spec.tol) : bench_step_tol_in(p, spec.tol);
    return spec;
}

/* 3x the forward's FLOPs per example: 2 per multiply-add of the conv2d and
 * matmul nodes made before the loss, on the step's graph at the check's
 * batch (no plan, no backend); 0 where it cannot be built */
static double flops_per_example(const model_run *run) {
    bench_step_spec spec = bench_model_step(run->onnx);
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

static dg_status synth(const model_run *run, int batch, uint64_t seed, float **x, int32_t **y) {
    void *vx = NULL;
    dg_status st = bench_synth_batch((bench_batch_shape){run->example_floats, run->classes, 0, 0}, batch, seed,
                                     &vx, y);
    *x = vx;
    return st;
}

/* the implementation's check in precision p, run at its first call: the
 * step at CHECK_BATCH on its backend against the float64 reference (made
 * at the precision's first check) */
static const bench_step_rows_check *checked(bench_ctx *ctx, const bench_impl *im, dg_precision p) {
    const model_impl *mi = im->data;
    model_run *run = mi->run;
    bench_step_rows_check *out = &run->chk[mi->index][p];
    if (out->done) return out;
    bench_step_spec spec = spec_in(run, p);
    float *x = NULL;
    int32_t *y = NULL;
    dg_plan_opts opts = {.no_replay = !kinds[mi->index].replay};
    dg_status st = synth(run, CHECK_BATCH, 1000u, &x, &y);
    if (st == DG_OK)
        bench_step_rows_check_run(out, im->gpu ? ctx->gpu : ctx->cpu, im->gpu, &spec, CHECK_BATCH, x, y, &opts,
                                  &run->ref[p]);
    else {
        *out = (bench_step_rows_check){.done = true, .st = st, .err = NAN};
        snprintf(out->why, sizeof out->why, "%s", dg_last_error());
    }
    free(x);
    free(y);
    return out;
}

/* ---- the runner's view (runner/runner.h): a point is the model at a
 * batch size ---- */

static void model_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    const model_run *run = arg;
    const long long *sizes;
    int n = ctx->quick ? 2 : (int)(sizeof default_batches / sizeof *default_batches);
    n = bench_sizes(ctx, ctx->quick ? quick_batches : default_batches, n, &sizes);
    for (int b = 0; b < n; b++)
        bench_points_add(out, (bench_point){.name = run->name, .m = sizes[b], .n = (int64_t)run->example_floats,
                                            .k = run->classes, .batch = sizes[b],
                                            .flops = run->flops_per_example * (double)sizes[b], .data = run});
}

/* the CPU has no TF32 mode: no tf32 rows of it */
static bool model_applies(const bench_ctx *ctx, const bench_point *pt, const bench_impl *im) {
    (void)ctx;
    return im->gpu || pt->precision != DG_PREC_TF32;
}

/* the CPU's first rate: the warm run of its checked step; none where the
 * check failed */
static void model_probe(bench_ctx *ctx, const bench_impl *im, const bench_point *pt, double *ms, double *work) {
    const bench_step_rows_check *chk = checked(ctx, im, pt->precision);
    if (chk->st != DG_OK || !chk->ok) return;
    *ms = chk->warm_ms;
    *work = ((const model_impl *)im->data)->run->flops_per_example * CHECK_BATCH;
}

/* one batch: its examples, the same for every implementation, and the
 * implementation under way's step */
typedef struct model_state {
    const model_run *run;
    float     *x;
    int32_t   *y;
    bench_step s;
    char       why[256]; /* a row's note: a failed check names every part and tolerance */
} model_state;

static void model_teardown(void *arg) {
    model_state *s = arg;
    free(s->x);
    free(s->y);
    free(s);
}

static dg_status model_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    (void)ctx;
    model_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "model: out of host memory");
    s->run = pt->data;
    dg_status st = synth(s->run, (int)pt->batch, (uint64_t)pt->batch, &s->x, &s->y);
    if (st != DG_OK) {
        model_teardown(s);
        return st;
    }
    *out = s;
    return DG_OK;
}

/* the implementation's check (a failed one makes its rows "wrong",
 * untimed), then the full-batch plan's first step, whose loss must be
 * finite, then the plan's memory; the step is timed */
static dg_status model_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    model_state *s = arg;
    const model_impl *mi = im->data;
    bench_step_spec spec = spec_in(s->run, row->precision);
    dg_plan_opts opts = {.no_replay = !kinds[mi->index].replay};
    return bench_step_rows_prepare(checked(ctx, im, row->precision),
                                   "the batch-2 step differs from its float64 reference", &s->s,
                                   im->gpu ? ctx->gpu : ctx->cpu, im->gpu, &spec, s->x, s->y, &opts, row, s->why,
                                   sizeof s->why, work);
}

static void model_release(void *arg, const bench_impl *im, bench_work *work) {
    (void)im; (void)work;
    bench_step_free(&((model_state *)arg)->s);
}

/* without --model: why the sweep has nothing to run */
static const char *model_unavailable(bench_ctx *ctx, char *why, size_t n) {
    if (ctx->model) return NULL;
    snprintf(why, n, "no --model FILE.onnx given");
    return why;
}

dg_status sweep_model(bench_ctx *ctx) {
    model_run *run = calloc(1, sizeof *run);
    if (!run) return dg_fail(DG_ERR_OOM, "model: out of host memory");
    if (ctx->model) {
        run->onnx = ctx->model;
        const bench_prof_model *named = bench_prof_onnx_model(ctx->model_path); /* checked by the options */
        snprintf(run->name, sizeof run->name, "%s", named ? named->name : "onnx-model");
        run->has_batch_norm = ctx->model_has_batch_norm;
        run->example_floats = (size_t)dg_shape_numel(dg_onnx_example_shape(ctx->model));
        run->classes = dg_onnx_classes(ctx->model);
        run->flops_per_example = flops_per_example(run);
    }
    model_impl data[N_IMPLS];
    bench_impl runner_impls[N_IMPLS];
    for (int i = 0; i < N_IMPLS; i++) {
        data[i] = (model_impl){run, i};
        runner_impls[i] = (bench_impl){.name = kinds[i].name, .gpu = kinds[i].gpu, .data = &data[i]};
    }
    bench_sweep_spec spec = {
        .name = "model", .check_word = CHECK_WORD, .impls = runner_impls, .n_impls = N_IMPLS,
        .precisions = BENCH_PREC_ALL, .unavailable = model_unavailable, .points = model_points, .arg = run,
        .applies = model_applies, .probe = model_probe, .setup = model_setup, .teardown = model_teardown,
        .prepare = model_prepare, .release = model_release,
    };
    dg_status st = bench_run_spec(ctx, &spec);
    for (int p = 0; p < DG_PREC_COUNT; p++) bench_step_ref_free(&run->ref[p]);
    free(run);
    return st;
}
