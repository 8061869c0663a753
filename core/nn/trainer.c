#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../clock_internal.h"
#include "../plan.h"
#include "../rng.h"
#include "../status_internal.h"
#include "data_parallel.h"
#include "train_step.h"

typedef struct trainer {
    int           n;                         /* replicas                          */
    int           rank, ranks;               /* this process among the processes  */
    dg_backend   *be[DG_DP_MAX_REPLICAS];
    dg_graph     *g;
    dg_model      model;
    dg_train_step ts;                        /* for one replica's slice           */
    dg_node      *loss;                      /* its loss, averaged over the ranks */
    dg_node      *xt, *logits_t;
    dg_dp        *dp;                        /* the step on every replica         */
    dg_plan      *eval;                      /* on replica 0, its parameters      */
    /* each replica's resident copy of the data set (not copy_batches) */
    void     *dev_x[DG_DP_MAX_REPLICAS], *dev_y[DG_DP_MAX_REPLICAS], *dev_perm[DG_DP_MAX_REPLICAS];
    /* copy_batches: one slice on the host, in pinned memory (replica 0's
     * backend allocates it; it serves every replica) */
    float    *host_x;
    int32_t  *host_y, *perm;
    float    *logits;
} trainer;

/* the training step for slices of batch / (n ranks) (its gradients
 * averaged over the replicas when n >= 2, over the ranks when ranks >= 2)
 * planned on every replica and, on replica 0's parameters, the evaluation
 * forward over batches of eval_batch. Across ranks the step's loss is
 * averaged too (one more all_reduce, of one float): every rank reads the
 * global batch's loss. */
static dg_status build(trainer *t, const dg_train_opts *o, int eval_batch) {
    t->g = dg_graph_new();
    if (!t->g) return dg__fail(DG_ERR_OOM, "train: out of memory");
    dg_graph *g = t->g;
    dg_status st = o->model(g, o->model_cfg, o->seed, &t->model);
    if (st != DG_OK) return st;
    dg_shape xs;
    if (!dg_model_input_shape(&t->model, eval_batch, &xs))
        return dg__fail(DG_ERR_SHAPE, "train: examples of %d dims do not fit", t->model.in_shape.ndim);
    t->xt = dg_input(g, "x_eval", xs);
    /* evaluation in the step's precision: its matmuls' operands cast too */
    dg_forward_mode eval_mode = {.compute = dg_precision_dtype(o->precision)};
    t->logits_t = dg_model_forward(g, &t->model, t->xt, &eval_mode);
    if (!t->logits_t) return dg_graph_status(g);
    const dg_train_step_opts so = {.precision = o->precision, .all_reduce = t->n > 1 || t->ranks > 1};
    int per = o->batch / (t->n * t->ranks);
    if ((st = dg_train_step_build_opts(g, &t->model, per, &o->optim, &so, &t->ts)) != DG_OK) return st;
    dg_node *outs[sizeof t->ts.outputs / sizeof *t->ts.outputs + 1];
    int n_out = t->ts.n_outputs;
    memcpy(outs, t->ts.outputs, (size_t)n_out * sizeof *outs);
    t->loss = t->ts.loss;
    if (t->ranks > 1) {
        if (!(t->loss = dg_all_reduce(g, t->ts.loss))) return dg_graph_status(g);
        outs[n_out++] = t->loss;
    }
    dg_plan_opts po = {0};
    dg_precision_plan_opts(o->precision, &po);
    if ((st = dg_dp_new(&t->dp, t->be, t->n, g, outs, n_out, &po)) != DG_OK) return st;
    po.share_leaves = dg_dp_plan(t->dp, 0);
    return dg_plan_new(&t->eval, g, t->be[0], &t->logits_t, 1, &po);
}

