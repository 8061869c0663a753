#include "harness.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../rng.h"
#include "error.h"
#include "ref.h"

/* a uniform draw in [0, 1], except that elements 0 and 1 take the ends:
 * every edge input holds both bounds of its range */
static double at_ends(dg_rng *r, int64_t j) {
    double u = dg_rng_uniform(r);
    return j == 0 ? 0.0 : j == 1 ? 1.0 : u;
}

/* element j of an input of domain d whose rows (last axis) are `row` long */
static float draw(dg_rng *r, input_domain d, input_range b, int64_t j, int64_t row) {
    switch (d) {
    case DOM_ANY:   return (float)(4.0 * dg_rng_uniform(r) - 2.0);
    case DOM_AWAY0: return (float)((0.2 + 1.8 * dg_rng_uniform(r)) * (dg_rng_u64(r) & 1 ? 1 : -1));
    case DOM_POS:   return (float)(0.5 + 1.5 * dg_rng_uniform(r));
    case DOM_RANGE: return (float)(b.lo + (b.hi - b.lo) * at_ends(r, j));
    case DOM_DECADES: return (float)pow(10.0, b.lo + (b.hi - b.lo) * at_ends(r, j));
    case DOM_DECADES_SIGNED:
        return (float)(pow(10.0, b.lo + (b.hi - b.lo) * at_ends(r, j)) * (dg_rng_u64(r) & 1 ? 1 : -1));
    case DOM_EDGE_LOGITS: {
        const double edge[3] = {b.hi, -b.hi, 0.0};
        return (float)(j % row < 3 ? edge[j % row] : b.hi * (2.0 * dg_rng_uniform(r) - 1.0));
    }
    case DOM_LABELS: case DOM_DISTINCT: break; /* drawn for the whole input at once */
    }
    return 0.0f;
}

/* n values evenly spaced in [-2, 2] (centred in n equal cells), shuffled
 * (Fisher-Yates) */
static void draw_distinct(dg_rng *r, float *v, int64_t n) {
    for (int64_t j = 0; j < n; j++) v[j] = (float)(-2.0 + 4.0 * ((double)j + 0.5) / (double)n);
    for (int64_t j = n - 1; j > 0; j--) {
        int64_t k = (int64_t)(dg_rng_u64(r) % (uint64_t)(j + 1));
        float t = v[j];
        v[j] = v[k];
        v[k] = t;
    }
}

dg_status case_graph_new(case_graph *cg, const op_case *c, uint64_t seed) {
    return case_graph_new_at(cg, c, c->shape, seed);
}

dg_status case_graph_new_at(case_graph *cg, const op_case *c, const dg_shape *shape, uint64_t seed) {
    memset(cg, 0, sizeof *cg);
    cg->c = c;
    cg->seed = seed;
    cg->g = dg_graph_new();
    if (!cg->g) return DG_ERR_OOM;
    dg_rng rng = dg_rng_new(seed);
    for (int i = 0; i < c->n_in; i++) {
        const dg_init unused = {DG_INIT_FILL, 0, 0, 0};
        int64_t n = dg_shape_numel(shape[i]);
        cg->in_val[i] = malloc((size_t)n * sizeof(float));
        if (!cg->in_val[i]) return DG_ERR_OOM;
        if (c->dom[i] == DOM_LABELS) {
            /* an embedding's ids name rows of its table, labels classes */
            int64_t classes = c->op == DG_OP_EMBEDDING ? shape[0].d[0] : shape[0].d[shape[0].ndim - 1];
            int32_t *lab = (int32_t *)cg->in_val[i];
            for (int64_t j = 0; j < n; j++) lab[j] = (int32_t)(dg_rng_u64(&rng) % (uint64_t)classes);
            cg->in[i] = dg_input_i32(cg->g, "labels", shape[i]);
        } else {
            int64_t row = shape[i].d[shape[i].ndim - 1];
            if (c->dom[i] == DOM_DISTINCT)
                draw_distinct(&rng, cg->in_val[i], n);
            else
                for (int64_t j = 0; j < n; j++) cg->in_val[i][j] = draw(&rng, c->dom[i], c->range[i], j, row);
            cg->in[i] = dg_param(cg->g, "x", shape[i], unused); /* a param: differentiable */
        }
    }
    cg->out = op_case_build(cg->g, cg->in, c);
    if (!cg->out) return dg_graph_status(cg->g);
    int64_t n_out = dg_node_numel(cg->out);
    cg->w = dg_input(cg->g, "w", cg->out->shape);
    cg->w_val = malloc((size_t)n_out * sizeof(float));
    if (!cg->w_val) return DG_ERR_OOM;
    for (int64_t j = 0; j < n_out; j++) cg->w_val[j] = draw(&rng, DOM_ANY, (input_range){0, 0}, j, 1);
    cg->loss = dg_sum(cg->g, dg_mul(cg->g, cg->out, cg->w), DG_ALL_AXES, false);
    dg_node *wrt[OP_CASE_MAX_IN];
    int idx[OP_CASE_MAX_IN], n = 0;
    for (int i = 0; i < c->n_in; i++)
        if (c->dom[i] != DOM_LABELS) { idx[n] = i; wrt[n++] = cg->in[i]; }
    dg_node *grads[OP_CASE_MAX_IN];
    dg_status st = cg->loss ? dg_grad(cg->g, cg->loss, wrt, n, grads) : dg_graph_status(cg->g);
    if (st != DG_OK) return st;
    for (int j = 0; j < n; j++) cg->grad[idx[j]] = grads[j];
    return DG_OK;
}

