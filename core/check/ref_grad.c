/* ref_grad.c: reverse mode over an op case's forward graph in float64, with
 * one hand-written vector-Jacobian product (VJP) per forward op. Each VJP is
 * derived from its op's definition (the formula stands beside it), never
 * from dg_grad's rules or the backward ops, and adds into its inputs'
 * adjoints, so a node used twice gets the sum of both contributions.
 * Forward values come from ref_eval. OpenMP only where every thread writes
 * its own elements; sums over broadcast axes run in order in one thread. */
#include "ref_grad.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../attrs.h"
#include "ref.h"
#include "ref_attention.h"
#include "../status_internal.h"

/* For each element i of the shape `out` (row-major), the offset of the
 * element it pairs with in a source tensor: stride[a] is the source's step
 * along output axis a, 0 along an axis the source is broadcast over or
 * lacks. One walk serves broadcasting, reductions and permutes. */
typedef struct index_map {
    dg_shape out;
    int64_t  stride[DG_MAX_DIMS];
} index_map;

/* src broadcast over out by numpy's rules (axes aligned at the last one) */
static index_map bcast_map(dg_shape out, dg_shape src) {
    index_map m = {.out = out};
    int64_t step = 1;
    for (int a = out.ndim - 1; a >= 0; a--) {
        int k = a - (out.ndim - src.ndim);
        m.stride[a] = k < 0 || src.d[k] == 1 ? 0 : step;
        if (k >= 0) step *= src.d[k];
    }
    return m;
}

/* out = permute(src): output axis a is src axis perm[a] */
static index_map permute_map(dg_shape out, dg_shape src, const int *perm) {
    int64_t src_stride[DG_MAX_DIMS], step = 1;
    for (int a = src.ndim - 1; a >= 0; a--) {
        src_stride[a] = step;
        step *= src.d[a];
    }
    index_map m = {.out = out};
    for (int a = 0; a < out.ndim; a++) m.stride[a] = src_stride[perm[a]];
    return m;
}

static int64_t map_offset(const index_map *m, int64_t i) {
    int64_t off = 0;
    for (int a = m->out.ndim - 1; a >= 0; a--) {
        off += i % m->out.d[a] * m->stride[a];
        i /= m->out.d[a];
    }
    return off;
}

/* dst[map(i)] += t[i] over m->out: sums t over the axes that dst (of shape
 * dst_shape) was broadcast along. Several i share a destination unless the
 * shapes are equal, so only that case runs in parallel. */
