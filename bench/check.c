/* check.c: float64 references shared by the training-step sweeps. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/ref.h"

/* float64 loss of the step graph for the given inputs (the updates do not
 * change the loss of the same run) */
double bench_ref_loss(const bench_step *s, const float *x, const int32_t *y) {
    const dg_train_step *t = &s->ts;
    int n = t->loss->id + 1;
    double **v = calloc((size_t)n, sizeof *v);
    double loss = NAN;
    bool ok = v != NULL;
    for (int id = 0; id < n && ok; id++) {
        const dg_node *nd = dg_graph_node(s->g, id);
        if (nd->op != DG_OP_LEAF) continue;
        int64_t cnt = dg_node_numel(nd);
        float *tmp = malloc((size_t)cnt * sizeof *tmp);
        ok = tmp && (v[id] = malloc((size_t)cnt * sizeof(double)));
        if (ok) {
            if (nd == t->x) memcpy(tmp, x, (size_t)cnt * 4);
            else if (nd != t->y) dg_init_fill(nd->init, tmp, cnt);
            for (int64_t j = 0; j < cnt; j++) v[id][j] = nd == t->y ? (double)y[j] : tmp[j];
        }
        free(tmp);
    }
    if (ok && ref_eval(s->g, n, v) == DG_OK) loss = v[t->loss->id][0];
    if (v) ref_free(v, n);
    free(v);
    return loss;
}

/* *want: the float64 loss, computed on the first call for this shape */
dg_status bench_step_new(bench_step *s, dg_backend *be, const dg_mlp_cfg *w, int batch, const float *x,
                         const int32_t *y, const dg_plan_opts *opts, double *want, double *rel_err) {
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    float loss = NAN;
    *s = (bench_step){0};
    *rel_err = NAN;
    s->g = dg_graph_new();
    dg_status st = s->g ? dg_mlp_new(s->g, w, 1, &s->model) : dg__fail(DG_ERR_OOM, "bench: out of memory");
    if (st == DG_OK) st = dg_train_step_build(s->g, &s->model, batch, &o, &s->ts);
    if (st == DG_OK) st = dg_plan_new(&s->p, s->g, be, s->ts.outputs, s->ts.n_outputs, opts);
    if (st == DG_OK) st = dg_plan_set(s->p, s->ts.x, x, dg_node_bytes(s->ts.x));
    if (st == DG_OK) st = dg_plan_set(s->p, s->ts.y, y, dg_node_bytes(s->ts.y));
    if (st == DG_OK) st = dg_plan_run(s->p);
    if (st == DG_OK) st = dg_plan_get(s->p, s->ts.loss, &loss, sizeof loss);
    if (st == DG_OK) {
        if (isnan(*want)) *want = bench_ref_loss(s, x, y);
        *rel_err = fabs(loss - *want) / fmax(fabs(*want), 1e-30);
    }
    return st;
}

void bench_step_free(bench_step *s) {
    dg_plan_free(s->p);
    dg_graph_free(s->g);
    *s = (bench_step){0};
}
