/* lm_trainer.c: the language model's training loop (lm_trainer.h). */
#include "lm_trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../clock_internal.h"
#include "../plan.h"
#include "../rng.h"
#include "../status_internal.h"
#include "train_step.h"

typedef struct lm_trainer {
    dg_graph     *g;
    dg_model      model;
    dg_train_step ts;
    dg_node      *xe, *ye, *loss_e;  /* the held-out forward and loss       */
    dg_plan      *step, *eval;
    int32_t      *x, *y;             /* one batch of windows on the host   */
} lm_trainer;

static dg_status build(lm_trainer *t, dg_backend *be, const dg_lm_train_opts *o, const dg_charlm_cfg *cfg) {
    if (!(t->g = dg_graph_new())) return dg__fail(DG_ERR_OOM, "lm train: out of memory");
    dg_status st = dg_charlm_new(t->g, cfg, o->seed, &t->model);
    if (st != DG_OK) return st;
    t->xe = dg_input_i32(t->g, "x_eval", DG_SHAPE(o->batch, cfg->context));
    t->ye = dg_input_i32(t->g, "y_eval", DG_SHAPE(o->batch, cfg->context));
    dg_forward_mode eval_mode = {.compute = dg_precision_dtype(o->precision)}; /* the step's products */
    t->loss_e = dg_softmax_cross_entropy(t->g, dg_model_forward(t->g, &t->model, t->xe, &eval_mode), t->ye);
    if (!t->loss_e) return dg_graph_status(t->g);
    const dg_train_step_opts so = {.precision = o->precision};
    if ((st = dg_train_step_build_opts(t->g, &t->model, o->batch, &o->optim, &so, &t->ts)) != DG_OK) return st;
    dg_plan_opts po = {0};
    dg_precision_plan_opts(o->precision, &po);
    if ((st = dg_plan_new(&t->step, t->g, be, t->ts.outputs, t->ts.n_outputs, &po)) != DG_OK) return st;
    po.share_leaves = t->step;
    return dg_plan_new(&t->eval, t->g, be, &t->loss_e, 1, &po);
}

/* window i of the batch starts at starts[i]: x = ids[s .. s+T), y = ids[s+1 .. s+T] */
static void fill_windows(const lm_trainer *t, const int32_t *ids, const int64_t *starts, int batch, int ctx) {
    for (int i = 0; i < batch; i++) {
        memcpy(t->x + (size_t)i * ctx, ids + starts[i], (size_t)ctx * sizeof *t->x);
        memcpy(t->y + (size_t)i * ctx, ids + starts[i] + 1, (size_t)ctx * sizeof *t->y);
    }
}

static dg_status run_batch(dg_plan *p, dg_node *x, dg_node *y, dg_node *loss, const lm_trainer *t, size_t bytes,
                           float *out) {
    dg_status st = dg_plan_set(p, x, t->x, bytes);
    if (st == DG_OK) st = dg_plan_set(p, y, t->y, bytes);
    if (st == DG_OK) st = dg_plan_run(p);
    if (st == DG_OK) st = dg_plan_get(p, loss, out, sizeof *out);
    return st;
}

/* the mean loss over eval_batches batches of windows evenly spaced over
 * the held-out part [from, from + len) */
static dg_status evaluate(lm_trainer *t, const dg_lm_train_opts *o, const dg_text *text, int64_t from, int64_t len,
                          int ctx, double *loss) {
    int n = o->eval_batches * o->batch;
    int64_t span = len - ctx - 1, starts[1024];
    double sum = 0;
    dg_status st = DG_OK;
    for (int b = 0; b < o->eval_batches && st == DG_OK; b++) {
        for (int i = 0; i < o->batch; i++)
            starts[i] = from + (n > 1 ? span * (int64_t)(b * o->batch + i) / (n - 1) : 0);
        fill_windows(t, text->ids, starts, o->batch, ctx);
        float l;
        st = run_batch(t->eval, t->xe, t->ye, t->loss_e, t, (size_t)o->batch * ctx * sizeof(int32_t), &l);
        sum += l;
    }
    *loss = sum / o->eval_batches;
    return st;
}

dg_status dg_lm_train(dg_backend *be, const dg_lm_train_opts *o, const dg_text *text, dg_lm_fn cb, void *arg,
                      dg_lm_stats *last, double *first_loss) {
    if (!be || !o || !text || !text->ids)
        return dg__fail(DG_ERR_INVALID, "lm train: NULL %s", !be ? "backend" : !o ? "options" : "text");
    if (o->steps < 1 || o->batch < 1 || o->batch > 1024 || o->eval_every < 1 || o->eval_batches < 1)
        return dg__fail(DG_ERR_INVALID, "lm train: steps %d, batch %d (1 to 1024), eval every %d and eval batches "
                        "%d must be >= 1", o->steps, o->batch, o->eval_every, o->eval_batches);
    dg_charlm_cfg cfg = o->model;
    cfg.vocab = text->vocab;
    int64_t n_train = text->n * 9 / 10, n_val = text->n - n_train;
    if (cfg.context < 1 || n_val < (int64_t)cfg.context + 2)
        return dg__fail(DG_ERR_INVALID, "lm train: a text of %lld characters is too short for windows of %d "
                        "(its held-out tenth needs context + 2)", (long long)text->n, cfg.context);
    lm_trainer t = {0};
    dg_status st = build(&t, be, o, &cfg);
    size_t ids = (size_t)o->batch * (size_t)cfg.context;
    t.x = malloc(ids * sizeof *t.x);
    t.y = malloc(ids * sizeof *t.y);
    if (st == DG_OK && (!t.x || !t.y)) st = dg__fail(DG_ERR_OOM, "lm train: out of memory");
    dg_rng rng = dg_rng_new(o->seed ^ 0x7e47u);
    dg_lm_stats s = {0};
    double loss_sum = 0;
    int loss_n = 0;
    int64_t starts[1024];
    for (int step = 1; step <= o->steps && st == DG_OK; step++) {
        for (int i = 0; i < o->batch; i++)
            starts[i] = (int64_t)(dg_rng_u64(&rng) % (uint64_t)(n_train - cfg.context));
        fill_windows(&t, text->ids, starts, o->batch, cfg.context);
        double t0 = dg__monotonic_s();
        float l;
        st = run_batch(t.step, t.ts.x, t.ts.y, t.ts.loss, &t, ids * sizeof(int32_t), &l);
        s.train_s += dg__monotonic_s() - t0;
        if (st != DG_OK) break;
        if (step == 1 && first_loss) *first_loss = l;
        if (!isfinite(l)) {
            st = dg__fail(DG_ERR_INVALID, "lm train: the loss of step %d is %g (diverged: lower --lr)", step, (double)l);
            break;
        }
        loss_sum += l;
        loss_n++;
        if (step % o->eval_every && step != o->steps) continue;
        s.step = step;
        s.train_loss = loss_sum / loss_n;
        loss_sum = 0;
        loss_n = 0;
        st = evaluate(&t, o, text, n_train, n_val, cfg.context, &s.val_loss);
        if (st == DG_OK && cb) cb(&s, arg);
    }
    if (st == DG_OK && last) *last = s;
    dg_plan_free(t.eval);
    dg_plan_free(t.step);
    dg_graph_free(t.g);
    free(t.x);
    free(t.y);
    return st;
}