static void scatter_add(double *dst, dg_shape dst_shape, const double *t, const index_map *m) {
    int64_t n = dg_shape_numel(m->out);
    if (dg_shape_eq(dst_shape, m->out)) {
#pragma omp parallel for
        for (int64_t i = 0; i < n; i++) dst[i] += t[i];
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[map_offset(m, i)] += t[i];
}

/* The walk's state: forward values and adjoints (d loss / d node), one slot
 * per node up to the loss. adj[id] is non-NULL exactly for the nodes on a
 * path from a float input to the loss: those are the ones that need one. */
typedef struct backward {
    double **val, **adj;
} backward;

/* dz/du (wrt 0) or dz/dv (wrt 1) of z = u op v */
static double binary_partial(dg_op op, int wrt, double u, double v) {
    switch (op) {
    case DG_OP_ADD: return 1;
    case DG_OP_SUB: return wrt ? -1 : 1;
    case DG_OP_MUL: return wrt ? u : v;
    case DG_OP_DIV: return wrt ? -u / (v * v) : 1 / v;
    case DG_OPS_UNARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return NAN; /* not a binary op */
}

/* z = u op v with broadcasting: each operand's contribution g dz/dx is
 * formed at z's shape, then summed back to the operand's shape. */
static dg_status vjp_binary(backward *bw, const dg_node *n) {
    const dg_node *u = n->in[0], *v = n->in[1];
    const double *g = bw->adj[n->id], *U = bw->val[u->id], *V = bw->val[v->id];
    int64_t numel = dg_node_numel(n);
    index_map mu = bcast_map(n->shape, u->shape), mv = bcast_map(n->shape, v->shape);
    double *t = malloc((size_t)numel * sizeof *t);
    if (!t) return dg__fail(DG_ERR_OOM, "case_ref_own_grad: no memory for %s's contribution", dg_op_name(n->op));
    for (int wrt = 0; wrt < 2; wrt++) {
        const dg_node *x = wrt ? v : u;
        if (!bw->adj[x->id]) continue;
#pragma omp parallel for
        for (int64_t i = 0; i < numel; i++)
            t[i] = g[i] * binary_partial(n->op, wrt, U[map_offset(&mu, i)], V[map_offset(&mv, i)]);
        scatter_add(bw->adj[x->id], x->shape, t, wrt ? &mv : &mu);
    }
    free(t);
    return DG_OK;
}

/* dy/dx of the elementwise ops at x; c is the op's scalar (leaky: slope) */
static double unary_slope(dg_op op, double x, double c) {
    switch (op) {
    case DG_OP_NEG:        return -1;
    case DG_OP_ADD_SCALAR: return 1;
    case DG_OP_MUL_SCALAR: return c;
    case DG_OP_POW_SCALAR: return c * pow(x, c - 1);              /* d x^c       */
    case DG_OP_EXP:        return exp(x);
    case DG_OP_LOG:        return 1 / x;
    case DG_OP_SQRT:       return 0.5 / sqrt(x);
    case DG_OP_ABS:        return x > 0 ? 1 : x < 0 ? -1 : 0;
    case DG_OP_RELU:       return x > 0 ? 1 : 0;
    case DG_OP_LEAKY_RELU: return x > 0 ? 1 : c;
    case DG_OP_SIGMOID: {  /* d 1/(1+e^-x) = e^-x / (1+e^-x)^2, even in x */
        double e = exp(-fabs(x));
        return e / ((1 + e) * (1 + e));
    }
    case DG_OP_TANH:       return 1 / (cosh(x) * cosh(x));       /* sech^2 x    */
    case DG_OP_GELU: {
        /* gelu(x) = x/2 (1 + tanh(u)), u = k (x + 0.044715 x^3), k = sqrt(2/pi):
         * gelu' = (1 + tanh u)/2 + x/2 sech^2(u) k (1 + 3 * 0.044715 x^2) */
        const double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x);
        return 0.5 * (1 + tanh(u)) + 0.5 * x / (cosh(u) * cosh(u)) * k * (1 + 3 * 0.044715 * x * x);
    }
    case DG_OP_ERF:        return 2 / sqrt(M_PI) * exp(-x * x);
    case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return NAN; /* not a unary op */
}

static void vjp_unary(backward *bw, const dg_node *n) {
    const double *g = bw->adj[n->id], *x = bw->val[n->in[0]->id];
    double *dx = bw->adj[n->in[0]->id], c = dg_attr_scalar_or0(n);
    int64_t numel = dg_node_numel(n);
#pragma omp parallel for
    for (int64_t i = 0; i < numel; i++) dx[i] += g[i] * unary_slope(n->op, x[i], c);
}

/* C = op(A) op(B), per batch: op(A) [M,K], op(B) [K,N], C [M,N]; A is stored
 * [K,M] when transposed, B [N,K]. dop(A) = G op(B)^T and dop(B) = op(A)^T G,
 * written straight into A's and B's stored layouts. */
static void vjp_matmul(backward *bw, const dg_node *n) {
    const dg_node *a = n->in[0], *b = n->in[1];
    const dg_attr_matmul mm = dg_attr_matmul_of(n);
    const bool ta = mm.trans_a, tb = mm.trans_b;
    const int r = n->shape.ndim - 2;
    const int64_t batch = r ? n->shape.d[0] : 1, M = n->shape.d[r], N = n->shape.d[r + 1];
    const int64_t K = ta ? a->shape.d[r] : a->shape.d[r + 1];
    const double *G = bw->adj[n->id], *A = bw->val[a->id], *B = bw->val[b->id];
    double *dA = bw->adj[a->id], *dB = bw->adj[b->id];
#define OPA(t, i, k) A[(t) * M * K + (ta ? (k) * M + (i) : (i) * K + (k))]
#define OPB(t, k, j) B[(t) * K * N + (tb ? (j) * K + (k) : (k) * N + (j))]
    if (dA) {
#pragma omp parallel for collapse(2)
        for (int64_t t = 0; t < batch; t++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t k = 0; k < K; k++) {
                    double acc = 0;
                    for (int64_t j = 0; j < N; j++) acc += G[t * M * N + i * N + j] * OPB(t, k, j);
                    dA[t * M * K + (ta ? k * M + i : i * K + k)] += acc;
                }
    }
    if (dB) {
#pragma omp parallel for collapse(2)
        for (int64_t t = 0; t < batch; t++)
            for (int64_t k = 0; k < K; k++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = 0;
                    for (int64_t i = 0; i < M; i++) acc += OPA(t, i, k) * G[t * M * N + i * N + j];
                    dB[t * K * N + (tb ? j * K + k : k * N + j)] += acc;
                }
    }
#undef OPA
#undef OPB
}

/* y = permute(x) moves each element once: dx[src(i)] += g[i], a bijection */
static void vjp_permute(backward *bw, const dg_node *n) {
    const double *g = bw->adj[n->id];
    double *dx = bw->adj[n->in[0]->id];
    index_map m = permute_map(n->shape, n->in[0]->shape, dg_attr_permute_of(n).perm);
    int64_t numel = dg_node_numel(n);
#pragma omp parallel for
    for (int64_t i = 0; i < numel; i++) dx[map_offset(&m, i)] += g[i];
}

/* y = sum (or mean) of x over axes: every x element gets the g of the
 * output it went into (times 1/count for the mean). With or without
 * keepdims the outputs are laid out as the kept shape, x's shape with the
 * reduced axes set to 1. */
static void vjp_reduce(backward *bw, const dg_node *n) {
    const dg_node *x = n->in[0];
    const uint32_t axes = dg_attr_reduce_of(n).axes;
    dg_shape kept = x->shape;
    double count = 1;
    for (int a = 0; a < x->shape.ndim; a++)
        if (axes >> a & 1u) {
            count *= (double)x->shape.d[a];
            kept.d[a] = 1;
        }
    const double scale = n->op == DG_OP_MEAN ? 1 / count : 1;
    const double *g = bw->adj[n->id];
    double *dx = bw->adj[x->id];
    index_map m = bcast_map(x->shape, kept);
    int64_t numel = dg_node_numel(x);
#pragma omp parallel for
    for (int64_t i = 0; i < numel; i++) dx[i] += g[map_offset(&m, i)] * scale;
}

/* rows over the last axis: R rows of C */
static void rows_of(dg_shape s, int64_t *R, int64_t *C) {
    *C = s.d[s.ndim - 1];
    *R = dg_shape_numel(s) / *C;
}

/* y_j = e^{x_j} / sum_k e^{x_k}: dy_j/dx_i = y_j ([i=j] - y_i), so
 * dx_i = y_i (g_i - sum_j g_j y_j). log_softmax y_j = x_j - lse(x):
 * dy_j/dx_i = [i=j] - p_i with p = e^y, so dx_i = g_i - p_i sum_j g_j.
 * With a scale s (y = softmax(s x)) each dx_i gains the factor s; a masked
 * x_i does not reach y at all, and y_i = 0 there gives dx_i = 0. */
static void vjp_softmax(backward *bw, const dg_node *n) {
    const double *g = bw->adj[n->id], *y = bw->val[n->id];
    double *dx = bw->adj[n->in[0]->id];
    const bool log_form = n->op == DG_OP_LOG_SOFTMAX;
    const double scale = dg_attr_softmax_of(n).scale;
    int64_t R, C;
    rows_of(n->shape, &R, &C);
#pragma omp parallel for
    for (int64_t r = 0; r < R; r++) {
        const double *gr = g + r * C, *yr = y + r * C;
        double s = 0;
        for (int64_t j = 0; j < C; j++) s += log_form ? gr[j] : gr[j] * yr[j];
        for (int64_t i = 0; i < C; i++)
            dx[r * C + i] += scale * (log_form ? gr[i] - exp(yr[i]) * s : yr[i] * (gr[i] - s));
    }
}

/* L = (1/R) sum_r (log sum_j e^{x_rj} - x_{r,label_r}):
 * dL/dx_rj = (softmax(x_r)_j - [j = label_r]) / R, times the loss's g. */
static dg_status vjp_softmax_ce(backward *bw, const dg_node *n) {
    const dg_node *logits = n->in[0];
    const double *x = bw->val[logits->id], *label = bw->val[n->in[1]->id], g = bw->adj[n->id][0];
    double *dx = bw->adj[logits->id];
    int64_t R, C;
    rows_of(logits->shape, &R, &C);
    for (int64_t r = 0; r < R; r++)
        if (!(label[r] >= 0 && label[r] < (double)C))
            return dg__fail(DG_ERR_INVALID, "case_ref_own_grad: label %g of row %lld is not a class in [0, %lld)",
                            label[r], (long long)r, (long long)C);
#pragma omp parallel for
    for (int64_t r = 0; r < R; r++) {
        const double *xr = x + r * C;
        double mx = xr[0], z = 0;
        for (int64_t j = 1; j < C; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int64_t j = 0; j < C; j++) z += exp(xr[j] - mx);
        for (int64_t j = 0; j < C; j++)
            dx[r * C + j] += g * (exp(xr[j] - mx) / z - (j == (int64_t)label[r])) / (double)R;
    }
    return DG_OK;
}

/* The geometry of a convolution y = conv2d(x, w): x [N,C,H,W],
 * y [N,O,OH,OW], w [O,C/groups,KH,KW]; output
 * (oy, ox) meets tap (ki, kj) at x's row oy*sh - ph + ki*dh and column
 * ox*sw - pw + kj*dw. */
typedef struct conv_geom {
    int64_t n, c, h, w, o, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, cg, og;
} conv_geom;

static conv_geom conv_geom_of(const dg_node *y) {
    const dg_attr_conv a = dg_attr_conv_of(y);
    const dg_shape xs = y->in[0]->shape;
    conv_geom k = {.n = xs.d[0], .c = xs.d[1], .h = xs.d[2], .w = xs.d[3],
                   .o = y->shape.d[1], .oh = y->shape.d[2], .ow = y->shape.d[3],
                   .kh = a.kernel[0], .kw = a.kernel[1], .sh = a.stride[0], .sw = a.stride[1],
                   .ph = a.pad[0], .pw = a.pad[1], .dh = a.dilation[0], .dw = a.dilation[1]};
    k.cg = k.c / a.groups;
    k.og = k.o / a.groups;
    return k;
}

/* The product terms of conv2d's outputs y[b,o,.,.] (image b, output
 * channel o): each passes its output's g to the x element and the w
 * element it multiplied, weighted by the other (dx or dw NULL: not wanted). */
static void conv2d_terms(const conv_geom *k, int64_t b, int64_t o, const double *g, const double *x,
                         const double *w, double *dx, double *dw) {
    const int64_t first_channel = o / k->og * k->cg; /* of o's group in x */
    for (int64_t oy = 0; oy < k->oh; oy++)
        for (int64_t ox = 0; ox < k->ow; ox++) {
            const double gy = g[((b * k->o + o) * k->oh + oy) * k->ow + ox];
            for (int64_t ci = 0; ci < k->cg; ci++)
                for (int64_t ki = 0; ki < k->kh; ki++)
                    for (int64_t kj = 0; kj < k->kw; kj++) {
                        const int64_t iy = oy * k->sh - k->ph + ki * k->dh, ix = ox * k->sw - k->pw + kj * k->dw;
                        if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
                        const int64_t xi = ((b * k->c + first_channel + ci) * k->h + iy) * k->w + ix;
                        const int64_t wi = ((o * k->cg + ci) * k->kh + ki) * k->kw + kj;
                        if (dx) dx[xi] += gy * w[wi];
                        if (dw) dw[wi] += gy * x[xi];
                    }
        }
}

/* y[b,o,oy,ox] = sum over ci, ki, kj of x[b, g*cg + ci, iy, ix] w[o,ci,ki,kj]
 * (g = o / og, taps outside x zero) is linear in x and in w: each product
 * term gives x's element g(y) w and w's element g(y) x. Threads own images
 * for dx and output channels for dw. */
static void vjp_conv2d(backward *bw, const dg_node *y) {
    const conv_geom k = conv_geom_of(y);
    const double *g = bw->adj[y->id], *x = bw->val[y->in[0]->id], *w = bw->val[y->in[1]->id];
    double *dx = bw->adj[y->in[0]->id], *dw = bw->adj[y->in[1]->id];
    if (dx) {
#pragma omp parallel for
        for (int64_t b = 0; b < k.n; b++)
            for (int64_t o = 0; o < k.o; o++) conv2d_terms(&k, b, o, g, x, w, dx, NULL);
    }
    if (dw) {
#pragma omp parallel for
        for (int64_t o = 0; o < k.o; o++)
            for (int64_t b = 0; b < k.n; b++) conv2d_terms(&k, b, o, g, x, w, NULL, dw);
    }
}

/* y = s (x - mu) r + t per channel over its M values, mu = mean(x),
 * v = mean((x - mu)^2), r = (v + eps)^-1/2, xhat = (x - mu) r. By the chain
 * rule through xhat, v and mu (G = g s, the gradient reaching xhat):
 *   dL/dv  = sum G (x - mu) (-1/2) r^3
 *   dL/dmu = -r sum G + dL/dv (-2/M) sum (x - mu)
 *   dx     = G r + dL/dv 2 (x - mu) / M + dL/dmu / M
 *   ds     = sum g xhat,  dt = sum g */
static void vjp_batch_norm(backward *bw, const dg_node *y) {
    const dg_node *xn = y->in[0], *sn = y->in[1], *tn = y->in[2];
    const int64_t N = xn->shape.d[0], C = xn->shape.d[1], P = dg_node_numel(xn) / (N * C);
    const double eps = dg_attr_norm_of(y).eps, M = (double)(N * P);
    const double *g = bw->adj[y->id], *x = bw->val[xn->id], *s = bw->val[sn->id];
    double *dx = bw->adj[xn->id], *ds = bw->adj[sn->id], *dt = bw->adj[tn->id];
#pragma omp parallel for
    for (int64_t c = 0; c < C; c++) {
#define AT(n, q) (((n) * C + c) * P + (q))
        double mu = 0, v = 0, centred = 0, sum_g = 0, sum_g_xhat = 0, sum_G_centred = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t q = 0; q < P; q++) mu += x[AT(n, q)];
        mu /= M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t q = 0; q < P; q++) v += (x[AT(n, q)] - mu) * (x[AT(n, q)] - mu);
        v /= M;
        const double r = 1 / sqrt(v + eps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t q = 0; q < P; q++) {
                const double d = x[AT(n, q)] - mu, gi = g[AT(n, q)];
                centred += d;
                sum_g += gi;
                sum_g_xhat += gi * d * r;
                sum_G_centred += gi * s[c] * d;
            }
        const double d_v = sum_G_centred * -0.5 * r * r * r;
        const double d_mu = -r * s[c] * sum_g + d_v * -2 / M * centred;
        if (dx)
            for (int64_t n = 0; n < N; n++)
                for (int64_t q = 0; q < P; q++)
                    dx[AT(n, q)] += g[AT(n, q)] * s[c] * r + d_v * 2 * (x[AT(n, q)] - mu) / M + d_mu / M;
        if (ds) ds[c] += sum_g_xhat;
        if (dt) dt[c] += sum_g;
#undef AT
    }
}

