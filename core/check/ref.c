/* ref.c: the float64 reference, written from each op's definition.
 * OpenMP only over independent outputs; every sum stays in one thread, in
 * order, so the reference is deterministic. */
#include "ref.h"

#include "../attrs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* multi-index of flat element i in shape s */
static void unravel(int64_t i, dg_shape s, int64_t *idx) {
    for (int a = s.ndim - 1; a >= 0; a--) { idx[a] = i % s.d[a]; i /= s.d[a]; }
}
static int64_t ravel(const int64_t *idx, dg_shape s) {
    int64_t i = 0;
    for (int a = 0; a < s.ndim; a++) i = i * s.d[a] + idx[a];
    return i;
}
/* flat index in `in` of the element that broadcasting maps to output index idx */
static int64_t bcast_src(const int64_t *idx, dg_shape out, dg_shape in) {
    int64_t j[DG_MAX_DIMS];
    for (int a = 0; a < in.ndim; a++) j[a] = idx[out.ndim - in.ndim + a] % in.d[a];
    return ravel(j, in);
}

static double gelu(double x) {
    double c = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
}
static double gelu_grad(double x) {
    double c = sqrt(2.0 / M_PI), u = c * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

static double unary(dg_op op, double x, double c) {
    switch (op) {
    case DG_OP_NEG:        return -x;
    case DG_OP_ADD_SCALAR: return x + c;
    case DG_OP_MUL_SCALAR: return x * c;
    case DG_OP_POW_SCALAR: return pow(x, c);
    case DG_OP_EXP:        return exp(x);
    case DG_OP_LOG:        return log(x);
    case DG_OP_SQRT:       return sqrt(x);
    case DG_OP_ABS:        return fabs(x);
    case DG_OP_RELU:       return x > 0 ? x : 0;
    case DG_OP_LEAKY_RELU: return x > 0 ? x : c * x;
    case DG_OP_SIGMOID:    return 1.0 / (1.0 + exp(-x));
    case DG_OP_TANH:       return tanh(x);
    case DG_OP_GELU:       return gelu(x);
    default:               return NAN;
    }
}

static double unary_backward(dg_op op, double dy, double v, double c) {
    switch (op) {
    case DG_OP_RELU_BACKWARD:       return v > 0 ? dy : 0;
    case DG_OP_LEAKY_RELU_BACKWARD: return v > 0 ? dy : c * dy;
    case DG_OP_ABS_BACKWARD:        return v > 0 ? dy : v < 0 ? -dy : 0;
    case DG_OP_SIGMOID_BACKWARD:    return dy * v * (1 - v);
    case DG_OP_TANH_BACKWARD:       return dy * (1 - v * v);
    case DG_OP_GELU_BACKWARD:       return dy * gelu_grad(v);
    default:                        return NAN;
    }
}

static void matmul(const dg_node *n, const double *A, const double *B, double *C) {
    const dg_node *a = n->in[0], *b = n->in[1];
    int r = n->shape.ndim - 2;
    int64_t batch = r ? n->shape.d[0] : 1, M = n->shape.d[r], N = n->shape.d[r + 1];
    const bool ta = dg_attr_matmul_of(n).trans_a, tb = dg_attr_matmul_of(n).trans_b;
    int64_t K = ta ? a->shape.d[r] : a->shape.d[r + 1];
    int64_t ac = a->shape.d[r + 1], bc = b->shape.d[r + 1];
#pragma omp parallel for collapse(2)
    for (int64_t t = 0; t < batch; t++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) {
                    double x = ta ? A[t * M * K + k * ac + i] : A[t * M * K + i * ac + k];
                    double y = tb ? B[t * K * N + j * bc + k] : B[t * K * N + k * bc + j];
                    acc += x * y;
                }
                C[t * M * N + i * N + j] = acc;
            }
}

static double row_lse(const double *x, int64_t c) {
    double mx = x[0], s = 0;
    for (int64_t j = 1; j < c; j++) mx = fmax(mx, x[j]);
    for (int64_t j = 0; j < c; j++) s += exp(x[j] - mx);
    return mx + log(s);
}

/* The optimizer updates from their documented rules (ops.h, autodiff.h).
 * Like the backends, they write the parameter and their state in place
 * (the inputs their op-table row marks as written), so evaluating a
 * training step's graph again with the same vals runs the next step; the
 * node's own value is the new parameter (its output is the parameter's
 * storage on a backend). Adam reads the step counter from its in[4], the
 * adam_step node, whose value is the counter after this step's increment.
 *   sgd:      w -= lr g
 *   momentum: v = mu v + g;  w -= lr v                 (mu: attribute beta1)
 *   adam:     m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *             w -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) */
