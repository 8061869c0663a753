/* check.c: float64 references shared by the training-step sweeps, for any
 * model and optimizer (bench_step_spec). */
#include "core/check/step_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/error.h"
#include "core/check/ref.h"
#include "core/rng.h"
#include "core/status.h"

/* a leaf's float32 value: the input, or its init spec */
static dg_status leaf_values(const bench_step *s, const dg_node *nd, const void *x, const int32_t *y, double *out) {
    int64_t cnt = dg_node_numel(nd);
    const int32_t *ints = nd == s->ts.y ? y : nd == s->ts.x && nd->dtype == DG_I32 ? x : NULL;
    if (ints) {
        for (int64_t j = 0; j < cnt; j++) out[j] = (double)ints[j];
        return DG_OK;
    }
    float *tmp = malloc((size_t)cnt * sizeof *tmp);
    if (!tmp) return dg_fail(DG_ERR_OOM, "bench: out of memory for the reference");
    if (nd == s->ts.x) memcpy(tmp, x, (size_t)cnt * sizeof *tmp);
    else dg_init_fill(nd->init, tmp, cnt);
    for (int64_t j = 0; j < cnt; j++) out[j] = tmp[j];
    free(tmp);
    return DG_OK;
}

/* the node of g that writes parameter w's next value */
static const dg_node *update_of(const dg_graph *g, const dg_node *w) {
    for (int id = dg_graph_size(g) - 1; id >= 0; id--) {
        const dg_node *nd = dg_graph_node(g, id);
        if (dg_op_info_get(nd->op)->role == DG_ROLE_UPDATE && nd->n_in > 0 && nd->in[0] == w) return nd;
    }
    return NULL;
}

void bench_step_ref_free(bench_step_ref *ref) {
    for (int i = 0; i < ref->n_params + ref->n_state; i++) free(ref->delta[i]);
    for (int i = 0; i < ref->n_params; i++) free(ref->grad[i]);
    *ref = (bench_step_ref){.keep_grads = ref->keep_grads};
}

/* the model's persistent tensors in the reference's order: parameters, then state */
static const dg_node *tracked(const dg_model *m, int i) {
    return i < m->n_params ? m->params[i] : m->state[i - m->n_params];
}

dg_status bench_step_ref_run(const bench_step *s, const void *x, const int32_t *y, bench_step_ref *ref) {
    const dg_train_step *t = &s->ts;
    int n = dg_graph_size(s->g);
    double **v = calloc((size_t)n, sizeof *v);
    dg_status st = v ? DG_OK : dg_fail(DG_ERR_OOM, "bench: out of memory for the reference");
    for (int id = 0; id < n && st == DG_OK; id++) {
        const dg_node *nd = dg_graph_node(s->g, id);
        if (nd->op != DG_OP_LEAF) continue;
        v[id] = malloc((size_t)dg_node_numel(nd) * sizeof(double));
        st = v[id] ? leaf_values(s, nd, x, y, v[id]) : dg_fail(DG_ERR_OOM, "bench: out of memory for the reference");
    }
    *ref = (bench_step_ref){.keep_grads = ref->keep_grads, .n_params = s->model.n_params, .n_state = s->model.n_state};
    if (st == DG_OK) st = ref_eval_stored(s->g, n, v); /* a 16-bit policy's nodes as stored */
    if (st == DG_OK) ref->loss = v[t->loss->id][0];
    for (int i = 0; i < s->model.n_params && st == DG_OK && ref->keep_grads; i++) {
        size_t bytes = (size_t)dg_node_numel(t->grads[i]) * sizeof(double);
        if (!(ref->grad[i] = malloc(bytes))) st = dg_fail(DG_ERR_OOM, "bench: out of memory for the reference");
        else memcpy(ref->grad[i], v[t->grads[i]->id], bytes);
    }
    for (int i = 0; i < s->model.n_params && st == DG_OK; i++)
        if (!update_of(s->g, s->model.params[i]))
            st = dg_fail(DG_ERR_INVALID, "bench: parameter %d of the step has no update", i);
    /* the updates (optimizer and running statistics) wrote each tensor's
     * slot in place: its change is that slot less its init spec's values */
    for (int i = 0; i < ref->n_params + ref->n_state && st == DG_OK; i++) {
        const dg_node *w = tracked(&s->model, i);
        int64_t cnt = ref->numel[i] = dg_node_numel(w);
        ref->delta[i] = malloc((size_t)cnt * sizeof(double));
        st = ref->delta[i] ? leaf_values(s, w, x, y, ref->delta[i])
                           : dg_fail(DG_ERR_OOM, "bench: out of memory for the reference");
        for (int64_t j = 0; st == DG_OK && j < cnt; j++) ref->delta[i][j] = v[w->id][j] - ref->delta[i][j];
    }
    if (v) ref_free(v, n);
    free(v);
    if (st != DG_OK) bench_step_ref_free(ref);
    ref->done = st == DG_OK;
    return st;
}