/* y = s (x - mu) r + t per row of D, r = 1/sqrt(v + eps), v biased:
 * dx = r (G - mean(G) - xhat mean(G xhat)) with G = g s (the mean's and
 * the variance's paths through every element of the row), ds = sum g xhat,
 * dt = sum g, the sums over rows. */
static void vjp_layer_norm(backward *bw, const dg_node *y) {
    const dg_node *xn = y->in[0], *sn = y->in[1], *tn = y->in[2];
    const int64_t D = sn->shape.d[0], R = dg_node_numel(xn) / D;
    const double eps = dg_attr_norm_of(y).eps;
    const double *g = bw->adj[y->id], *x = bw->val[xn->id], *s = bw->val[sn->id];
    double *dx = bw->adj[xn->id], *ds = bw->adj[sn->id], *dt = bw->adj[tn->id];
    for (int64_t r = 0; r < R; r++) {
        const double *xr = x + r * D, *gr = g + r * D;
        double mu = 0, v = 0, mg = 0, mgx = 0;
        for (int64_t j = 0; j < D; j++) mu += xr[j];
        mu /= (double)D;
        for (int64_t j = 0; j < D; j++) v += (xr[j] - mu) * (xr[j] - mu);
        const double rs = 1 / sqrt(v / (double)D + eps);
        for (int64_t j = 0; j < D; j++) {
            mg += gr[j] * s[j];
            mgx += gr[j] * s[j] * (xr[j] - mu) * rs;
            if (ds) ds[j] += gr[j] * (xr[j] - mu) * rs;
            if (dt) dt[j] += gr[j];
        }
        mg /= (double)D;
        mgx /= (double)D;
        if (dx)
            for (int64_t j = 0; j < D; j++) dx[r * D + j] += rs * (gr[j] * s[j] - mg - (xr[j] - mu) * rs * mgx);
    }
}

