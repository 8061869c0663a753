/* sweep_train.c: epoch time of logistic regression and the default MLP on
 * Fashion-MNIST, on every backend, over batch sizes 32..4096, in every
 * precision (--dtype: the step builder's policy, core/nn/train_step.h:
 * bf16 and fp16 cast each product's operands, fp16 scales its loss; tf32
 * lets the GPU's products use TF32 tensor cores, which the CPU does not
 * have: its tf32 rows train the fp32 step and say so, as the mlp sweep's).
 * Two epochs are trained from the same seed; the second epoch's time is
 * the figure (the first pays one-time costs such as CUDA-graph capture),
 * so reps = 1.
 * Check: before timing, one training step of the same model, optimizer
 * and precision on the first batch of the data set is run on the backend
 * and its loss and every parameter's update compared with the float64
 * evaluation of the same graph (which rounds where the graph casts;
 * max_rel_err), within the step's tolerances in fp32 and
 * bench_step_tol_in's in the others (the mlp sweep's); in those the check
 * column says "f64-loss+update+P-policy tol L/U": the step's graph also
 * carries P's policy (runner/step_policy.h: every forward product in P's
 * dtype, fp16's loss scaled), which the float64 comparison cannot see.
 * The trainer's options are made from the checked step's spec
 * (train_opts_of), so the epochs train what was checked. The test
 * accuracy after the two epochs is printed. The data set is resident on
 * the backend; batches are gathered there. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/mlp.h"
#include "core/nn/trainer.h"
#include "core/check/step_check.h"
#include "core/status.h"
#include "runner/runner.h"
#include "runner/step_policy.h"
#include "runner/step_tol.h"

static const long long default_batches[] = {32, 64, 128, 256, 512, 1024, 2048, 4096};
static const long long quick_batches[] = {64, 512, 4096};

/* the models: the case column of the rows, the MODEL of bench train's
 * train-MODEL-BACKEND.csv; the report follows this order */
typedef struct train_model { const char *name, *widths; } train_model;
static const train_model models[] = {{"logreg", "784-10"}, {"mlp", "784-256-100-10"}};
#define N_MODELS (int)(sizeof models / sizeof *models)
/* the MODELs of bench train's curves: the sweep's models and the CNN */
static const char *const curve_models[] = {"logreg", "mlp", "cnn"};
#define N_CURVE_MODELS (int)(sizeof curve_models / sizeof *curve_models)
static const char *const backends[] = {"cpu", "gpu"}; /* BACKEND of the curves */
#define N_BACKENDS (int)(sizeof backends / sizeof *backends)

/* ---- the runner's view (runner/runner.h): a point is a model at a batch
 * size; an implementation a backend. The trainer times its own epochs, so
 * prepare trains and fills the row's one sample itself: nothing is left
 * for the runner to time. The points have no flops or bytes, so no
 * --cpu-cap prediction skips an epoch (one takes seconds by nature). ---- */

static const bench_impl train_impls[] = {{.name = "cpu"}, {.name = "gpu", .gpu = true}};

/* a model and the data set it trains on: a point's data */
typedef struct train_case {
    const train_model *model;
    const dg_dataset  *train, *test;
} train_case;

/* every model at every batch size; arg: the train_case of each model */
static void train_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    const train_case *cases = arg;
    const long long *sizes;
    int n = bench_sizes(ctx, ctx->quick ? quick_batches : default_batches,
                        ctx->quick ? 3 : (int)(sizeof default_batches / sizeof *default_batches), &sizes);
    for (int mi = 0; mi < N_MODELS; mi++)
        for (int i = 0; i < n; i++)
            bench_points_add(out, (bench_point){.name = models[mi].name, .m = sizes[i], .n = 1, .k = 1,
                                                .batch = sizes[i], .data = &cases[mi]});
}

/* one model at one batch in one precision: the float64 reference of its
 * check step, the same on every backend (a tf32 step is the fp32 graph),
 * and the row under way's note, check word and its last epoch's time (its
 * one sample) */
typedef struct train_state {
    const train_case *tc;
    bench_step_ref    ref;
    char              why[256], check[48];
    double            epoch_ms;
} train_state;

static void train_teardown(void *arg) {
    train_state *s = arg;
    bench_step_ref_free(&s->ref);
    free(s);
}

static dg_status train_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    (void)ctx;
    train_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "train: out of host memory");
    s->tc = pt->data;
    *out = s;
    return DG_OK;
}

/* what the trainer trains: the checked step's model, optimizer and
 * precision, two epochs from seed 1 */
static dg_train_opts train_opts_of(const bench_step_spec *spec, int batch) {
    return (dg_train_opts){.model = spec->model, .model_cfg = spec->cfg, .optim = spec->optim,
                           .precision = spec->precision, .epochs = 2, .batch = batch, .seed = 1,
                           .loss_every = 1 << 30};
}