void case_graph_free(case_graph *cg) {
    for (int i = 0; i < OP_CASE_MAX_IN; i++) free(cg->in_val[i]);
    free(cg->w_val);
    dg_graph_free(cg->g);
    memset(cg, 0, sizeof *cg);
}

dg_status case_run_planned(case_graph *cg, dg_backend *be, dg_plan **plan, case_result *r) {
    memset(r, 0, sizeof *r);
    *plan = NULL;
    dg_node *outs[1 + OP_CASE_MAX_IN] = {cg->out};
    int n_outs = 1;
    for (int i = 0; i < cg->c->n_in; i++)
        if (cg->grad[i]) outs[n_outs++] = cg->grad[i];
    dg_plan *p;
    dg_status st = dg_plan_new(&p, cg->g, be, outs, n_outs, NULL);
    if (st != DG_OK) return st;
    *plan = p;
    for (int i = 0; i < cg->c->n_in && st == DG_OK; i++)
        st = dg_plan_set(p, cg->in[i], cg->in_val[i], dg_node_bytes(cg->in[i]));
    if (st == DG_OK) st = dg_plan_set(p, cg->w, cg->w_val, dg_node_bytes(cg->w));
    if (st == DG_OK) st = dg_plan_run(p);
    r->n_out = dg_node_numel(cg->out);
    r->out = malloc(dg_node_bytes(cg->out));
    if (st == DG_OK) st = r->out ? dg_plan_get(p, cg->out, r->out, dg_node_bytes(cg->out)) : DG_ERR_OOM;
    for (int i = 0; i < cg->c->n_in && st == DG_OK; i++) {
        if (!cg->grad[i]) continue;
        r->n_grad[i] = dg_node_numel(cg->grad[i]);
        r->grad[i] = malloc(dg_node_bytes(cg->grad[i]));
        st = r->grad[i] ? dg_plan_get(p, cg->grad[i], r->grad[i], dg_node_bytes(cg->grad[i])) : DG_ERR_OOM;
    }
    return st;
}

dg_status case_run(case_graph *cg, dg_backend *be, case_result *r) {
    dg_plan *p;
    dg_status st = case_run_planned(cg, be, &p, r);
    dg_plan_free(p);
    return st;
}

double case_grad_scale(const case_graph *cg, const case_ref *ref) {
    double m = 0;
    for (int i = 0; i < cg->c->n_in; i++)
        for (int64_t j = 0; cg->grad[i] && j < dg_node_numel(cg->grad[i]); j++) m = fmax(m, fabs(ref->grad[i][j]));
    return m;
}

double case_max_rel_err(const case_graph *cg, const case_result *r, const case_ref *ref) {
    double err = cmp_f32(r->out, ref->out, r->n_out).max_rel, scale = case_grad_scale(cg, ref);
    for (int i = 0; i < cg->c->n_in; i++) {
        if (!cg->grad[i]) continue;
        double e = cmp_f32_scaled(r->grad[i], ref->grad[i], r->n_grad[i], scale).max_rel;
        err = e > err ? e : err;
    }
    return err;
}

void case_result_free(case_result *r) {
    free(r->out);
    for (int i = 0; i < OP_CASE_MAX_IN; i++) free(r->grad[i]);
    memset(r, 0, sizeof *r);
}

/* vals for every node up to `upto`, leaves filled from the case's values,
 * with input `pert` element `j` moved by h */
static double **ref_vals(const case_graph *cg, int upto, int pert, int64_t j, double h) {
    double **vals = calloc((size_t)upto, sizeof *vals);
    if (!vals) return NULL;
    for (int id = 0; id < upto; id++) {
        const dg_node *n = dg_graph_node(cg->g, id);
        if (n->op != DG_OP_LEAF) continue;
        int64_t cnt = dg_node_numel(n);
        vals[id] = malloc((size_t)cnt * sizeof(double));
        if (!vals[id]) { ref_free(vals, upto); free(vals); return NULL; }
        const float *src = NULL;
        bool labels = false;
        for (int i = 0; i < cg->c->n_in; i++)
            if (cg->in[i] == n) { src = cg->in_val[i]; labels = cg->c->dom[i] == DOM_LABELS; }
        if (n == cg->w) src = cg->w_val;
        for (int64_t k = 0; k < cnt; k++)
            vals[id][k] = !src ? (double)n->init.a /* constants: dloss = 1 */
                          : labels ? (double)((const int32_t *)src)[k] : (double)src[k];
        if (src && pert >= 0 && cg->in[pert] == n) vals[id][j] += h;
    }
    if (ref_eval(cg->g, upto, vals) != DG_OK) { ref_free(vals, upto); free(vals); return NULL; }
    return vals;
}