/* y[p] = table[ids[p]]: each g row adds into the row of the table it read */
static void vjp_embedding(backward *bw, const dg_node *y) {
    const dg_node *tn = y->in[0];
    const double *g = bw->adj[y->id], *ids = bw->val[y->in[1]->id];
    double *dt = bw->adj[tn->id];
    const int64_t V = tn->shape.d[0], D = tn->shape.d[1], P = dg_node_numel(y->in[1]);
    for (int64_t p = 0; p < P; p++) {
        int64_t id = (int64_t)ids[p];
        if (id >= 0 && id < V)
            for (int64_t j = 0; j < D; j++) dt[id * D + j] += g[p * D + j];
    }
}

/* o = softmax(scale q k^T, mask) v, per head: the products of
 * ref_attention_vjp, derived from that composition */
static void vjp_attention(backward *bw, const dg_node *y) {
    const dg_node *q = y->in[0], *k = y->in[1], *v = y->in[2];
    ref_attention_vjp(y, q->shape, bw->val[q->id], bw->val[k->id], bw->val[v->id], bw->adj[y->id], bw->adj[q->id],
                      bw->adj[k->id], bw->adj[v->id]);
}

/* Adds n's contributions into the adjoints of its inputs that have one. A
 * node with an adjoint lies on a path from a float input, so a one-input
 * op's input always has one; of two inputs, one may not (w, labels). */