/* The row's step: the MLP of the model's widths in the row's precision
 * (the CPU's tf32: the fp32 step, said in the note) with that precision's
 * tolerances, and the row's check word */
static bench_step_spec row_step(train_state *s, const dg_mlp_cfg *cfg, const bench_impl *im, bench_row *row) {
    bench_step_spec spec = bench_mlp_step(cfg); /* the check's step is the trainer's */
    spec.precision = bench_step_precision(row->precision, im->gpu);
    spec.tol = bench_step_tol_in(spec.precision, spec.tol);
    if (spec.precision != row->precision) row->note = "no TF32 on the CPU: the fp32 step";
    char tol[32];
    snprintf(tol, sizeof tol, "%.2g/%.2g", spec.tol.loss, spec.tol.update);
    bench_step_check_word(s->check, sizeof s->check, BENCH_STEP_CHECK, spec.precision, tol);
    row->check = s->check;
    return spec;
}

/* one training step on the first batch checked against float64, then two
 * epochs trained from the same seed: the second one's time is the row's
 * one sample. Every row says warmup 1 (the first epoch pays one-time
 * costs), whatever --warmup: hence a data set too small for the check step
 * makes a skipped row here, not in a skip callback (whose rows say
 * --warmup). */
static dg_status train_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    train_state *s = arg;
    const train_case *tc = s->tc;
    const dg_dataset *train = tc->train;
    dg_backend *be = im->gpu ? ctx->gpu : ctx->cpu;
    int batch = (int)row->batch;
    row->warmup = 1;
    dg_mlp_cfg cfg;
    dg_mlp_parse_widths(tc->model->widths, &cfg);
    /* the check step reads the first batch of the data set as [batch, widths[0]] */
    if (batch > train->n || (int64_t)train->rows * train->cols != cfg.widths[0]) {
        snprintf(s->why, sizeof s->why,
                 "the data set has %d images of %dx%d, the model needs at least %d of %lld pixels", train->n,
                 train->rows, train->cols, batch, (long long)cfg.widths[0]);
        fprintf(stderr, "bench: train %s batch %d on %s: skipped: %s\n", tc->model->name, batch, row->backend, s->why);
        row->status = "skipped";
        row->note = s->why;
        return DG_OK;
    }
    bench_step_spec spec = row_step(s, &cfg, im, row);
    dg_train_opts o = train_opts_of(&spec, batch);
    bench_step check;
    bool ok = false, policy = false;
    dg_status st = bench_step_new(&check, be, &spec, batch, train->x, train->y, NULL, &s->ref,
                                  &row->max_rel_err, &ok);
    /* against the row's precision, not the spec's: a spec that lost it fails */
    if (st == DG_OK)
        policy = bench_step_policy(check.g, &check.ts, bench_step_precision(row->precision, im->gpu), s->why,
                                   sizeof s->why);
    bench_step_free(&check);
    if (st != DG_OK) return st;
    if (!ok || !policy) {
        row->status = "wrong";
        if (!policy) row->note = s->why;
        return DG_OK;
    }
    dg_epoch_stats es;
    if ((st = dg_train(be, &o, train, tc->test, NULL, NULL, &es)) != DG_OK) return st;
    s->epoch_ms = 1e3 * es.epoch_s;
    row->st = BENCH_NO_STATS;
    row->st.median_ms = row->st.min_ms = row->st.max_ms = s->epoch_ms;
    row->st.cv_pct = 0;
    row->st.reps = 1;
    row->st.samples = &s->epoch_ms;
    work->energy_none = "an epoch is timed once by the trainer, not repeated in an energy window";
    row->status = "ok";
    if (ctx->progress) fprintf(stderr, "\n");
    fprintf(stderr, "bench: train %s batch %d on %s in %s: test accuracy %.2f%% after 2 epochs\n", tc->model->name,
            batch, row->backend, dg_precision_name(row->precision), 100 * es.test_acc);
    /* examples per second would be the natural rate; GB/s column holds the
     * bytes of images read per second */
    row->bytes = (double)(train->n / batch * batch) * train->rows * train->cols * 4.0;
    return DG_OK;
}