/* || now - init - d_ref ||^2 and || d_ref ||^2 of tensor i into num, den */
static dg_status add_error(const dg_model *m, int i, bench_param_fetch fetch, void *arg, const bench_step_ref *ref,
                           double *num, double *den) {
    const dg_node *w = tracked(m, i);
    int64_t cnt = ref->numel[i];
    if (dg_node_numel(w) != cnt)
        return dg_fail(DG_ERR_INVALID, "bench: tensor '%s' of the step differs from the reference's", w->name);
    float *now = malloc((size_t)cnt * sizeof *now), *init = malloc((size_t)cnt * sizeof *init);
    dg_status st = now && init ? fetch(arg, w, now, (size_t)cnt * sizeof *now)
                               : dg_fail(DG_ERR_OOM, "bench: out of memory for the check");
    if (st == DG_OK) {
        dg_init_fill(w->init, init, cnt);
        for (int64_t j = 0; j < cnt; j++) {
            double d = (double)now[j] - init[j] - ref->delta[i][j];
            *num += isnan(d) ? INFINITY : d * d;
            *den += ref->delta[i][j] * ref->delta[i][j];
        }
    }
    free(now);
    free(init);
    return st;
}

dg_status bench_step_error(const dg_model *m, bench_param_fetch fetch, void *arg, float loss,
                           const bench_step_ref *ref, bench_step_tol tol, double *rel_err, bool *ok) {
    if (m->n_params != ref->n_params || m->n_state != ref->n_state)
        return dg_fail(DG_ERR_INVALID, "bench: the step's model has %d parameters and %d state tensors, the "
                        "reference's %d and %d", m->n_params, m->n_state, ref->n_params, ref->n_state);
    /* a fresh model's cross-entropy is about log(classes), never zero: no scale */
    double loss_err = dg_check_rel_err(fabs(loss - ref->loss), ref->loss, 0);
    double n1[2 * DG_MODEL_MAX_PARAMS], d1[2 * DG_MODEL_MAX_PARAMS];
    double num[2] = {0, 0}, den[2] = {0, 0}, cnt[2] = {0, 0}; /* [0] parameters, [1] running statistics */
    for (int i = 0; i < ref->n_params + ref->n_state; i++) {
        int k = i >= ref->n_params;
        n1[i] = d1[i] = 0;
        dg_status st = add_error(m, i, fetch, arg, ref, &n1[i], &d1[i]);
        if (st != DG_OK) return st;
        num[k] += n1[i];
        den[k] += d1[i];
        cnt[k] += (double)ref->numel[i];
    }
    /* One tensor's relative L2 error, its norm floored (error.h) at the
     * norm it would have with the mean square update of its kind: a tensor
     * whose reference update is zero (a parameter no example reached) is
     * measured against the step's updates, not against 1e-300. */
    double worst[2] = {0, 0};
    for (int i = 0; i < ref->n_params + ref->n_state; i++) {
        int k = i >= ref->n_params;
        double scale = sqrt((double)ref->numel[i] * den[k] / fmax(cnt[k], 1));
        worst[k] = fmax(worst[k], dg_check_rel_err(sqrt(n1[i]), sqrt(d1[i]), scale));
    }
    double update_err = tol.per_tensor ? worst[0] : dg_check_rel_err(sqrt(num[0]), sqrt(den[0]), 0);
    double state_err = tol.per_tensor ? worst[1] : dg_check_rel_err(sqrt(num[1]), sqrt(den[1]), 0);
    *rel_err = fmax(loss_err, fmax(update_err, state_err));
    *ok = loss_err <= tol.loss && update_err <= tol.update && state_err <= tol.state;
    if (!*ok) /* which part failed, for the row's note (dg_last_error); the call itself succeeded */
        (void)dg_fail(DG_ERR_INVALID, "loss %.3g (tol %.3g), updates %.3g (tol %.3g), running statistics %.3g (tol %.3g)",
                      loss_err, tol.loss, update_err, tol.update, state_err, tol.state);
    return DG_OK;
}

bench_step_spec bench_mlp_step(const dg_mlp_cfg *cfg) {
    return (bench_step_spec){dg_mlp_new, cfg, dg_optim_default(DG_OPTIM_ADAM, 1e-3f),
                             {BENCH_STEP_LOSS_TOL, BENCH_STEP_UPDATE_TOL, BENCH_STEP_UPDATE_TOL, false}, DG_PREC_FP32};
}

bench_step_spec bench_resnet_step(const dg_resnet_cfg *cfg) {
    dg_optim o = dg_optim_default(DG_OPTIM_MOMENTUM, 0.1f); /* momentum 0.9 */
    o.weight_decay = 5e-4f;
    return (bench_step_spec){dg_resnet18_new, cfg, o,
                             {BENCH_RESNET_LOSS_TOL, BENCH_RESNET_UPDATE_TOL, BENCH_RESNET_STATE_TOL, true}, DG_PREC_FP32};
}

