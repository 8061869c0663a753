/* ref_attention.c: float64 references of the attention family, written
 * for clarity: plain loops, the score matrix materialised per head. */
#include "ref_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../attrs.h"

/* ---- layer norm: x read as [rows, D] ---- */

static void row_stats(const double *x, int64_t d, double eps, double *mean, double *rstd) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < d; j++) m += x[j];
    m /= (double)d;
    for (int64_t j = 0; j < d; j++) v += (x[j] - m) * (x[j] - m);
    *mean = m;
    *rstd = 1 / sqrt(v / (double)d + eps);
}

void ref_layer_norm_stats(const dg_node *ln, double **vals, double *stats) {
    const double *x = vals[ln->in[0]->id];
    int64_t d = ln->shape.d[ln->shape.ndim - 1], rows = dg_node_numel(ln) / d;
    for (int64_t r = 0; r < rows; r++)
        row_stats(x + r * d, d, dg_attr_norm_of(ln).eps, &stats[r], &stats[rows + r]);
}

void ref_layer_norm(const dg_node *n, double **vals, double *y) {
    const double *x = vals[n->in[0]->id], *scale = vals[n->in[1]->id], *shift = vals[n->in[2]->id];
    int64_t d = n->shape.d[n->shape.ndim - 1], rows = dg_node_numel(n) / d;
    for (int64_t r = 0; r < rows; r++) {
        double m, rs;
        row_stats(x + r * d, d, dg_attr_norm_of(n).eps, &m, &rs);
        for (int64_t j = 0; j < d; j++) y[r * d + j] = scale[j] * (x[r * d + j] - m) * rs + shift[j];
    }
}

/* (dy, x, scale, stats) -> dx, or (dy, x, stats) -> dscale; the statistics
 * are recomputed from x, not read from the forward */
void ref_layer_norm_backward(const dg_node *n, double **vals, double *y, bool scale_grad) {
    const double *dy = vals[n->in[0]->id], *x = vals[n->in[1]->id];
    const double *scale = scale_grad ? NULL : vals[n->in[2]->id];
    const dg_node *xn = n->in[1];
    int64_t d = xn->shape.d[xn->shape.ndim - 1], rows = dg_node_numel(xn) / d;
    double eps = dg_attr_norm_of(n).eps;
    if (scale_grad) memset(y, 0, (size_t)d * sizeof *y);
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * d, *dr = dy + r * d;
        double m, rs, mg = 0, mgx = 0;
        row_stats(xr, d, eps, &m, &rs);
        if (scale_grad) {
            for (int64_t j = 0; j < d; j++) y[j] += dr[j] * (xr[j] - m) * rs;
            continue;
        }
        for (int64_t j = 0; j < d; j++) {
            mg += dr[j] * scale[j];
            mgx += dr[j] * scale[j] * (xr[j] - m) * rs;
        }
        mg /= (double)d;
        mgx /= (double)d;
        for (int64_t j = 0; j < d; j++) y[r * d + j] = rs * (dr[j] * scale[j] - mg - (xr[j] - m) * rs * mgx);
    }
}

/* ---- embedding ---- */

void ref_embedding(const dg_node *n, double **vals, double *y) {
    const double *table = vals[n->in[0]->id], *ids = vals[n->in[1]->id];
    int64_t v = n->in[0]->shape.d[0], d = n->in[0]->shape.d[1], rows = dg_node_numel(n->in[1]);
    for (int64_t p = 0; p < rows; p++) {
        int64_t id = (int64_t)ids[p];
        for (int64_t j = 0; j < d; j++) y[p * d + j] = id >= 0 && id < v ? table[id * d + j] : 0;
    }
}

void ref_embedding_backward(const dg_node *n, double **vals, double *y) {
    const double *dy = vals[n->in[0]->id], *ids = vals[n->in[1]->id];
    int64_t v = n->shape.d[0], d = n->shape.d[1], rows = dg_node_numel(n->in[1]);
    memset(y, 0, (size_t)(v * d) * sizeof *y);
    for (int64_t p = 0; p < rows; p++) {
        int64_t id = (int64_t)ids[p];
        if (id < 0 || id >= v) continue;
        for (int64_t j = 0; j < d; j++) y[id * d + j] += dy[p * d + j];
    }
}

/* ---- attention: per head, P [T,T] = softmax(scale q k^T, mask) ---- */

typedef struct head_dims { int64_t heads, t, dh; double scale; bool causal; } head_dims;

static head_dims head_dims_of(const dg_node *n, const dg_node *q) {
    dg_attr_attention a = dg_attr_attention_of(n);
    return (head_dims){q->shape.d[0] * q->shape.d[1], q->shape.d[2], q->shape.d[3], a.scale, a.causal};
}

