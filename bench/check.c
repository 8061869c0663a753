/* check.c: float64 references shared by the training-step sweeps. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/ref.h"

/* a leaf's float32 value: the input, or its init spec */
static dg_status leaf_values(const bench_step *s, const dg_node *nd, const float *x, const int32_t *y, double *out) {
    int64_t cnt = dg_node_numel(nd);
    if (nd == s->ts.y) {
        for (int64_t j = 0; j < cnt; j++) out[j] = (double)y[j];
        return DG_OK;
    }
    float *tmp = malloc((size_t)cnt * sizeof *tmp);
    if (!tmp) return dg__fail(DG_ERR_OOM, "bench: out of memory for the reference");
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
    for (int i = 0; i < ref->n_params; i++) free(ref->delta[i]);
    *ref = (bench_step_ref){0};
}

dg_status bench_step_ref_run(const bench_step *s, const float *x, const int32_t *y, bench_step_ref *ref) {
    const dg_train_step *t = &s->ts;
    int n = dg_graph_size(s->g);
    double **v = calloc((size_t)n, sizeof *v);
    dg_status st = v ? DG_OK : dg__fail(DG_ERR_OOM, "bench: out of memory for the reference");
    for (int id = 0; id < n && st == DG_OK; id++) {
        const dg_node *nd = dg_graph_node(s->g, id);
        if (nd->op != DG_OP_LEAF) continue;
        v[id] = malloc((size_t)dg_node_numel(nd) * sizeof(double));
        st = v[id] ? leaf_values(s, nd, x, y, v[id]) : dg__fail(DG_ERR_OOM, "bench: out of memory for the reference");
    }
    *ref = (bench_step_ref){.n_params = s->model.n_params};
    if (st == DG_OK) st = ref_eval(s->g, n, v);
    if (st == DG_OK) ref->loss = v[t->loss->id][0];
    for (int i = 0; i < s->model.n_params && st == DG_OK; i++) {
        const dg_node *w = s->model.params[i], *upd = update_of(s->g, w);
        if (!upd) {
            st = dg__fail(DG_ERR_INVALID, "bench: parameter %d of the step has no update", i);
            break;
        }
        int64_t cnt = ref->numel[i] = dg_node_numel(w);
        /* the update wrote w's slot too: its initial value comes from its init spec again */
        ref->delta[i] = malloc((size_t)cnt * sizeof(double));
        st = ref->delta[i] ? leaf_values(s, w, x, y, ref->delta[i])
                           : dg__fail(DG_ERR_OOM, "bench: out of memory for the reference");
        for (int64_t j = 0; st == DG_OK && j < cnt; j++) ref->delta[i][j] = v[upd->id][j] - ref->delta[i][j];
    }
    if (v) ref_free(v, n);
    free(v);
    if (st != DG_OK) bench_step_ref_free(ref);
    ref->done = st == DG_OK;
    return st;
}

dg_status bench_step_error(const dg_model *m, bench_param_fetch fetch, void *arg, float loss,
                           const bench_step_ref *ref, double *rel_err, bool *ok) {
    double err = fabs(loss - ref->loss) / fmax(fabs(ref->loss), 1e-30), num = 0, den = 0;
    dg_status st = DG_OK;
    for (int i = 0; i < ref->n_params && st == DG_OK; i++) {
        const dg_node *w = m->params[i];
        int64_t cnt = ref->numel[i];
        if (m->n_params != ref->n_params || dg_node_numel(w) != cnt)
            return dg__fail(DG_ERR_INVALID, "bench: the step's parameters differ from the reference's");
        float *now = malloc((size_t)cnt * sizeof *now), *init = malloc((size_t)cnt * sizeof *init);
        st = now && init ? fetch(arg, w, now, (size_t)cnt * sizeof *now)
                         : dg__fail(DG_ERR_OOM, "bench: out of memory for the check");
        if (st == DG_OK) {
            dg_init_fill(w->init, init, cnt);
            for (int64_t j = 0; j < cnt; j++) {
                double d = (double)now[j] - init[j] - ref->delta[i][j];
                num += isnan(d) ? INFINITY : d * d;
                den += ref->delta[i][j] * ref->delta[i][j];
            }
        }
        free(now);
        free(init);
    }
    double loss_err = isnan(err) ? INFINITY : err, update_err = sqrt(num / fmax(den, 1e-300));
    if (st == DG_OK) {
        *rel_err = fmax(loss_err, update_err);
        *ok = loss_err <= BENCH_STEP_LOSS_TOL && update_err <= BENCH_STEP_UPDATE_TOL;
    }
    return st;
}

static dg_status plan_fetch(void *plan, const dg_node *param, float *host, size_t bytes) {
    return dg_plan_get(plan, param, host, bytes);
}

dg_status bench_step_new(bench_step *s, dg_backend *be, const dg_mlp_cfg *w, int batch, const float *x,
                         const int32_t *y, const dg_plan_opts *opts, bench_step_ref *ref, double *rel_err,
                         bool *ok) {
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    float loss = NAN;
    *s = (bench_step){0};
    *rel_err = NAN;
    *ok = false;
    s->g = dg_graph_new();
    dg_status st = s->g ? dg_mlp_new(s->g, w, 1, &s->model) : dg__fail(DG_ERR_OOM, "bench: out of memory");
    if (st == DG_OK) st = dg_train_step_build(s->g, &s->model, batch, &o, &s->ts);
    if (st == DG_OK) st = dg_plan_new(&s->p, s->g, be, s->ts.outputs, s->ts.n_outputs, opts);
    if (st == DG_OK) st = dg_plan_set(s->p, s->ts.x, x, dg_node_bytes(s->ts.x));
    if (st == DG_OK) st = dg_plan_set(s->p, s->ts.y, y, dg_node_bytes(s->ts.y));
    if (st == DG_OK) st = dg_plan_run(s->p);
    if (st == DG_OK) st = dg_plan_get(s->p, s->ts.loss, &loss, sizeof loss);
    if (st == DG_OK && !ref->done) st = bench_step_ref_run(s, x, y, ref);
    if (st == DG_OK) st = bench_step_error(&s->model, plan_fetch, s->p, loss, ref, rel_err, ok);
    return st;
}

void bench_step_free(bench_step *s) {
    dg_plan_free(s->p);
    dg_graph_free(s->g);
    *s = (bench_step){0};
}