bench_step_spec bench_charlm_step(const dg_charlm_cfg *cfg) {
    return (bench_step_spec){dg_charlm_new, cfg, dg_optim_default(DG_OPTIM_ADAM, 1e-3f),
                             {BENCH_STEP_LOSS_TOL, BENCH_STEP_UPDATE_TOL, BENCH_STEP_UPDATE_TOL, false}, DG_PREC_FP32};
}

dg_status bench_charlm_batch(int batch, int t, int vocab, uint64_t seed, int32_t **x, int32_t **y) {
    *x = malloc((size_t)batch * t * sizeof **x);
    *y = malloc((size_t)batch * t * sizeof **y);
    if (!*x || !*y) return dg_fail(DG_ERR_OOM, "bench: out of host memory for a char-LM batch of %d x %d", batch, t);
    dg_rng r = dg_rng_new(seed);
    for (int b = 0; b < batch; b++) {
        int32_t prev = (int32_t)(dg_rng_u64(&r) % (uint64_t)vocab);
        for (int i = 0; i < t; i++) {
            (*x)[(size_t)b * t + i] = prev;
            (*y)[(size_t)b * t + i] = prev = (int32_t)(dg_rng_u64(&r) % (uint64_t)vocab);
        }
    }
    return DG_OK;
}

dg_status bench_synth_batch(bench_batch_shape s, int batch, uint64_t seed, void **x, int32_t **y) {
    if (s.lm_vocab) {
        int32_t *ids = NULL;
        dg_status st = bench_charlm_batch(batch, s.lm_context, s.lm_vocab, seed, &ids, y);
        *x = ids;
        return st;
    }
    size_t n = (size_t)batch * s.example_floats;
    float *f = malloc(n * sizeof *f);
    *x = f;
    *y = malloc((size_t)batch * sizeof **y);
    if (!f || !*y) return dg_fail(DG_ERR_OOM, "bench: out of host memory for a batch of %d", batch);
    dg_rng r = dg_rng_new(seed);
    for (size_t i = 0; i < n; i++) f[i] = (float)dg_rng_uniform(&r);
    for (int i = 0; i < batch; i++) (*y)[i] = (int32_t)(dg_rng_u64(&r) % (uint64_t)s.classes);
    return DG_OK;
}

static dg_status plan_fetch(void *plan, const dg_node *param, float *host, size_t bytes) {
    return dg_plan_get(plan, param, host, bytes);
}

dg_status bench_step_build(bench_step *s, dg_backend *be, const bench_step_spec *spec, int batch, const void *x,
                           const int32_t *y, const dg_plan_opts *opts) {
    *s = (bench_step){0};
    s->g = dg_graph_new();
    dg_status st = s->g ? spec->model(s->g, spec->cfg, 1, &s->model) : dg_fail(DG_ERR_OOM, "bench: out of memory");
    if (st == DG_OK)
        st = dg_train_step_build_opts(s->g, &s->model, batch, &spec->optim,
                                      &(dg_train_step_opts){.precision = spec->precision}, &s->ts);
    dg_plan_opts po = opts ? *opts : (dg_plan_opts){0};
    if (spec->precision != DG_PREC_FP32) dg_precision_plan_opts(spec->precision, &po); /* fp32: the caller's tf32 */
    if (st == DG_OK) st = dg_plan_new(&s->p, s->g, be, s->ts.outputs, s->ts.n_outputs, &po);
    if (st == DG_OK) st = dg_plan_set(s->p, s->ts.x, x, dg_node_bytes(s->ts.x));
    if (st == DG_OK) st = dg_plan_set(s->p, s->ts.y, y, dg_node_bytes(s->ts.y));
    return st;
}

dg_status bench_step_check(bench_step *s, const bench_step_spec *spec, const void *x, const int32_t *y,
                           bench_step_ref *ref, double *rel_err, bool *ok) {
    float loss = NAN;
    *rel_err = NAN;
    *ok = false;
    dg_status st = dg_plan_run(s->p);
    if (st == DG_OK) st = dg_plan_get(s->p, s->ts.loss, &loss, sizeof loss);
    if (st == DG_OK && !ref->done) st = bench_step_ref_run(s, x, y, ref);
    if (st == DG_OK) st = bench_step_error(&s->model, plan_fetch, s->p, loss, ref, spec->tol, rel_err, ok);
    return st;
}

dg_status bench_step_new(bench_step *s, dg_backend *be, const bench_step_spec *spec, int batch, const void *x,
                         const int32_t *y, const dg_plan_opts *opts, bench_step_ref *ref, double *rel_err,
                         bool *ok) {
    *rel_err = NAN;
    *ok = false;
    dg_status st = bench_step_build(s, be, spec, batch, x, y, opts);
    return st == DG_OK ? bench_step_check(s, spec, x, y, ref, rel_err, ok) : st;
}

void bench_step_free(bench_step *s) {
    dg_plan_free(s->p);
    dg_graph_free(s->g);
    *s = (bench_step){0};
}