/* the data set missing: no rows, the sweep fails with the loader's message */
dg_status sweep_train(bench_ctx *ctx) {
    dg_dataset train, test;
    dg_status st = dg_dataset_load(ctx->data_dir, "train", &train);
    if (st != DG_OK) return st;
    if ((st = dg_dataset_load(ctx->data_dir, "t10k", &test)) != DG_OK) {
        dg_dataset_free(&train);
        return st;
    }
    train_case cases[N_MODELS];
    for (int mi = 0; mi < N_MODELS; mi++) cases[mi] = (train_case){&models[mi], &train, &test};
    bench_sweep_spec spec = {
        .name = "train", .check_word = BENCH_STEP_CHECK, .impls = train_impls, .n_impls = 2,
        .precisions = BENCH_PREC_ALL, .points = train_points, .arg = cases, .setup = train_setup,
        .teardown = train_teardown, .prepare = train_prepare,
    };
    st = bench_run_spec(ctx, &spec);
    dg_dataset_free(&train);
    dg_dataset_free(&test);
    return st;
}

/* a train-MODEL-BACKEND.csv written by bench train (bench/train/train.c),
 * train-MODEL-BACKEND-P.csv in precision P other than fp32: loss, accuracy,
 * time per epoch; n = 0 when the file is absent */
typedef struct curve {
    int    n;
    double epoch[BENCH_MAX_PTS], loss[BENCH_MAX_PTS], acc[BENCH_MAX_PTS], total_s[BENCH_MAX_PTS];
} curve;

static curve load_curve(const char *dir, const char *model, const char *backend, dg_precision p) {
    curve c = {0};
    char path[1200], line[512];
    snprintf(path, sizeof path, "%s/train-%s-%s%s%s.csv", dir, model, backend, p != DG_PREC_FP32 ? "-" : "",
             p != DG_PREC_FP32 ? dg_precision_name(p) : "");
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f) && c.n < BENCH_MAX_PTS) {
        int ep;
        char m[32], b[32], o[32], dt[32], d[32];
        int batch;
        double lr, seed, loss, acc, es, ts;
        /* epoch,model,backend,optimizer,dtype,data,batch,...; a file
         * written before the precision axis has no dtype column */
        bool with_dtype = sscanf(line, "%d,%31[^,],%31[^,],%31[^,],%31[^,],%31[^,],%d,%lf,%lf,%lf,%lf,%lf,%lf", &ep,
                                 m, b, o, dt, d, &batch, &lr, &seed, &loss, &acc, &es, &ts) == 13;
        if (line[0] == '#' ||
            (!with_dtype && sscanf(line, "%d,%31[^,],%31[^,],%31[^,],%31[^,],%d,%lf,%lf,%lf,%lf,%lf,%lf", &ep, m, b,
                                   o, d, &batch, &lr, &seed, &loss, &acc, &es, &ts) != 12))
            continue;
        c.epoch[c.n] = ep; c.loss[c.n] = loss; c.acc[c.n] = 100 * acc; c.total_s[c.n++] = ts;
    }
    if (f) fclose(f);
    return c;
}

static bench_series curve_series(const curve *c, const double *x, const double *y, const char *title) {
    bench_series s = {.n = c->n};
    snprintf(s.title, sizeof s.title, "%s", title);
    for (int i = 0; i < c->n; i++) { s.x[i] = x[i]; s.y[i] = s.lo[i] = s.hi[i] = y[i]; } /* one run: no bar */
    return s;
}

/* whether t has a row of model `name` in precision p, measured or not */
static bool has_rows(const bench_table *t, const char *name, dg_precision p) {
    for (int i = 0; i < t->n; i++)
        if (t->r[i].precision == p && !strcmp(t->r[i].name, name)) return true;
    return false;
}

/* the epoch-time charts and crossovers from this sweep's rows: one chart
 * per precision measured (fp32 keeps the chart name of the runs before the
 * precision axis, the others train_epoch_time_P), one table row per model
 * and precision: a GPU in bf16 is never set against a CPU in fp32 */
