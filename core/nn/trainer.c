#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../clock_internal.h"
#include "../plan.h"
#include "../rng.h"
#include "../status_internal.h"
#include "train_step.h"

typedef struct trainer {
    dg_graph     *g;
    dg_model      model;
    dg_train_step ts;
    dg_node      *x, *y, *loss, *xt, *logits_t;
    dg_plan      *step, *eval;
    void     *dev_x, *dev_y, *dev_perm;    /* resident data set (not copy_batches) */
    float    *host_x;                      /* batch / eval buffers on the host     */
    int32_t  *host_y, *perm;
    float    *logits;
} trainer;

/* the training step and, on the same parameters, the evaluation forward
 * over batches of eval_batch */
static dg_status build(trainer *t, dg_backend *be, const dg_train_opts *o, int eval_batch) {
    t->g = dg_graph_new();
    if (!t->g) return dg__fail(DG_ERR_OOM, "train: out of memory");
    dg_graph *g = t->g;
    dg_status st = o->model(g, o->model_cfg, o->seed, &t->model);
    if (st != DG_OK) return st;
    dg_shape xs;
    if (!dg_model_input_shape(&t->model, eval_batch, &xs))
        return dg__fail(DG_ERR_SHAPE, "train: examples of %d dims do not fit", t->model.in_shape.ndim);
    t->xt = dg_input(g, "x_eval", xs);
    t->logits_t = dg_model_forward(g, &t->model, t->xt, NULL);
    if (!t->logits_t) return dg_graph_status(g);
    if ((st = dg_train_step_build(g, &t->model, o->batch, &o->optim, &t->ts)) != DG_OK) return st;
    t->x = t->ts.x;
    t->y = t->ts.y;
    t->loss = t->ts.loss;
    if ((st = dg_plan_new(&t->step, g, be, t->ts.outputs, t->ts.n_outputs, NULL)) != DG_OK) return st;
    return dg_plan_new(&t->eval, g, be, &t->logits_t, 1, &(dg_plan_opts){.share_leaves = t->step});
}

static void trainer_free(trainer *t, dg_backend *be) {
    dg_plan_free(t->eval);
    dg_plan_free(t->step);
    dg_graph_free(t->g);
    dg_backend_release(be, t->dev_x);
    dg_backend_release(be, t->dev_y);
    dg_backend_release(be, t->dev_perm);
    free(t->host_x);
    free(t->host_y);
    free(t->perm);
    free(t->logits);
}

/* accuracy over the test set in batches of eb */
static dg_status evaluate(trainer *t, const dg_dataset *test, int eb, int classes, double *acc) {
    int dim = test->rows * test->cols, hit = 0, done = 0;
    dg_status st = DG_OK;
    for (int b = 0; b + eb <= test->n && st == DG_OK; b += eb) {
        st = dg_plan_set(t->eval, t->xt, test->x + (size_t)b * dim, (size_t)eb * dim * sizeof(float));
        if (st == DG_OK) st = dg_plan_run(t->eval);
        if (st == DG_OK) st = dg_plan_get(t->eval, t->logits_t, t->logits, (size_t)eb * classes * sizeof(float));
        for (int i = 0; i < eb && st == DG_OK; i++) {
            const float *l = t->logits + (size_t)i * classes;
            int best = 0;
            for (int k = 1; k < classes; k++) best = l[k] > l[best] ? k : best;
            hit += best == test->y[b + i];
        }
        done += eb;
    }
    *acc = done ? (double)hit / done : NAN;
    return st;
}

/* A data set the loop can index: positive sizes, a feature count (and its
 * byte counts) that fits, images and labels present. */
static dg_status check_dataset(const dg_dataset *d, const char *which) {
    int dim;
    if (!d) return dg__fail(DG_ERR_INVALID, "train: NULL %s set", which);
    if (d->n < 1 || d->rows < 1 || d->cols < 1 || d->classes < 1 || __builtin_mul_overflow(d->rows, d->cols, &dim))
        return dg__fail(DG_ERR_INVALID, "train: %s set of %d examples of %dx%d in %d classes", which, d->n, d->rows,
                        d->cols, d->classes);
    if (!d->x || !d->y) return dg__fail(DG_ERR_INVALID, "train: %s set without %s", which, d->x ? "labels" : "images");
    return DG_OK;
}

static dg_status check_args(const dg_backend *be, const dg_train_opts *o, const dg_dataset *train,
                            const dg_dataset *test) {
    if (!be || !o) return dg__fail(DG_ERR_INVALID, "train: NULL %s", be ? "options" : "backend");
    dg_status st = check_dataset(train, "training");
    if (st == DG_OK) st = check_dataset(test, "test");
    if (st != DG_OK) return st;
    if (test->rows * test->cols != train->rows * train->cols)
        return dg__fail(DG_ERR_INVALID, "train: test examples of %dx%d, training examples of %dx%d", test->rows,
                        test->cols, train->rows, train->cols);
    int n = o->subset > 0 && o->subset < train->n ? o->subset : train->n;
    if (!o->model || o->batch < 1 || o->batch > n || o->epochs < 1)
        return dg__fail(DG_ERR_INVALID, "train: batch %d, epochs %d do not fit a data set of %d examples%s", o->batch,
                        o->epochs, n, o->model ? "" : " (and no model)");
    return DG_OK;
}

