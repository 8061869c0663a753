/* attention_graph.c: the attention sweep's tables, its graphs (composed
 * or fused, forward or forward + backward, in each precision), the FLOP
 * convention, the tolerances and the reduced check (the row's graph at
 * B=1, H=2, T'=min(T,128) against core/check/ref.c's float64 evaluation). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/autodiff.h"
#include "core/check/attention_check.h"
#include "core/check/error.h"
#include "core/check/ref.h"
#include "core/check/round.h"
#include "core/nn/model.h"
#include "core/nn/train_step.h"
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


/* ---- precisions ---- */

/* Each precision's tolerance, against float64 from the definition (the
 * sampled rows) and against ref_eval_stored (the reduced check) alike.
 *   fp32  ATT_CHECK_TOL (attention_check.h: 3.5e-6 measured at most).
 *   tf32  the GPU's composed rows: every product's operands rounded to 10
 *         fraction bits (u = 2^-11) inside the kernel, which neither
 *         reference does; 5e-3, bench/peers/torch_attention.py's TF32_TOL
 *         for the same products and softmax in PyTorch's math backend
 *         (measured there at most 1.1e-3 on an H200).
 *   bf16, fp16  att_check_tol (attention_check.h derives it: 3 units of
 *         roundoff over fp32's): the inputs are rounded to the dtype before
 *         either side sees them (att_fill_uniform), so the casts of q, k, v
 *         and dO are exact; what the sums lack is one rounding on each
 *         output's path (P before P v and P^T dO, dS before dS k and
 *         dS^T q: random signs, a fraction of u whatever T; measured on the
 *         2-core Xeon, CPU composed rows, T 64..1024: bf16 at most 2.3e-3,
 *         0.59 u, fp16 3.3e-4, 0.67 u) and, for the fused form, which
 *         stores its output in the dtype, one unit in the last place where
 *         the reduced check's rounding of the same node falls the other
 *         way (2 u). A 16-bit product 2% off (5 u in bf16) fails it, and a
 *         row that ran float32 in place of bf16 reads 1e-6 (the tests). */
#define ATT_TF32_TOL 5e-3

double att_tol(dg_precision p) {
    switch (p) {
    case DG_PREC_FP32: break;
    case DG_PREC_TF32: return ATT_TF32_TOL;
    case DG_PREC_BF16: case DG_PREC_FP16: return att_check_tol(dg_precision_dtype(p));
    }
    return ATT_CHECK_TOL;
}

const char *att_refusal(const att_backend *bb, bool fused, dg_precision p) {
    if (p == DG_PREC_TF32 && !bb->gpu) return "no TF32 on the CPU: its fp32 row is this one";
    if (fused && p == DG_PREC_TF32)
        return "the fused kernel's products are 3xTF32, fp32-accurate whatever TF32: its fp32 row is this one";
    return NULL;
}

dg_plan_opts att_plan_opts(const att_backend *bb, dg_precision p) {
    dg_plan_opts o = {.no_replay = !bb->replay};
    dg_precision_plan_opts(p, &o);
    return o;
}

/* ---- graphs ---- */

dg_status att_graph_build(att_graph *ag, const att_dims *d, bool fused, bool backward, dg_precision p) {
    *ag = (att_graph){.n_in = backward ? 4 : 3, .n_out = backward ? 3 : 1};
    if (!(ag->g = dg_graph_new())) return dg_fail(DG_ERR_OOM, "attention sweep: out of memory for a graph");
    dg_graph *g = ag->g;
    static const char *const names[4] = {"q", "k", "v", "w"};
    for (int i = 0; i < ag->n_in; i++) ag->in[i] = dg_input(g, names[i], DG_SHAPE(d->b, d->h, d->t, d->dh));
    dg_node *q = ag->in[0], *k = ag->in[1], *v = ag->in[2];
    /* bf16, fp16: the fused op on q, k, v cast to the dtype
     * (dg_model_attention), its 16-bit output cast back; the composed
     * one's products' operands cast (dg_model_matmul) */
    const dg_forward_mode mode = {.compute = dg_precision_dtype(p)};
    dg_node *o = fused ? dg_cast(g, dg_model_attention(g, &mode, q, k, v, d->scale, d->causal), DG_F32)
                       : dg_model_matmul(g, &mode,
                                         dg_softmax_ex(g, dg_model_matmul(g, &mode, q, k, false, true), d->scale,
                                                       d->causal),
                                         v, false, false);
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
    if (att_graph_build(&ag, d, true, backward, DG_PREC_FP32) == DG_OK) {
        f = 0;
        for (int id = 0; id < dg_graph_size(ag.g); id++) {
            const dg_node *n = dg_graph_node(ag.g, id);
            if (n->op == DG_OP_ATTENTION || n->op == DG_OP_ATTENTION_BACKWARD) f += dg_attention_flops(n);
        }
    }
    dg_graph_free(ag.g);
    return f;
}