static void trainer_free(trainer *t) {
    dg_plan_free(t->eval);
    dg_dp_free(t->dp);
    dg_graph_free(t->g);
    for (int r = 0; r < t->n; r++) {
        dg_backend_release(t->be[r], t->dev_x[r]);
        dg_backend_release(t->be[r], t->dev_y[r]);
        dg_backend_release(t->be[r], t->dev_perm[r]);
    }
    dg_backend_host_free(t->be[0], t->host_x);
    dg_backend_host_free(t->be[0], t->host_y);
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

/* Global batch b into the replicas' inputs: replica r of rank k takes the
 * rows perm[b*batch + (k*n + r)*per ...] (per = batch / (n ranks) of
 * them), so the replicas of every rank together see the examples one
 * replica would. */
static dg_status feed(trainer *t, const dg_train_opts *o, const dg_dataset *train, int b) {
    int dim = train->rows * train->cols, per = o->batch / (t->n * t->ranks);
    dg_status st = DG_OK;
    for (int r = 0; r < t->n && st == DG_OK; r++) {
        dg_plan *p = dg_dp_plan(t->dp, r);
        size_t first = (size_t)b * o->batch + ((size_t)t->rank * t->n + r) * per;
        if (o->copy_batches) {
            const int32_t *idx = t->perm + first;
            for (int i = 0; i < per; i++) {
                memcpy(t->host_x + (size_t)i * dim, train->x + (size_t)idx[i] * dim, (size_t)dim * sizeof(float));
                t->host_y[i] = train->y[idx[i]];
            }
            st = dg_plan_set(p, t->ts.x, t->host_x, (size_t)per * dim * sizeof(float));
            if (st == DG_OK) st = dg_plan_set(p, t->ts.y, t->host_y, (size_t)per * sizeof(int32_t));
        } else {
            const int32_t *didx = (const int32_t *)t->dev_perm[r] + first;
            st = dg_backend_gather_rows(t->be[r], dg_plan_data(p, t->ts.x), t->dev_x[r], didx, per,
                                        (size_t)dim * sizeof(float));
            if (st == DG_OK)
                st = dg_backend_gather_rows(t->be[r], dg_plan_data(p, t->ts.y), t->dev_y[r], didx, per,
                                            sizeof(int32_t));
        }
    }
    return st;
}

/* The data set on every replica's backend, once; labels and the
 * permutation beside it. */
static dg_status upload_dataset(trainer *t, const dg_dataset *train, int n) {
    size_t xb = (size_t)n * train->rows * train->cols * sizeof(float), yb = (size_t)n * sizeof(int32_t);
    dg_status st = DG_OK;
    for (int r = 0; r < t->n && st == DG_OK; r++) {
        st = dg_backend_alloc(t->be[r], xb, &t->dev_x[r]);
        if (st == DG_OK) st = dg_backend_alloc(t->be[r], yb, &t->dev_y[r]);
        if (st == DG_OK) st = dg_backend_alloc(t->be[r], yb, &t->dev_perm[r]);
        if (st == DG_OK) st = dg_backend_upload(t->be[r], t->dev_x[r], train->x, xb);
        if (st == DG_OK) st = dg_backend_upload(t->be[r], t->dev_y[r], train->y, yb);
    }
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

static dg_status check_args(dg_backend *const *bes, int replicas, const dg_train_opts *o, const dg_dataset *train,
                            const dg_dataset *test) {
    if (!bes || !o) return dg__fail(DG_ERR_INVALID, "train: NULL %s", bes ? "options" : "backend");
    if (replicas < 1 || replicas > DG_DP_MAX_REPLICAS)
        return dg__fail(DG_ERR_INVALID, "train: %d replicas (1 to %d)", replicas, DG_DP_MAX_REPLICAS);
    for (int r = 0; r < replicas; r++)
        if (!bes[r]) {
            if (replicas == 1) return dg__fail(DG_ERR_INVALID, "train: NULL backend");
            return dg__fail(DG_ERR_INVALID, "train: NULL backend for replica %d", r);
        }
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
    /* slices of unequal size would weigh their examples unequally in the
     * mean gradient; dropping the rest would skip examples */
    if (o->batch % replicas)
        return dg__fail(DG_ERR_INVALID, "train: batch %d does not split evenly over %d replicas", o->batch,
                        replicas);
    int ranks = o->ranks > 1 ? o->ranks : 1;
    if (o->rank < 0 || o->rank >= ranks)
        return dg__fail(DG_ERR_INVALID, "train: rank %d of %d ranks", o->rank, ranks);
    if (ranks > 1 && replicas > 1)
        return dg__fail(DG_ERR_INVALID, "train: %d ranks of %d replicas each: a rank drives one backend (an "
                        "all-reduce spans the ranks or the replicas, not both)", ranks, replicas);
    if (o->batch % ranks)
        return dg__fail(DG_ERR_INVALID, "train: batch %d does not split evenly over %d ranks", o->batch, ranks);
    return DG_OK;
}

dg_status dg_train(dg_backend *be, const dg_train_opts *o, const dg_dataset *train, const dg_dataset *test,
                   dg_epoch_fn cb, void *arg, dg_epoch_stats *last) {
    return dg_train_multi(&be, 1, o, train, test, cb, arg, last);
}

dg_status dg_train_multi(dg_backend *const *bes, int replicas, const dg_train_opts *o, const dg_dataset *train,
                         const dg_dataset *test, dg_epoch_fn cb, void *arg, dg_epoch_stats *last) {
    dg_status st = check_args(bes, replicas, o, train, test);
    if (st != DG_OK) return st;
    int dim = train->rows * train->cols, n = o->subset > 0 && o->subset < train->n ? o->subset : train->n;
    int eb = test->n % 1000 == 0 ? 1000 : test->n; /* evaluation batch: divides the test set */
    trainer t = {.n = replicas, .rank = o->rank, .ranks = o->ranks > 1 ? o->ranks : 1};
    int per = o->batch / (replicas * t.ranks);
    memcpy(t.be, bes, (size_t)replicas * sizeof *bes);
    st = build(&t, o, eb);
    int classes = t.model.classes;
    if (st == DG_OK && (dg_shape_numel(t.model.in_shape) != dim || classes != train->classes))
        st = dg__fail(DG_ERR_INVALID, "train: model %s takes %lld features into %d classes; the data set has %d "
                      "features and %d classes", t.model.name, (long long)dg_shape_numel(t.model.in_shape), classes,
                      dim, train->classes);
    if (st == DG_OK && o->copy_batches)
        st = dg_backend_host_alloc(t.be[0], (size_t)per * dim * sizeof(float), (void **)&t.host_x);
    if (st == DG_OK && o->copy_batches)
        st = dg_backend_host_alloc(t.be[0], (size_t)per * sizeof(int32_t), (void **)&t.host_y);
    t.perm = malloc((size_t)n * sizeof(int32_t));
    t.logits = malloc((size_t)eb * classes * sizeof(float));
    if (st == DG_OK && (!t.perm || !t.logits)) st = dg__fail(DG_ERR_OOM, "train: out of memory");
    if (st == DG_OK && !o->copy_batches) st = upload_dataset(&t, train, n);
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
        for (int r = 0; r < replicas && st == DG_OK && !o->copy_batches; r++)
            st = dg_backend_upload(t.be[r], t.dev_perm[r], t.perm, (size_t)n * sizeof(int32_t));
        for (int b = 0; b < steps && st == DG_OK; b++) {
            st = feed(&t, o, train, b);
            if (st == DG_OK) st = dg_dp_run(t.dp); /* queued: the host feeds the next batch meanwhile */
            if (st == DG_OK && (b % every == 0 || b == steps - 1)) {
                float l;
                st = dg_dp_mean(t.dp, t.loss, &l);
                loss_sum += l;
                loss_n++;
            }
        }
        if (st == DG_OK) st = dg_dp_sync(t.dp);
        s.epoch = e;
        s.epoch_s = dg__monotonic_s() - t0;
        s.total_s += s.epoch_s;
        s.train_loss = loss_n ? loss_sum / loss_n : NAN;
        if (st == DG_OK) st = evaluate(&t, test, eb, classes, &s.test_acc);
        if (st == DG_OK && cb) cb(&s, arg);
    }
    if (last) *last = s;
    trainer_free(&t);
    return st;
}