static dg_status vjp(backward *bw, const dg_node *n) {
    switch (n->op) {
    case DG_OPS_BINARY:
        return vjp_binary(bw, n);
    case DG_OPS_UNARY:
        vjp_unary(bw, n);
        return DG_OK;
    case DG_OP_MATMUL: vjp_matmul(bw, n); return DG_OK;
    case DG_OP_PERMUTE: vjp_permute(bw, n); return DG_OK;
    case DG_OP_RESHAPE: case DG_OP_ALL_REDUCE:
    case DG_OP_CAST: { /* the same elements in the same order; one replica; a rounding's gradient is 1 */
        const double *g = bw->adj[n->id];
        double *dx = bw->adj[n->in[0]->id];
        int64_t numel = dg_node_numel(n);
#pragma omp parallel for
        for (int64_t i = 0; i < numel; i++) dx[i] += g[i];
        return DG_OK;
    }
    case DG_OP_SUM: case DG_OP_MEAN: vjp_reduce(bw, n); return DG_OK;
    case DG_OP_BROADCAST_TO: { /* y = x repeated: dx sums g over the repeats */
        const dg_node *x = n->in[0];
        index_map m = bcast_map(n->shape, x->shape);
        scatter_add(bw->adj[x->id], x->shape, bw->adj[n->id], &m);
        return DG_OK;
    }
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX: vjp_softmax(bw, n); return DG_OK;
    case DG_OP_SOFTMAX_CE: return vjp_softmax_ce(bw, n);
    case DG_OP_CONV2D: vjp_conv2d(bw, n); return DG_OK;
    case DG_OPS_POOL: return ref_pool_vjp(n, bw->val, bw->adj); /* its backward ops: none */
    case DG_OP_BATCH_NORM: vjp_batch_norm(bw, n); return DG_OK;
    case DG_OP_LAYER_NORM: vjp_layer_norm(bw, n); return DG_OK;
    case DG_OP_EMBEDDING: vjp_embedding(bw, n); return DG_OK;
    case DG_OP_ATTENTION: vjp_attention(bw, n); return DG_OK;
    /* not forward ops of a case: the graph up to the loss holds none on a
     * path to the loss, and a new forward op lands here until it has a VJP */
    case DG_OP_LEAF: case DG_OP_SIDE_OUTPUT:
    case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM:
    case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD: case DG_OP_SOFTMAX_CE_BACKWARD:
    case DG_OP_CONV2D_BACKWARD_DATA: case DG_OP_CONV2D_BACKWARD_WEIGHT:
    case DG_OP_BATCH_NORM_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD_SCALE:
    case DG_OP_BATCH_NORM_RUNNING:
    case DG_OP_LAYER_NORM_BACKWARD: case DG_OP_LAYER_NORM_BACKWARD_SCALE: case DG_OP_EMBEDDING_BACKWARD:
    case DG_OP_ATTENTION_BACKWARD:
    case DG_OP_COUNT:
        break;
    }
    return dg__fail(DG_ERR_UNSUPPORTED, "case_ref_own_grad: no vector-Jacobian product for op %s (node '%s')",
                    dg_op_name(n->op), n->name);
}