static double *dup_vals(const double *v, int64_t n) {
    double *d = malloc((size_t)n * sizeof *d);
    if (d) memcpy(d, v, (size_t)n * sizeof *d);
    return d;
}

dg_status case_ref_run(const case_graph *cg, case_ref *r) {
    memset(r, 0, sizeof *r);
    int upto = dg_graph_size(cg->g);
    double **vals = ref_vals(cg, upto, -1, 0, 0);
    if (!vals) return DG_ERR_OOM;
    r->out = dup_vals(vals[cg->out->id], dg_node_numel(cg->out));
    for (int i = 0; i < cg->c->n_in; i++)
        if (cg->grad[i]) r->grad[i] = dup_vals(vals[cg->grad[i]->id], dg_node_numel(cg->grad[i]));
    ref_free(vals, upto);
    free(vals);
    return DG_OK;
}

void case_ref_free(case_ref *r) {
    free(r->out);
    for (int i = 0; i < OP_CASE_MAX_IN; i++) free(r->grad[i]);
    memset(r, 0, sizeof *r);
}

double *case_finite_diff(const case_graph *cg, int i) {
    int64_t n = dg_node_numel(cg->in[i]);
    int upto = cg->loss->id + 1;
    double *d = malloc((size_t)n * sizeof *d);
    for (int64_t j = 0; d && j < n; j++) {
        double h = 1e-6 * fmax(1.0, fabs((double)cg->in_val[i][j]));
        double **hi = ref_vals(cg, upto, i, j, h), **lo = ref_vals(cg, upto, i, j, -h);
        d[j] = hi && lo ? (hi[cg->loss->id][0] - lo[cg->loss->id][0]) / (2 * h) : NAN;
        if (hi) { ref_free(hi, upto); free(hi); }
        if (lo) { ref_free(lo, upto); free(lo); }
    }
    return d;
}

static cmp_stats cmp_generic(const float *xf, const double *xd, const double *ref, const float *reff, int64_t n,
                             double scale) {
    cmp_stats s = {0};
    double max_ref = 0, max_err = -1, se = 0, sr = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = xf ? xf[i] : xd[i], y = ref ? ref[i] : reff[i], e = fabs(x - y);
        if (isnan(x) != isnan(y) || isinf(x) != isinf(y)) e = INFINITY;
        if (isnan(e)) e = INFINITY;
        max_ref = fmax(max_ref, fabs(y));
        se += e * e;
        sr += y * y;
        if (e > max_err) { max_err = e; s.worst = i; s.got = x; s.want = y; }
    }
    s.max_rel = dg_check_rel_err(fmax(max_err, 0), max_ref, scale);
    s.nmse = se / fmax(sr, 1e-300);
    return s;
}

cmp_stats cmp_f32(const float *x, const double *ref, int64_t n) { return cmp_generic(x, NULL, ref, NULL, n, 0); }
cmp_stats cmp_f32_scaled(const float *x, const double *ref, int64_t n, double scale) {
    return cmp_generic(x, NULL, ref, NULL, n, scale);
}

cmp_stats cmp_f32_floor(const float *x, const double *ref, int64_t n, double floor) {
    cmp_stats s = {0};
    double max_ref = 0, worst = -1, se = 0, sr = 0;
    for (int64_t i = 0; i < n; i++) max_ref = fmax(max_ref, fabs(ref[i]));
    const double lo = fmax(floor * max_ref, 1e-300);
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - ref[i], e = fabs(d) / fmax(fabs(ref[i]), lo);
        if (!(e <= DBL_MAX)) e = INFINITY; /* NaN or infinite where the reference is finite */
        if (e > worst) { worst = e; s.worst = i; s.got = x[i]; s.want = ref[i]; }
        se += d * d;
        sr += ref[i] * ref[i];
    }
    s.max_rel = worst;
    s.nmse = se / fmax(sr, 1e-300);
    return s;
}
cmp_stats cmp_f64(const double *x, const double *ref, int64_t n) { return cmp_generic(NULL, x, ref, NULL, n, 0); }
cmp_stats cmp_f32_f32(const float *x, const float *ref, int64_t n) { return cmp_generic(x, NULL, NULL, ref, n, 0); }

void ref_sgemm(bool ta, bool tb, int m, int n, int k, const float *A, const float *B, double *C) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < k; p++)
                acc += (double)(ta ? A[p * m + i] : A[i * k + p]) * (tb ? B[j * k + p] : B[p * n + j]);
            C[i * n + j] = acc;
        }
}