static void optim_update(const dg_node *n, double **vals, double *y) {
    const dg_attr_optim o = dg_attr_optim_of(n);
    const double lr = o.lr, b1 = o.beta1, b2 = o.beta2, eps = o.eps;
    int64_t numel = dg_node_numel(n);
    double *w = vals[n->in[0]->id];
    const double *g = n->n_in > 1 ? vals[n->in[1]->id] : NULL;
    switch (n->op) {
    case DG_OP_SGD_UPDATE:
        for (int64_t i = 0; i < numel; i++) w[i] -= lr * g[i];
        break;
    case DG_OP_MOMENTUM_UPDATE: {
        double *v = vals[n->in[2]->id];
        for (int64_t i = 0; i < numel; i++) {
            v[i] = b1 * v[i] + g[i];
            w[i] -= lr * v[i];
        }
        break;
    }
    case DG_OP_ADAM_STEP: w[0] += 1; break;
    case DG_OP_ADAM_UPDATE: {
        double *m = vals[n->in[2]->id], *v = vals[n->in[3]->id], t = vals[n->in[4]->id][0];
        double c1 = 1 - pow(b1, t), c2 = 1 - pow(b2, t);
        for (int64_t i = 0; i < numel; i++) {
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            w[i] -= lr * (m[i] / c1) / (sqrt(v[i] / c2) + eps);
        }
        break;
    }
    default: return;
    }
    memcpy(y, w, (size_t)numel * sizeof *y);
}