/* The forward graph's leaves: the case's inputs (labels as doubles) and w. */
static dg_status fill_leaves(const case_graph *cg, int upto, double **val) {
    for (int id = 0; id < upto; id++) {
        const dg_node *n = dg_graph_node(cg->g, id);
        if (n->op != DG_OP_LEAF) continue;
        const float *src = n == cg->w ? cg->w_val : NULL;
        bool labels = false;
        for (int i = 0; i < cg->c->n_in; i++)
            if (cg->in[i] == n) {
                src = cg->in_val[i];
                labels = cg->c->dom[i] == DOM_LABELS;
            }
        if (!src)
            return dg__fail(DG_ERR_INVALID, "case_ref_own_grad: leaf '%s' is neither an input of case '%s' nor w",
                            n->name, cg->c->name);
        int64_t cnt = dg_node_numel(n);
        val[id] = malloc((size_t)cnt * sizeof(double));
        if (!val[id]) return dg__fail(DG_ERR_OOM, "case_ref_own_grad: no memory for leaf '%s'", n->name);
        for (int64_t k = 0; k < cnt; k++) val[id][k] = labels ? (double)((const int32_t *)src)[k] : (double)src[k];
    }
    return DG_OK;
}

/* Gives an adjoint (zeros; the loss's: ones) to every node on a path from a
 * float input to the loss: from_input marks forward, to_loss backward. */
