/* sweep_train.c: epoch time of logistic regression and the default MLP on
 * Fashion-MNIST, on every backend, over batch sizes 32..4096. Two epochs
 * are trained from the same seed; the second epoch's time is the figure
 * (the first pays one-time costs such as CUDA-graph capture), so reps = 1.
 * Check: before timing, one training step of the same model on the first
 * batch of the data set is run on the backend and its loss compared with
 * the float64 reference (max_rel_err); the test accuracy after the two
 * epochs is printed. The data set is resident on the backend; batches are
 * gathered there. */
#include <math.h>
#include <string.h>

#include "core/nn/mlp.h"
#include "core/nn/trainer.h"
#include "check.h"
#include "sweep.h"

static const long long default_batches[] = {32, 64, 128, 256, 512, 1024, 2048, 4096};
static const long long quick_batches[] = {64, 512, 4096};

static void run_one(bench_ctx *ctx, dg_backend *be, const char *model, const dg_dataset *train,
                    const dg_dataset *test, int batch) {
    bench_row row = {.sweep = "train", .name = model, .impl = be == ctx->cpu ? "cpu" : "gpu",
                     .backend = be == ctx->cpu ? "cpu" : "gpu", .m = batch, .n = 1, .k = 1, .batch = batch,
                     .threads = ctx->threads, .warmup = 1, .max_rel_err = NAN};
    dg_mlp_cfg cfg;
    dg_mlp_parse_widths(!strcmp(model, "logreg") ? "784-10" : "784-256-100-10", &cfg);
    dg_train_opts o = {.model = dg_mlp_new, .model_cfg = &cfg, .optim = dg_optim_default(DG_OPTIM_ADAM, 1e-3f),
                       .epochs = 2, .batch = batch, .seed = 1, .loss_every = 1 << 30};
    dg_epoch_stats s;
    bench_step check;
    double want = NAN;
    dg_status st = bench_step_new(&check, be, &cfg, batch, train->x, train->y, NULL, &want, &row.max_rel_err);
    bench_step_free(&check);
    if (st == DG_OK && row.max_rel_err > 1e-4) {
        row.status = "wrong";
        bench_emit(ctx, &row);
        return;
    }
    if (st == DG_OK) st = dg_train(be, &o, train, test, NULL, NULL, &s);
    if (st == DG_OK) {
        row.st = (bench_stats){1e3 * s.epoch_s, 1e3 * s.epoch_s, 1e3 * s.epoch_s, 0, 1};
        row.status = "ok";
        if (ctx->progress) fprintf(stderr, "\n");
        fprintf(stderr, "bench: train %s batch %d on %s: test accuracy %.2f%% after 2 epochs\n", model, batch,
                row.backend, 100 * s.test_acc);
        /* examples per second would be the natural rate; GB/s column holds the
         * bytes of images read per second */
        row.bytes = (double)(train->n / batch * batch) * train->rows * train->cols * 4.0;
    } else {
        row.status = bench_status_word(st);
        fprintf(stderr, "bench: train %s batch %d on %s: %s\n", model, batch, row.backend, dg_last_error());
    }
    bench_emit(ctx, &row);
}

dg_status sweep_train(bench_ctx *ctx) {
    dg_dataset train, test;
    dg_status st = dg_dataset_load(ctx->data_dir, "train", &train);
    if (st != DG_OK) return st;
    if ((st = dg_dataset_load(ctx->data_dir, "t10k", &test)) != DG_OK) {
        dg_dataset_free(&train);
        return st;
    }
    const long long *sizes;
    int n = bench_sizes(ctx, ctx->quick ? quick_batches : default_batches,
                        ctx->quick ? 3 : (int)(sizeof default_batches / sizeof *default_batches), &sizes);
    const char *models[] = {"logreg", "mlp"};
    for (int mi = 0; mi < 2; mi++)
        for (int i = 0; i < n && !bench_interrupted; i++) {
            if (ctx->cpu) run_one(ctx, ctx->cpu, models[mi], &train, &test, (int)sizes[i]);
            if (ctx->gpu) run_one(ctx, ctx->gpu, models[mi], &train, &test, (int)sizes[i]);
        }
    dg_dataset_free(&train);
    dg_dataset_free(&test);
    return DG_OK;
}