dg_status dg_train(dg_backend *be, const dg_train_opts *o, const dg_dataset *train, const dg_dataset *test,
                   dg_epoch_fn cb, void *arg, dg_epoch_stats *last) {
    dg_status st = check_args(be, o, train, test);
    if (st != DG_OK) return st;
    int dim = train->rows * train->cols, n = o->subset > 0 && o->subset < train->n ? o->subset : train->n;
    int eb = test->n % 1000 == 0 ? 1000 : test->n; /* evaluation batch: divides the test set */
    trainer t = {0};
    st = build(&t, be, o, eb);
    int classes = t.model.classes;
    if (st == DG_OK && (dg_shape_numel(t.model.in_shape) != dim || classes != train->classes))
        st = dg__fail(DG_ERR_INVALID, "train: model %s takes %lld features into %d classes; the data set has %d "
                      "features and %d classes", t.model.name, (long long)dg_shape_numel(t.model.in_shape), classes,
                      dim, train->classes);
    t.host_x = malloc((size_t)o->batch * dim * sizeof(float));
    t.host_y = malloc((size_t)o->batch * sizeof(int32_t));
    t.perm = malloc((size_t)n * sizeof(int32_t));
    t.logits = malloc((size_t)eb * classes * sizeof(float));
    if (st == DG_OK && (!t.host_x || !t.host_y || !t.perm || !t.logits)) st = dg__fail(DG_ERR_OOM, "train: out of memory");
    if (st == DG_OK && !o->copy_batches) { /* the data set goes to the backend once */
        st = dg_backend_alloc(be, (size_t)n * dim * sizeof(float), &t.dev_x);
        if (st == DG_OK) st = dg_backend_alloc(be, (size_t)n * sizeof(int32_t), &t.dev_y);
        if (st == DG_OK) st = dg_backend_alloc(be, (size_t)n * sizeof(int32_t), &t.dev_perm);
        if (st == DG_OK) st = dg_backend_upload(be, t.dev_x, train->x, (size_t)n * dim * sizeof(float));
        if (st == DG_OK) st = dg_backend_upload(be, t.dev_y, train->y, (size_t)n * sizeof(int32_t));
    }
    for (int i = 0; i < n && t.perm; i++) t.perm[i] = i;
    dg_rng rng = dg_rng_new(o->seed ^ 0x5eedu);
    dg_epoch_stats s = {0};
    int steps = n / o->batch, every = o->loss_every > 0 ? o->loss_every : 1;
    for (int e = 1; e <= o->epochs && st == DG_OK; e++) {
        for (int i = n - 1; i > 0; i--) { /* Fisher-Yates, seeded: the same order on every backend */
            int j = (int)(dg_rng_u64(&rng) % (uint64_t)(i + 1));
            int32_t tmp = t.perm[i]; t.perm[i] = t.perm[j]; t.perm[j] = tmp;
        }
        double t0 = dg__monotonic_s(), loss_sum = 0;
        int loss_n = 0;
        if (!o->copy_batches) st = dg_backend_upload(be, t.dev_perm, t.perm, (size_t)n * sizeof(int32_t));
        for (int b = 0; b < steps && st == DG_OK; b++) {
            const int32_t *idx = t.perm + (size_t)b * o->batch;
            if (o->copy_batches) {
                for (int i = 0; i < o->batch; i++) {
                    memcpy(t.host_x + (size_t)i * dim, train->x + (size_t)idx[i] * dim, (size_t)dim * sizeof(float));
                    t.host_y[i] = train->y[idx[i]];
                }
                st = dg_plan_set(t.step, t.x, t.host_x, (size_t)o->batch * dim * sizeof(float));
                if (st == DG_OK) st = dg_plan_set(t.step, t.y, t.host_y, (size_t)o->batch * sizeof(int32_t));
            } else {
                const int32_t *didx = (const int32_t *)t.dev_perm + (size_t)b * o->batch;
                st = dg_backend_gather_rows(be, dg_plan_data(t.step, t.x), t.dev_x, didx, o->batch,
                                            (size_t)dim * sizeof(float));
                if (st == DG_OK)
                    st = dg_backend_gather_rows(be, dg_plan_data(t.step, t.y), t.dev_y, didx, o->batch, sizeof(int32_t));
            }
            if (st == DG_OK) st = dg_plan_run(t.step);
            if (st == DG_OK && (b % every == 0 || b == steps - 1)) {
                float l;
                st = dg_plan_get(t.step, t.loss, &l, sizeof l);
                loss_sum += l;
                loss_n++;
            }
        }
        if (st == DG_OK) st = dg_backend_sync(be);
        s.epoch = e;
        s.epoch_s = dg__monotonic_s() - t0;
        s.total_s += s.epoch_s;
        s.train_loss = loss_n ? loss_sum / loss_n : NAN;
        if (st == DG_OK) st = evaluate(&t, test, eb, classes, &s.test_acc);
        if (st == DG_OK && cb) cb(&s, arg);
    }
    if (last) *last = s;
    trainer_free(&t, be);
    return st;
}