static dg_status alloc_adjoints(const case_graph *cg, int upto, double **adj) {
    enum { FROM_INPUT = 1, TO_LOSS = 2 };
    unsigned char *mark = calloc((size_t)upto, 1);
    if (!mark) return dg__fail(DG_ERR_OOM, "case_ref_own_grad: no memory");
    for (int i = 0; i < cg->c->n_in; i++)
        if (cg->c->dom[i] != DOM_LABELS) mark[cg->in[i]->id] = FROM_INPUT;
    for (int id = 0; id < upto; id++) {
        const dg_node *n = dg_graph_node(cg->g, id);
        for (int k = 0; k < n->n_in; k++) mark[id] |= mark[n->in[k]->id] & FROM_INPUT;
    }
    mark[upto - 1] |= TO_LOSS;
    for (int id = upto - 1; id >= 0; id--) {
        const dg_node *n = dg_graph_node(cg->g, id);
        if (!(mark[id] & TO_LOSS)) continue;
        for (int k = 0; k < n->n_in; k++) mark[n->in[k]->id] |= TO_LOSS;
    }
    dg_status st = DG_OK;
    for (int id = 0; id < upto && st == DG_OK; id++) {
        if (mark[id] != (FROM_INPUT | TO_LOSS)) continue;
        int64_t cnt = dg_node_numel(dg_graph_node(cg->g, id));
        adj[id] = calloc((size_t)cnt, sizeof(double));
        if (!adj[id]) st = dg__fail(DG_ERR_OOM, "case_ref_own_grad: no memory for an adjoint");
        else if (id == upto - 1)
            for (int64_t k = 0; k < cnt; k++) adj[id][k] = 1; /* d loss / d loss */
    }
    free(mark);
    return st;
}