static void report_epochs(bench_report *rep, const bench_table *t) {
    fprintf(rep->sum, "## Fashion-MNIST epoch time (Adam, data resident on the backend), crossover in batch size\n\n"
                      "| model | dtype | GPU vs CPU crossover | CPU epoch s at 128 | GPU epoch s at 128 |\n"
                      "|---|---|---|---|---|\n");
    for (int pi = 0; pi < DG_PREC_COUNT; pi++) {
        dg_precision p = (dg_precision)pi;
        char file[64], title[96];
        if (p == DG_PREC_FP32) snprintf(file, sizeof file, "train_epoch_time");
        else snprintf(file, sizeof file, "train_epoch_time_%s", dg_precision_name(p));
        snprintf(title, sizeof title, "Fashion-MNIST: time of one training epoch, %s", dg_precision_name(p));
        bench_chart ch = {file, title, "batch", "epoch ms", true, .vline = NAN};
        for (int m = 0; m < N_MODELS; m++) {
            if (!has_rows(t, models[m].name, p)) continue;
            char tc[48], tg[48], c0[96], b1[32], b2[32];
            snprintf(tc, sizeof tc, "%s cpu", models[m].name);
            snprintf(tg, sizeof tg, "%s gpu", models[m].name);
            bench_series c = bench_pick_prec(t, models[m].name, "cpu", NULL, p, false, BENCH_MS, tc);
            bench_series g = bench_pick_prec(t, models[m].name, "gpu", NULL, p, false, BENCH_MS, tg);
            bench_chart_add(&ch, c);
            bench_chart_add(&ch, g);
            bench_series sp = bench_speedup(&c, &g, "");
            bench_crossover_str(&sp, c0, sizeof c0);
            double c128 = NAN, g128 = NAN;
            for (int i = 0; i < c.n; i++) if (c.x[i] == 128) c128 = c.y[i] / 1e3;
            for (int i = 0; i < g.n; i++) if (g.x[i] == 128) g128 = g.y[i] / 1e3;
            fprintf(rep->sum, "| %s | %s | %s | %s | %s |\n", models[m].name, dg_precision_name(p), c0,
                    bench_fmt_num(c128, "%.3f", b1, sizeof b1), bench_fmt_num(g128, "%.3f", b2, sizeof b2));
        }
        bench_chart_draw(rep, &ch);
    }
    fprintf(rep->sum, "\n");
}

/* per model: loss and accuracy per epoch, accuracy against time, one line
 * per backend and precision ("cpu" in fp32, "cpu bf16"); the summary's
 * final accuracy table, one row each */
static void report_curves(bench_report *rep, curve cur[N_CURVE_MODELS][N_BACKENDS][DG_PREC_COUNT]) {
    fprintf(rep->sum, "## Fashion-MNIST training (bench train)\n\n| model | backend | epochs | final test accuracy | "
                      "training s |\n|---|---|---|---|---|\n");
    for (int m = 0; m < N_CURVE_MODELS; m++) {
        const char *name = curve_models[m];
        char f1[64], t1[96], f2[64], t2[96], f3[64], t3[96];
        snprintf(f1, sizeof f1, "train_%s_loss", name);
        snprintf(t1, sizeof t1, "%s: training loss per epoch", name);
        snprintf(f2, sizeof f2, "train_%s_acc", name);
        snprintf(t2, sizeof t2, "%s: test accuracy per epoch", name);
        snprintf(f3, sizeof f3, "train_%s_acc_time", name);
        snprintf(t3, sizeof t3, "%s: test accuracy against training time", name);
        bench_chart l = {f1, t1, "epoch", "loss", false, true, .vline = NAN};
        bench_chart a = {f2, t2, "epoch", "test accuracy %", false, true, .vline = NAN};
        bench_chart at = {f3, t3, "training seconds", "test accuracy %", false, true, .vline = NAN};
        for (int i = 0; i < N_BACKENDS * DG_PREC_COUNT; i++) { /* each backend's precisions together */
            int b = i / DG_PREC_COUNT;
            dg_precision p = (dg_precision)(i % DG_PREC_COUNT);
            const curve *c = &cur[m][b][p];
            if (!c->n) continue;
            char label[32];
            snprintf(label, sizeof label, "%s%s%s", backends[b], p != DG_PREC_FP32 ? " " : "",
                     p != DG_PREC_FP32 ? dg_precision_name(p) : "");
            bench_chart_add(&l, curve_series(c, c->epoch, c->loss, label));
            bench_chart_add(&a, curve_series(c, c->epoch, c->acc, label));
            bench_chart_add(&at, curve_series(c, c->total_s, c->acc, label));
            fprintf(rep->sum, "| %s | %s | %d | %.2f%% | %.2f |\n", name, label, c->n, c->acc[c->n - 1],
                    c->total_s[c->n - 1]);
        }
        bench_chart_draw(rep, &l);
        bench_chart_draw(rep, &a);
        bench_chart_draw(rep, &at);
    }
    fprintf(rep->sum, "\n");
}

/* this sweep's rows (train.csv) and bench train's curves, either or both */
bool bench_report_train(bench_report *rep, const bench_table *t) {
    curve cur[N_CURVE_MODELS][N_BACKENDS][DG_PREC_COUNT]; /* 24 of 2 KB */
    int n_curves = 0;
    for (int m = 0; m < N_CURVE_MODELS; m++)
        for (int b = 0; b < N_BACKENDS; b++)
            for (int p = 0; p < DG_PREC_COUNT; p++) {
                cur[m][b][p] = load_curve(rep->dir, curve_models[m], backends[b], (dg_precision)p);
                n_curves += cur[m][b][p].n > 0;
            }
    if (t->n) report_epochs(rep, t);
    if (n_curves) report_curves(rep, cur);
    return t->n || n_curves;
}