/* P of one head and each row's log-sum-exp */
static void head_probs(const head_dims *h, const double *q, const double *k, double *p, double *lse) {
    for (int64_t i = 0; i < h->t; i++) {
        int64_t last = h->causal ? i : h->t - 1;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= last; j++) {
            double s = 0;
            for (int64_t c = 0; c < h->dh; c++) s += q[i * h->dh + c] * k[j * h->dh + c];
            p[i * h->t + j] = s * h->scale;
            if (p[i * h->t + j] > mx) mx = p[i * h->t + j];
        }
        for (int64_t j = 0; j <= last; j++) sum += exp(p[i * h->t + j] - mx);
        for (int64_t j = 0; j < h->t; j++) p[i * h->t + j] = j <= last ? exp(p[i * h->t + j] - mx) / sum : 0;
        if (lse) lse[i] = mx + log(sum);
    }
}

void ref_attention(const dg_node *n, double **vals, double *o, double *lse) {
    head_dims h = head_dims_of(n, n->in[0]);
    const double *q = vals[n->in[0]->id], *k = vals[n->in[1]->id], *v = vals[n->in[2]->id];
    double *p = malloc((size_t)(h.t * h.t) * sizeof *p);
    if (!p) return; /* the caller's buffers keep zeros: the comparison fails */
    int64_t m = h.t * h.dh;
    for (int64_t b = 0; b < h.heads; b++) {
        head_probs(&h, q + b * m, k + b * m, p, lse ? lse + b * h.t : NULL);
        if (!o) continue;
        for (int64_t i = 0; i < h.t; i++)
            for (int64_t c = 0; c < h.dh; c++) {
                double s = 0;
                for (int64_t j = 0; j < h.t; j++) s += p[i * h.t + j] * v[b * m + j * h.dh + c];
                o[b * m + i * h.dh + c] = s;
            }
    }
    free(p);
}

/* dP = dO V^T; dS = P * (dP - rowsum(dP * P)); dQ = scale dS K;
 * dK = scale dS^T Q; dV = P^T dO; added into dq, dk, dv (each may be NULL) */
void ref_attention_vjp(const dg_node *n, dg_shape qs, const double *q, const double *k, const double *v,
                       const double *dout, double *dq, double *dk, double *dv) {
    dg_attr_attention a = dg_attr_attention_of(n);
    head_dims h = {qs.d[0] * qs.d[1], qs.d[2], qs.d[3], a.scale, a.causal};
    double *p = malloc((size_t)(h.t * h.t) * sizeof *p), *ds = malloc((size_t)(h.t * h.t) * sizeof *ds);
    if (!p || !ds) { free(p); free(ds); return; }
    int64_t m = h.t * h.dh;
    for (int64_t b = 0; b < h.heads; b++) {
        const double *qb = q + b * m, *kb = k + b * m, *vb = v + b * m, *ob = dout + b * m;
        head_probs(&h, qb, kb, p, NULL);
        for (int64_t i = 0; i < h.t; i++) {
            double dot = 0;
            for (int64_t j = 0; j < h.t; j++) {
                double dp = 0;
                for (int64_t c = 0; c < h.dh; c++) dp += ob[i * h.dh + c] * vb[j * h.dh + c];
                ds[i * h.t + j] = dp;
                dot += dp * p[i * h.t + j];
            }
            for (int64_t j = 0; j < h.t; j++) ds[i * h.t + j] = p[i * h.t + j] * (ds[i * h.t + j] - dot);
        }
        for (int64_t i = 0; i < h.t; i++)
            for (int64_t c = 0; c < h.dh; c++) {
                double sq = 0, sk = 0, sv = 0;
                for (int64_t j = 0; j < h.t; j++) {
                    sq += ds[i * h.t + j] * kb[j * h.dh + c];
                    sk += ds[j * h.t + i] * qb[j * h.dh + c];
                    sv += p[j * h.t + i] * ob[j * h.dh + c];
                }
                if (dq) dq[b * m + i * h.dh + c] += h.scale * sq;
                if (dk) dk[b * m + i * h.dh + c] += h.scale * sk;
                if (dv) dv[b * m + i * h.dh + c] += sv;
            }
    }
    free(p);
    free(ds);
}

void ref_attention_backward(const dg_node *n, double **vals, double *dq, double *dk, double *dv) {
    const dg_node *q = n->in[1];
    size_t bytes = (size_t)dg_node_numel(q) * sizeof(double);
    if (dq) memset(dq, 0, bytes);
    if (dk) memset(dk, 0, bytes);
    if (dv) memset(dv, 0, bytes);
    ref_attention_vjp(n, q->shape, vals[q->id], vals[n->in[2]->id], vals[n->in[3]->id], vals[n->in[0]->id], dq, dk,
                      dv);
}