dg_status case_ref_own_grad(const case_graph *cg, double *grad[OP_CASE_MAX_IN], double **out) {
    for (int i = 0; i < OP_CASE_MAX_IN; i++) grad[i] = NULL;
    if (out) *out = NULL;
    const int upto = cg->loss->id + 1; /* the forward part: inputs -> out -> loss */
    backward bw = {calloc((size_t)upto, sizeof(double *)), calloc((size_t)upto, sizeof(double *))};
    dg_status st = bw.val && bw.adj ? DG_OK : dg__fail(DG_ERR_OOM, "case_ref_own_grad: no memory");
    if (st == DG_OK) st = fill_leaves(cg, upto, bw.val);
    if (st == DG_OK && (st = ref_eval(cg->g, upto, bw.val)) != DG_OK)
        st = dg__fail(st, "case_ref_own_grad: the float64 forward of case '%s' failed (%s)", cg->c->name,
                      dg_status_name(st));
    if (st == DG_OK) st = alloc_adjoints(cg, upto, bw.adj);
    /* creation order is topological: descending ids visit every consumer
     * of a node before the node */
    for (int id = upto - 1; id >= 0 && st == DG_OK; id--) {
        const dg_node *n = dg_graph_node(cg->g, id);
        if (!bw.adj[id] || n->op == DG_OP_LEAF) continue;
        st = vjp(&bw, n);
        free(bw.adj[id]);
        bw.adj[id] = NULL;
    }
    for (int i = 0; i < cg->c->n_in && st == DG_OK; i++) {
        if (cg->c->dom[i] == DOM_LABELS) continue;
        int id = cg->in[i]->id;
        /* an input with no path to the loss has a zero gradient */
        grad[i] = bw.adj[id] ? bw.adj[id] : calloc((size_t)dg_node_numel(cg->in[i]), sizeof(double));
        bw.adj[id] = NULL;
        if (!grad[i]) st = dg__fail(DG_ERR_OOM, "case_ref_own_grad: no memory for a gradient");
    }
    if (st == DG_OK && out) { /* the forward output, already evaluated */
        *out = bw.val[cg->out->id];
        bw.val[cg->out->id] = NULL;
    }
    if (st != DG_OK)
        for (int i = 0; i < OP_CASE_MAX_IN; i++) {
            free(grad[i]);
            grad[i] = NULL;
        }
    if (bw.val) ref_free(bw.val, upto);
    if (bw.adj) ref_free(bw.adj, upto);
    free(bw.val);
    free(bw.adj);
    return st;
}
