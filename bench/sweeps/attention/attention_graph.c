/* attention_graph.c: the attention sweep's tables, its graphs (composed
 * or fused, forward or forward + backward), the FLOP convention and the
 * reduced check (the row's graph at B=1, H=2, T'=min(T,128) against
 * core/check/ref.c's float64 evaluation). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/autodiff.h"
#include "core/check/attention_check.h"
#include "core/check/error.h"
#include "core/check/ref.h"
#include "core/plan.h"
#include "core/rng.h"
#include "core/status.h"
#include "runner/sweep.h"
#include "sweeps/attention/sweep_attention.h"

const att_case att_cases[] = {
    {"full", 8, 64, false, false},          {"causal", 8, 64, true, false},
    {"full-h16d32", 16, 32, false, true},   {"causal-h16d32", 16, 32, true, true},
    {"full-h4d128", 4, 128, false, true},   {"causal-h4d128", 4, 128, true, true},
};

const att_backend att_backends[ATT_N_BACKENDS] = {{"cpu", false, true}, {"gpu", true, false}, {"gpu-graph", true, true}};
const char *const att_forms[2] = {"composed", "fused"};
const char *const att_passes[2] = {"fwd", "fwdbwd"};

void att_impl_name(int i, char *buf, size_t n) {
    snprintf(buf, n, "%s-%s-%s", att_backends[i / 4].name, att_forms[i / 2 % 2], att_passes[i % 2]);
}

double att_flops(int64_t b, int64_t h, int64_t t, int64_t dh, bool causal, bool backward) {
    double kept = causal ? ((double)t + 1) / (2.0 * (double)t) : 1.0;
    return (backward ? 14.0 : 4.0) * (double)b * (double)h * (double)t * (double)t * (double)dh * kept;
}


/* ---- graphs ---- */

dg_status att_graph_build(att_graph *ag, const att_dims *d, bool fused, bool backward) {
    *ag = (att_graph){.n_in = backward ? 4 : 3, .n_out = backward ? 3 : 1};
    if (!(ag->g = dg_graph_new())) return dg_fail(DG_ERR_OOM, "attention sweep: out of memory for a graph");
    dg_graph *g = ag->g;
    static const char *const names[4] = {"q", "k", "v", "w"};
    for (int i = 0; i < ag->n_in; i++) ag->in[i] = dg_input(g, names[i], DG_SHAPE(d->b, d->h, d->t, d->dh));
    dg_node *q = ag->in[0], *k = ag->in[1], *v = ag->in[2];
    dg_node *o = fused ? dg_attention(g, q, k, v, d->scale, d->causal)
                       : dg_matmul(g, dg_softmax_ex(g, dg_matmul(g, q, k, false, true), d->scale, d->causal), v,
                                   false, false);
    if (!backward) {
        ag->out[0] = o;
        return dg_graph_status(g);
    }
    dg_node *loss = dg_sum(g, dg_mul(g, o, ag->in[3]), DG_ALL_AXES, false);
    dg_status st = dg_graph_status(g);
    return st == DG_OK ? dg_grad(g, loss, ag->in, 3, ag->out) : st;
}

double att_core_flops(const att_dims *d, bool backward) {
    att_graph ag;
    double f = NAN;
    if (att_graph_build(&ag, d, true, backward) == DG_OK) {
        f = 0;
        for (int id = 0; id < dg_graph_size(ag.g); id++) {
            const dg_node *n = dg_graph_node(ag.g, id);
            if (n->op == DG_OP_ATTENTION || n->op == DG_OP_ATTENTION_BACKWARD) f += dg_attention_flops(n);
        }
    }
    dg_graph_free(ag.g);
    return f;
}

void att_fill_uniform(float *x, int64_t n, uint64_t seed) {
    dg_rng r = dg_rng_new(seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(2 * dg_rng_uniform(&r) - 1);
}

/* max |x - ref| / max |ref|, floored at the output's scale (error.h) */
static double max_err(const float *x, const double *ref, int64_t n, double scale) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)x[i] - ref[i]);
        num = fmax(num, isnan(e) ? INFINITY : e);
        den = fmax(den, fabs(ref[i]));
    }
    return dg_check_rel_err(num, den, scale);
}

/* ---- the reduced check: the row's graph at B=1, H=2, T'=min(T,128) ---- */

/* float64 of every leaf (the inputs from host, others from their init
 * spec), then the graph through ref_eval; the outputs into ref */