void att_fill_uniform(float *x, int64_t n, uint64_t seed, dg_precision p) {
    dg_rng r = dg_rng_new(seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    dg_check_round(dg_precision_dtype(p), x, NULL, (size_t)n);
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
 * spec), then the graph through ref_eval_stored (each cast's value rounded
 * to its dtype, as the graph stores it); the outputs into ref */
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
    if (st == DG_OK) st = ref_eval_stored(ag->g, n, v);
    for (int i = 0; st == DG_OK && i < ag->n_out; i++)
        memcpy(ref[i], v[ag->out[i]->id], (size_t)dg_node_numel(ag->out[i]) * sizeof(double));
    if (v) ref_free(v, n);
    free(v);
    return st;
}

void att_reduced_run(att_reduced_check *rc, dg_backend *be, const att_backend *bb, const att_case *c, bool fused,
                     bool backward, int64_t t, dg_precision p) {
    att_dims d = {ATT_CHECK_B, ATT_CHECK_H, t, c->dh, 1.0f / sqrtf((float)c->dh), c->causal};
    const int64_t n = d.b * d.h * d.t * d.dh;
    att_graph ag;
    dg_plan *pl = NULL;
    float *host[4] = {NULL}, *out = malloc(3 * (size_t)n * sizeof *out);
    double *ref[3] = {NULL}, *ref_mem = malloc(3 * (size_t)n * sizeof *ref_mem);
    *rc = (att_reduced_check){.done = true, .t = t, .err = NAN};
    dg_status st = att_graph_build(&ag, &d, fused, backward, p);
    if (st == DG_OK && (!out || !ref_mem)) st = dg_fail(DG_ERR_OOM, "attention check: out of host memory");
    for (int i = 0; i < ag.n_in && st == DG_OK; i++) {
        if (!(host[i] = malloc((size_t)n * sizeof(float)))) st = dg_fail(DG_ERR_OOM, "attention check: host memory");
        else att_fill_uniform(host[i], n, 7000u + 131u * (uint64_t)t + (uint64_t)i, p);
    }
    for (int i = 0; i < 3 && ref_mem; i++) ref[i] = ref_mem + i * n;
    dg_plan_opts po = att_plan_opts(bb, p);
    if (st == DG_OK) st = dg_plan_new(&pl, ag.g, be, ag.out, ag.n_out, &po);
    for (int i = 0; i < ag.n_in && st == DG_OK; i++) st = dg_plan_set(pl, ag.in[i], host[i], (size_t)n * sizeof(float));
    if (st == DG_OK) st = dg_plan_run(pl);
    if (st == DG_OK) st = dg_backend_sync(be);
    for (int i = 0; i < ag.n_out && st == DG_OK; i++) st = dg_plan_get(pl, ag.out[i], out + i * n, (size_t)n * 4);
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
        st = dg_plan_run(pl);
        rc->ms = 1e3 * (bench_now_s() - t0);
        rc->flops = att_flops(d.b, d.h, d.t, d.dh, d.causal, backward);
    }
    rc->st = st;
    if (st != DG_OK) snprintf(rc->why, sizeof rc->why, "check at %dx%dx%lld: %s", ATT_CHECK_B, ATT_CHECK_H, (long long)t,
                              dg_last_error());
    dg_plan_free(pl);
    dg_graph_free(ag.g);
    for (int i = 0; i < 4; i++) free(host[i]);
    free(out);
    free(ref_mem);
}