static dg_status eval_node(const dg_node *n, double **vals) {
    double *y = vals[n->id];
    const double *a = n->n_in > 0 ? vals[n->in[0]->id] : NULL;
    const double *b = n->n_in > 1 ? vals[n->in[1]->id] : NULL;
    int64_t numel = dg_node_numel(n), idx[DG_MAX_DIMS];
    double c = dg_attr_scalar_or0(n);
    dg_shape s = n->shape;
    switch (n->op) {
    case DG_OP_LEAF: break;
    case DG_OP_ADD: case DG_OP_SUB: case DG_OP_MUL: case DG_OP_DIV:
#pragma omp parallel for private(idx)
        for (int64_t i = 0; i < numel; i++) {
            unravel(i, s, idx);
            double x = a[bcast_src(idx, s, n->in[0]->shape)], z = b[bcast_src(idx, s, n->in[1]->shape)];
            y[i] = n->op == DG_OP_ADD ? x + z : n->op == DG_OP_SUB ? x - z : n->op == DG_OP_MUL ? x * z : x / z;
        }
        break;
    case DG_OP_NEG: case DG_OP_ADD_SCALAR: case DG_OP_MUL_SCALAR: case DG_OP_POW_SCALAR:
    case DG_OP_EXP: case DG_OP_LOG: case DG_OP_SQRT: case DG_OP_ABS: case DG_OP_RELU:
    case DG_OP_LEAKY_RELU: case DG_OP_SIGMOID: case DG_OP_TANH: case DG_OP_GELU:
#pragma omp parallel for
        for (int64_t i = 0; i < numel; i++) y[i] = unary(n->op, a[i], c);
        break;
    case DG_OP_RELU_BACKWARD: case DG_OP_LEAKY_RELU_BACKWARD: case DG_OP_ABS_BACKWARD:
    case DG_OP_SIGMOID_BACKWARD: case DG_OP_TANH_BACKWARD: case DG_OP_GELU_BACKWARD:
#pragma omp parallel for
        for (int64_t i = 0; i < numel; i++) y[i] = unary_backward(n->op, a[i], b[i], c);
        break;
    case DG_OP_MATMUL: matmul(n, a, b, y); break;
    case DG_OP_PERMUTE: {
        const dg_attr_permute pa = dg_attr_permute_of(n);
#pragma omp parallel for private(idx)
        for (int64_t i = 0; i < numel; i++) {
            int64_t src[DG_MAX_DIMS];
            unravel(i, s, idx);
            for (int k = 0; k < s.ndim; k++) src[pa.perm[k]] = idx[k];
            y[i] = a[ravel(src, n->in[0]->shape)];
        }
        break;
    }
    case DG_OP_RESHAPE: memcpy(y, a, (size_t)numel * sizeof *y); break;
    case DG_OP_SUM: case DG_OP_MEAN: {
        dg_shape in = n->in[0]->shape, kept = in;
        uint32_t axes = dg_attr_reduce_of(n).axes;
        for (int k = 0; k < in.ndim; k++)
            if (axes >> k & 1u) kept.d[k] = 1;
        int64_t nin = dg_shape_numel(in);
        memset(y, 0, (size_t)numel * sizeof *y);
        for (int64_t i = 0; i < nin; i++) {
            unravel(i, in, idx);
            for (int k = 0; k < in.ndim; k++)
                if (axes >> k & 1u) idx[k] = 0;
            y[ravel(idx, kept)] += a[i];
        }
        if (n->op == DG_OP_MEAN)
            for (int64_t i = 0; i < numel; i++) y[i] *= (double)numel / (double)nin;
        break;
    }
    case DG_OP_BROADCAST_TO:
#pragma omp parallel for private(idx)
        for (int64_t i = 0; i < numel; i++) {
            unravel(i, s, idx);
            y[i] = a[bcast_src(idx, s, n->in[0]->shape)];
        }
        break;
    case DG_OP_SOFTMAX: case DG_OP_LOG_SOFTMAX: {
        int64_t C = s.d[s.ndim - 1];
#pragma omp parallel for
        for (int64_t r = 0; r < numel / C; r++) {
            double lse = row_lse(a + r * C, C);
            for (int64_t j = 0; j < C; j++)
                y[r * C + j] = n->op == DG_OP_SOFTMAX ? exp(a[r * C + j] - lse) : a[r * C + j] - lse;
        }
        break;
    }
    case DG_OP_SOFTMAX_BACKWARD: case DG_OP_LOG_SOFTMAX_BACKWARD: {
        int64_t C = s.d[s.ndim - 1];
#pragma omp parallel for
        for (int64_t r = 0; r < numel / C; r++) {
            const double *dy = a + r * C, *yy = b + r * C;
            double dot = 0;
            for (int64_t j = 0; j < C; j++) dot += n->op == DG_OP_SOFTMAX_BACKWARD ? dy[j] * yy[j] : dy[j];
            for (int64_t j = 0; j < C; j++)
                y[r * C + j] = n->op == DG_OP_SOFTMAX_BACKWARD ? yy[j] * (dy[j] - dot) : dy[j] - exp(yy[j]) * dot;
        }
        break;
    }
    case DG_OP_SOFTMAX_CE: {
        dg_shape ls = n->in[0]->shape;
        int64_t C = ls.d[ls.ndim - 1], R = dg_shape_numel(ls) / C;
        double tot = 0;
        for (int64_t r = 0; r < R; r++) tot += row_lse(a + r * C, C) - a[r * C + (int64_t)b[r]];
        y[0] = tot / (double)R;
        break;
    }
    case DG_OP_SIDE_OUTPUT: { /* from its definition, not from the owner's result */
        const dg_node *owner = n->in[0];
        if (owner->op != DG_OP_SOFTMAX_CE) return DG_ERR_UNSUPPORTED;
        const double *x = vals[owner->in[0]->id];
        int64_t C = owner->in[0]->shape.d[owner->in[0]->shape.ndim - 1];
        for (int64_t r = 0; r < numel; r++) y[r] = row_lse(x + r * C, C); /* the row log-sum-exp */
        break;
    }
    case DG_OP_SOFTMAX_CE_BACKWARD: { /* recomputes lse (in[3]): an independent check */
        const double *x = b, *lab = vals[n->in[2]->id];
        int64_t C = s.d[s.ndim - 1], R = numel / C;
#pragma omp parallel for
        for (int64_t r = 0; r < R; r++) {
            double lse = row_lse(x + r * C, C);
            for (int64_t j = 0; j < C; j++)
                y[r * C + j] = (exp(x[r * C + j] - lse) - (j == (int64_t)lab[r])) * a[0] / (double)R;
        }
        break;
    }
    case DG_OP_SGD_UPDATE: case DG_OP_MOMENTUM_UPDATE: case DG_OP_ADAM_STEP: case DG_OP_ADAM_UPDATE:
        optim_update(n, vals, y);
        break;
    case DG_OP_CONV2D: case DG_OP_MAX_POOL2D: case DG_OP_AVG_POOL2D: case DG_OP_BATCH_NORM:
    case DG_OP_CONV2D_BACKWARD_DATA: case DG_OP_CONV2D_BACKWARD_WEIGHT: case DG_OP_MAX_POOL2D_BACKWARD:
    case DG_OP_AVG_POOL2D_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD: case DG_OP_BATCH_NORM_BACKWARD_SCALE:
    case DG_OP_BATCH_NORM_RUNNING:
    case DG_OP_COUNT: return DG_ERR_UNSUPPORTED;
    }
    return DG_OK;
}

dg_status ref_eval(const dg_graph *g, int upto, double **vals) {
    for (int id = 0; id < upto; id++) {
        const dg_node *n = dg_graph_node(g, id);
        if (n->op == DG_OP_LEAF) continue;
        if (!vals[id]) vals[id] = calloc((size_t)dg_node_numel(n), sizeof(double));
        if (!vals[id]) return DG_ERR_OOM;
        dg_status st = eval_node(n, vals);
        if (st != DG_OK) return st;
    }
    return DG_OK;
}

void ref_free(double **vals, int n) {
    for (int i = 0; i < n; i++) free(vals[i]);
}