static dg_status reduced_ref(const att_graph *ag, float *const *host, double **ref) {
    int n = dg_graph_size(ag->g);
    double **v = calloc((size_t)n, sizeof *v);
    dg_status st = v ? DG_OK : dg_fail(DG_ERR_OOM, "attention check: out of host memory");
    for (int id = 0; id < n && st == DG_OK; id++) {
        const dg_node *nd = dg_graph_node(ag->g, id);
        if (nd->op != DG_OP_LEAF) continue;
        int64_t cnt = dg_node_numel(nd);
        float *tmp = NULL;
        const float *src = NULL;
        for (int i = 0; i < ag->n_in; i++)
            if (nd == ag->in[i]) src = host[i];
        if (!src && (tmp = malloc((size_t)cnt * sizeof *tmp))) st = dg_init_fill(nd->init, tmp, cnt);
        v[id] = malloc((size_t)cnt * sizeof(double));
        if (!v[id] || (!src && !tmp)) st = dg_fail(DG_ERR_OOM, "attention check: out of host memory");
        for (int64_t j = 0; st == DG_OK && j < cnt; j++) v[id][j] = src ? src[j] : tmp[j];
        free(tmp);
    }
    if (st == DG_OK) st = ref_eval(ag->g, n, v);
    for (int i = 0; st == DG_OK && i < ag->n_out; i++)
        memcpy(ref[i], v[ag->out[i]->id], (size_t)dg_node_numel(ag->out[i]) * sizeof(double));
    if (v) ref_free(v, n);
    free(v);
    return st;
}

void att_reduced_run(att_reduced_check *rc, dg_backend *be, const att_backend *bb, const att_case *c, bool fused,
                        bool backward, int64_t t) {
    att_dims d = {ATT_CHECK_B, ATT_CHECK_H, t, c->dh, 1.0f / sqrtf((float)c->dh), c->causal};
    const int64_t n = d.b * d.h * d.t * d.dh;
    att_graph ag;
    dg_plan *p = NULL;
    float *host[4] = {NULL}, *out = malloc(3 * (size_t)n * sizeof *out);
    double *ref[3] = {NULL}, *ref_mem = malloc(3 * (size_t)n * sizeof *ref_mem);
    *rc = (att_reduced_check){.done = true, .t = t, .err = NAN};
    dg_status st = att_graph_build(&ag, &d, fused, backward);
    if (st == DG_OK && (!out || !ref_mem)) st = dg_fail(DG_ERR_OOM, "attention check: out of host memory");
    for (int i = 0; i < ag.n_in && st == DG_OK; i++) {
        if (!(host[i] = malloc((size_t)n * sizeof(float)))) st = dg_fail(DG_ERR_OOM, "attention check: host memory");
        else att_fill_uniform(host[i], n, 7000u + 131u * (uint64_t)t + (uint64_t)i);
    }
    for (int i = 0; i < 3 && ref_mem; i++) ref[i] = ref_mem + i * n;
    if (st == DG_OK) st = dg_plan_new(&p, ag.g, be, ag.out, ag.n_out, &(dg_plan_opts){.no_replay = !bb->replay});
    for (int i = 0; i < ag.n_in && st == DG_OK; i++) st = dg_plan_set(p, ag.in[i], host[i], (size_t)n * sizeof(float));
    if (st == DG_OK) st = dg_plan_run(p);
    if (st == DG_OK) st = dg_backend_sync(be);
    for (int i = 0; i < ag.n_out && st == DG_OK; i++) st = dg_plan_get(p, ag.out[i], out + i * n, (size_t)n * 4);
    if (st == DG_OK) st = reduced_ref(&ag, host, ref);
    if (st == DG_OK) {
        /* the outputs: o, or dq, dk, dv; w (host[3], NULL forward) is the loss's weight, dO */
        double scale[ATT_N_OUT];
        att_scales(&d, host[0], host[1], host[2], host[3], n, scale);
        rc->err = 0;
        for (int i = 0; i < ag.n_out; i++)
            rc->err = fmax(rc->err, max_err(out + i * n, ref[i], n, scale[ag.n_out == 3 ? ATT_DQ + i : ATT_O]));
        if (isnan(rc->err)) rc->err = INFINITY;
    }
    if (st == DG_OK && !bb->gpu) { /* the CPU's first prediction: a warm run */
        double t0 = bench_now_s();
        st = dg_plan_run(p);
        rc->ms = 1e3 * (bench_now_s() - t0);
        rc->flops = att_flops(d.b, d.h, d.t, d.dh, d.causal, backward);
    }
    rc->st = st;
    if (st != DG_OK) snprintf(rc->why, sizeof rc->why, "check at %dx%dx%lld: %s", ATT_CHECK_B, ATT_CHECK_H, (long long)t,
                              dg_last_error());
    dg_plan_free(p);
    dg_graph_free(ag.g);
    for (int i = 0; i < 4; i++) free(host[i]);
    free(out);
    free(ref_mem);
}
