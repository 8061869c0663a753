/* graph.c: graph storage, leaves and the forward builders with their shape
 * rules. */
#include "graph.h"

#include "attrs.h"
#include "graph_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dg_graph {
    dg_node **nodes;
    int       n, cap;
    dg_status status;
    char      msg[768];  /* the first error's message */
};

dg_graph *dg_graph_new(void) {
    dg_graph *g = calloc(1, sizeof(dg_graph));
    if (!g) dg__fail(DG_ERR_OOM, "dg_graph_new: out of memory");
    return g;
}

void dg_graph_free(dg_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n; i++) free(g->nodes[i]);
    free(g->nodes);
    free(g);
}

dg_status dg_graph_status(const dg_graph *g) {
    if (!g) return dg__fail(DG_ERR_INVALID, "dg_graph_status: NULL graph");
    /* the thread's last error may have moved on since the graph failed */
    return g->status == DG_OK ? DG_OK : dg__fail(g->status, "%s", g->msg);
}

int dg_graph_size(const dg_graph *g) {
    if (!g) {
        dg__fail(DG_ERR_INVALID, "dg_graph_size: NULL graph");
        return -1;
    }
    return g->n;
}

dg_node *dg_graph_node(const dg_graph *g, int id) {
    if (!g) {
        dg__fail(DG_ERR_INVALID, "dg_graph_node: NULL graph");
        return NULL;
    }
    if (id < 0 || id >= g->n) {
        dg__fail(DG_ERR_INVALID, "dg_graph_node: no node %d in a graph of %d", id, g->n);
        return NULL;
    }
    return g->nodes[id];
}

bool dg__graph_owns(const dg_graph *g, const dg_node *n) {
    return g && n && n->id >= 0 && n->id < g->n && g->nodes[n->id] == n;
}

dg_status dg__graph_refuse(const dg_graph *g, const char *who) {
    return dg__fail(g->status, "%s: the graph is in an error state: %s", who, g->msg);
}

dg_node *dg__graph_fail(dg_graph *g, dg_status s, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!g) {
        dg__fail(s, "%s", msg);
    } else if (g->status == DG_OK) { /* keep the first error: later ones follow from it */
        g->status = s;
        snprintf(g->msg, sizeof g->msg, "%s", msg);
        dg__fail(s, "%s", msg);
    }
    return NULL;
}

/* ---- shapes ---- */

#define DIMS_STR_(x) #x
#define DIMS_STR(x)  DIMS_STR_(x)

static bool ndim_valid(int ndim) { return ndim >= 1 && ndim <= DG_MAX_DIMS; }

int64_t dg_shape_numel(dg_shape s) {
    if (!ndim_valid(s.ndim)) {
        dg__fail(DG_ERR_SHAPE, "shape of %d dims (1 to %d)", s.ndim, DG_MAX_DIMS);
        return -1;
    }
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) {
        if (s.d[i] < 0 || __builtin_mul_overflow(n, s.d[i], &n)) {
            char b[96];
            dg__fail(DG_ERR_SHAPE, "shape %s: %s", dg_shape_str(s, b, sizeof b),
                     s.d[i] < 0 ? "a negative dimension" : "more elements than int64 holds");
            return -1;
        }
    }
    return n;
}

bool dg_shape_eq(dg_shape a, dg_shape b) {
    if (a.ndim != b.ndim || !ndim_valid(a.ndim)) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.d[i] != b.d[i]) return false;
    return true;
}

const char *dg_shape_str(dg_shape s, char *buf, size_t n) {
    if (!buf || n == 0) return "";
    if (!ndim_valid(s.ndim)) { /* d[] holds only DG_MAX_DIMS: say how many were asked */
        snprintf(buf, n, "[%d dims]", s.ndim);
        return buf;
    }
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < s.ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ",%lld" : "%lld", (long long)s.d[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

int64_t dg_node_numel(const dg_node *n) {
    if (!n) {
        dg__fail(DG_ERR_INVALID, "dg_node_numel: NULL node");
        return -1;
    }
    return dg_shape_numel(n->shape);
}

size_t dg_node_bytes(const dg_node *n) {
    if (!n) {
        dg__fail(DG_ERR_INVALID, "dg_node_bytes: NULL node");
        return 0;
    }
    int64_t numel = dg_node_numel(n);
    size_t bytes, size = dg_dtype_size(n->dtype);
    if (numel < 0 || !size || __builtin_mul_overflow((uint64_t)numel, size, &bytes)) {
        dg__fail(DG_ERR_SHAPE, "dg_node_bytes: node '%s' has a shape of no valid size", n->name);
        return 0;
    }
    return bytes;
}

/* What makes s unfit for a tensor, or NULL when it fits. */
static const char *shape_problem(dg_shape s) {
    if (!ndim_valid(s.ndim)) return "needs 1 to " DIMS_STR(DG_MAX_DIMS) " dims";
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) {
        if (s.d[i] < 1) return "has a dimension < 1";
        if (__builtin_mul_overflow(n, s.d[i], &n) || n > DG_MAX_NUMEL) return "has more than 2^40 elements";
    }
    return NULL;
}

static bool shape_valid(dg_shape s) { return !shape_problem(s); }

/* ---- node creation ---- */

dg_node *dg__node_new(dg_graph *g, dg_op op, dg_shape s, int n_in, dg_node *const *in) {
    /* the shape rules keep valid inputs' shapes, but products of them
     * (broadcasting, matmul) can outgrow DG_MAX_NUMEL */
    const char *bad = shape_problem(s);
    if (bad) {
        char b[96];
        return dg__graph_fail(g, DG_ERR_SHAPE, "%s: output shape %s %s", dg_op_name(op),
                              dg_shape_str(s, b, sizeof b), bad);
    }
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        dg_node **nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) return dg__graph_fail(g, DG_ERR_OOM, "graph: out of memory adding a node");
        g->nodes = nodes;
        g->cap = cap;
    }
    dg_node *n = calloc(1, sizeof *n);
    if (!n) return dg__graph_fail(g, DG_ERR_OOM, "graph: out of memory adding a node");
    n->id = g->n;
    n->op = op;
    n->dtype = DG_F32;
    n->shape = s;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    snprintf(n->name, sizeof n->name, "%s_%d", dg_op_name(op), n->id);
    g->nodes[g->n++] = n;
    return n;
}

dg_node *dg__side_new(dg_graph *g, dg_node *owner, dg_shape s, const char *what) {
    if (owner->n_side >= DG_MAX_SIDE || owner->n_side >= dg_op_info_get(owner->op)->n_side)
        return dg__graph_fail(g, DG_ERR_INVALID, "%s: more side outputs than its op declares", owner->name);
    dg_node *n = dg__node_new(g, DG_OP_SIDE_OUTPUT, s, 1, &owner);
    if (!n) return NULL;
    dg__attr_side_set(n, (dg_attr_side){owner->n_side});
    owner->side[owner->n_side++] = n;
    snprintf(n->name, sizeof n->name, "%.20s.%.10s", owner->name, what);
    return n;
}

/* Validates the common preconditions of a builder: graph healthy, inputs
 * non-NULL and of this graph, float32 where required. */
static bool check_inputs(dg_graph *g, const char *op, int n_in, dg_node *const *in) {
    if (!g) {
        dg__fail(DG_ERR_INVALID, "%s: NULL graph", op);
        return false;
    }
    if (g->status != DG_OK) return false;
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) {
            dg__graph_fail(g, DG_ERR_INVALID, "%s: input %d is NULL", op, i);
            return false;
        }
        if (!dg__graph_owns(g, in[i])) {
            dg__graph_fail(g, DG_ERR_INVALID, "%s: input %d belongs to another graph", op, i);
            return false;
        }
    }
    return true;
}

static bool check_f32(dg_graph *g, const char *op, const dg_node *a) {
    if (a->dtype == DG_F32) return true;
    dg__graph_fail(g, DG_ERR_INVALID, "%s: input '%s' is %s; %s takes float32%s", op, a->name,
                   dg_dtype_name(a->dtype), op,
                   a->dtype == DG_BF16 || a->dtype == DG_F16 ? " (dg_cast it back first)" : "");
    return false;
}

static bool float_dtype(dg_dtype t) { return t == DG_F32 || t == DG_BF16 || t == DG_F16; }

/* The storage ops that compute in float32 and take bf16 or f16 too
 * (elementwise, reductions, softmax, layer norm): a's dtype when it is a
 * float one, else a message naming op and dtype. */
static bool check_float(dg_graph *g, const char *op, const dg_node *a) {
    if (float_dtype(a->dtype)) return true;
    dg__graph_fail(g, DG_ERR_INVALID, "%s: input '%s' is %s; %s takes f32, bf16 or f16", op, a->name,
                   dg_dtype_name(a->dtype), op);
    return false;
}

bool dg__check_float_inputs(dg_graph *g, const char *op, int n_in, dg_node *const *in) {
    if (!check_inputs(g, op, n_in, in)) return false;
    for (int i = 0; i < n_in; i++) {
        if (!check_float(g, op, in[i])) return false;
        if (in[i]->dtype != in[0]->dtype) {
            dg__graph_fail(g, DG_ERR_INVALID, "%s: inputs '%s' (%s) and '%s' (%s): all of one dtype (dg_cast)", op,
                           in[0]->name, dg_dtype_name(in[0]->dtype), in[i]->name, dg_dtype_name(in[i]->dtype));
            return false;
        }
    }
    return true;
}

bool dg__check_f32_inputs(dg_graph *g, const char *op, int n_in, dg_node *const *in) {
    if (!check_inputs(g, op, n_in, in)) return false;
    for (int i = 0; i < n_in; i++)
        if (!check_f32(g, op, in[i])) return false;
    return true;
}

/* ---- leaves ---- */

static dg_node *leaf(dg_graph *g, const char *name, dg_shape s, dg_leaf_kind kind,
                     dg_dtype dt, dg_init init) {
    if (!g) return dg__graph_fail(g, DG_ERR_INVALID, "leaf '%s': NULL graph", name ? name : "?");
    if (g->status != DG_OK) return NULL;
    const char *bad = shape_problem(s);
    if (bad) {
        char b[96];
        return dg__graph_fail(g, DG_ERR_SHAPE, "leaf '%s': shape %s %s", name ? name : "?",
                              dg_shape_str(s, b, sizeof b), bad);
    }
    if ((unsigned)init.kind > DG_INIT_DATA)
        return dg__graph_fail(g, DG_ERR_INVALID, "leaf '%s': unknown init kind %d", name ? name : "?",
                              (int)init.kind);
    if (init.kind == DG_INIT_DATA && !init.seed)
        return dg__graph_fail(g, DG_ERR_INVALID, "leaf '%s': DG_INIT_DATA without data", name ? name : "?");
    dg_node *n = dg__node_new(g, DG_OP_LEAF, s, 0, NULL);
    if (!n) return NULL;
    n->leaf = kind;
    n->dtype = dt;
    n->init = init;
    if (name) snprintf(n->name, sizeof n->name, "%s", name);
    return n;
}

dg_node *dg_input(dg_graph *g, const char *name, dg_shape s) {
    return leaf(g, name, s, DG_LEAF_INPUT, DG_F32, (dg_init){DG_INIT_FILL, 0, 0, 0});
}
dg_node *dg_input_i32(dg_graph *g, const char *name, dg_shape s) {
    return leaf(g, name, s, DG_LEAF_INPUT, DG_I32, (dg_init){DG_INIT_FILL, 0, 0, 0});
}
dg_node *dg_param(dg_graph *g, const char *name, dg_shape s, dg_init init) {
    return leaf(g, name, s, DG_LEAF_PARAM, DG_F32, init);
}
dg_node *dg_state(dg_graph *g, const char *name, dg_shape s, dg_init init) {
    return leaf(g, name, s, DG_LEAF_STATE, DG_F32, init);
}
dg_node *dg_const(dg_graph *g, const char *name, dg_shape s, float value) {
    return leaf(g, name, s, DG_LEAF_CONST, DG_F32, (dg_init){DG_INIT_FILL, value, 0, 0});
}
dg_node *dg_const_data(dg_graph *g, const char *name, dg_shape s, const float *data) {
    return leaf(g, name, s, DG_LEAF_CONST, DG_F32, dg_init_data(data));
}

/* ---- elementwise ---- */

/* numpy broadcasting: align from the right; sizes must match or be 1. */
static bool broadcast_shape(dg_shape a, dg_shape b, dg_shape *out) {
    int nd = a.ndim > b.ndim ? a.ndim : b.ndim;
    out->ndim = nd;
    for (int i = 0; i < nd; i++) {
        int ia = a.ndim - nd + i, ib = b.ndim - nd + i;
        int64_t da = ia >= 0 ? a.d[ia] : 1, db = ib >= 0 ? b.d[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        out->d[i] = da > db ? da : db;
    }
    return true;
}

/* Operands of one dtype give that dtype; float32 with bf16 or f16 gives
 * float32 (each operand read in its own dtype: the gradients' products of
 * a float32 dy with a low-precision forward value); bf16 with f16 is
 * refused. */
static dg_node *binary(dg_graph *g, dg_op op, dg_node *a, dg_node *b) {
    dg_node *in[2] = {a, b};
    const char *name = dg_op_name(op);
    if (!check_inputs(g, name, 2, in) || !check_float(g, name, a) || !check_float(g, name, b))
        return NULL;
    if (a->dtype != b->dtype && a->dtype != DG_F32 && b->dtype != DG_F32)
        return dg__graph_fail(g, DG_ERR_INVALID, "%s: operands '%s' (%s) and '%s' (%s): one dtype, or f32 with "
                              "bf16 or f16 (dg_cast)", name, a->name, dg_dtype_name(a->dtype), b->name,
                              dg_dtype_name(b->dtype));
    dg_shape s;
    if (!broadcast_shape(a->shape, b->shape, &s)) {
        char sa[96], sb[96];
        return dg__graph_fail(g, DG_ERR_SHAPE, "%s: cannot broadcast %s with %s", name,
                              dg_shape_str(a->shape, sa, sizeof sa),
                              dg_shape_str(b->shape, sb, sizeof sb));
    }
    dg_node *n = dg__node_new(g, op, s, 2, in);
    if (n) n->dtype = a->dtype == b->dtype ? a->dtype : DG_F32;
    return n;
}

dg_node *dg_add(dg_graph *g, dg_node *a, dg_node *b) { return binary(g, DG_OP_ADD, a, b); }
dg_node *dg_sub(dg_graph *g, dg_node *a, dg_node *b) { return binary(g, DG_OP_SUB, a, b); }
dg_node *dg_mul(dg_graph *g, dg_node *a, dg_node *b) { return binary(g, DG_OP_MUL, a, b); }
dg_node *dg_div(dg_graph *g, dg_node *a, dg_node *b) { return binary(g, DG_OP_DIV, a, b); }

/* the output in a's dtype; all_reduce (a collective) takes float32 only */
static dg_node *unary(dg_graph *g, dg_op op, dg_node *a, float scalar) {
    const char *name = dg_op_name(op);
    if (!check_inputs(g, name, 1, &a) ||
        !(op == DG_OP_ALL_REDUCE ? check_f32(g, name, a) : check_float(g, name, a)))
        return NULL;
    dg_node *n = dg__node_new(g, op, a->shape, 1, &a);
    if (!n) return NULL;
    n->dtype = a->dtype;
    if (dg_op_info_get(op)->attr == DG_ATTR_SCALAR) dg__attr_scalar_set(n, (dg_attr_scalar){scalar});
    return n;
}

dg_node *dg_neg(dg_graph *g, dg_node *a) { return unary(g, DG_OP_NEG, a, 0); }
dg_node *dg_add_scalar(dg_graph *g, dg_node *a, float s) { return unary(g, DG_OP_ADD_SCALAR, a, s); }
dg_node *dg_mul_scalar(dg_graph *g, dg_node *a, float s) { return unary(g, DG_OP_MUL_SCALAR, a, s); }
dg_node *dg_pow_scalar(dg_graph *g, dg_node *a, float s) { return unary(g, DG_OP_POW_SCALAR, a, s); }
dg_node *dg_exp(dg_graph *g, dg_node *a) { return unary(g, DG_OP_EXP, a, 0); }
dg_node *dg_log(dg_graph *g, dg_node *a) { return unary(g, DG_OP_LOG, a, 0); }
dg_node *dg_sqrt(dg_graph *g, dg_node *a) { return unary(g, DG_OP_SQRT, a, 0); }
dg_node *dg_abs(dg_graph *g, dg_node *a) { return unary(g, DG_OP_ABS, a, 0); }
dg_node *dg_relu(dg_graph *g, dg_node *a) { return unary(g, DG_OP_RELU, a, 0); }
dg_node *dg_leaky_relu(dg_graph *g, dg_node *a, float slope) { return unary(g, DG_OP_LEAKY_RELU, a, slope); }
dg_node *dg_sigmoid(dg_graph *g, dg_node *a) { return unary(g, DG_OP_SIGMOID, a, 0); }
dg_node *dg_tanh(dg_graph *g, dg_node *a) { return unary(g, DG_OP_TANH, a, 0); }
dg_node *dg_gelu(dg_graph *g, dg_node *a) { return unary(g, DG_OP_GELU, a, 0); }
dg_node *dg_erf(dg_graph *g, dg_node *a) { return unary(g, DG_OP_ERF, a, 0); }
dg_node *dg_all_reduce(dg_graph *g, dg_node *a) { return unary(g, DG_OP_ALL_REDUCE, a, 0); }

/* ---- matmul ---- */

dg_node *dg_matmul(dg_graph *g, dg_node *a, dg_node *b, bool trans_a, bool trans_b) {
    return dg_matmul_ex(g, a, b, trans_a, trans_b, DG_F32);
}

dg_node *dg_matmul_ex(dg_graph *g, dg_node *a, dg_node *b, bool trans_a, bool trans_b, dg_dtype out) {
    dg_node *in[2] = {a, b};
    if (!check_inputs(g, "matmul", 2, in)) return NULL;
    if (!float_dtype(out) || (out != DG_F32 && out != a->dtype))
        return dg__graph_fail(g, DG_ERR_INVALID, "matmul: a %s output of %s operands: f32, or the operands' bf16 "
                              "or f16", dg_dtype_name(out), dg_dtype_name(a->dtype));
    if (!float_dtype(a->dtype) || a->dtype != b->dtype)
        return dg__graph_fail(g, DG_ERR_INVALID,
                              "matmul: operands '%s' (%s) and '%s' (%s): both f32, both bf16 or both f16 (dg_cast)",
                              a->name, dg_dtype_name(a->dtype), b->name, dg_dtype_name(b->dtype));
    char sa[96], sb[96];
    dg_shape as = a->shape, bs = b->shape;
    /* [B,m,k] x [k,n]: one larger 2-D product, no batching needed */
    if (as.ndim == 3 && bs.ndim == 2 && !trans_a) {
        dg_node *a2 = dg_reshape(g, a, DG_SHAPE(as.d[0] * as.d[1], as.d[2]));
        dg_node *c2 = dg_matmul_ex(g, a2, b, false, trans_b, out);
        return c2 ? dg_reshape(g, c2, DG_SHAPE(as.d[0], as.d[1], c2->shape.d[1])) : NULL;
    }
    /* [B,H,m,k] x [B,H,k,n]: the leading axes folded into one batch (views) */
    if (as.ndim == 4 && bs.ndim == 4 && as.d[0] == bs.d[0] && as.d[1] == bs.d[1]) {
        dg_node *a3 = dg_reshape(g, a, DG_SHAPE(as.d[0] * as.d[1], as.d[2], as.d[3]));
        dg_node *b3 = dg_reshape(g, b, DG_SHAPE(bs.d[0] * bs.d[1], bs.d[2], bs.d[3]));
        dg_node *c3 = dg_matmul_ex(g, a3, b3, trans_a, trans_b, out);
        return c3 ? dg_reshape(g, c3, DG_SHAPE(as.d[0], as.d[1], c3->shape.d[1], c3->shape.d[2])) : NULL;
    }
    bool batched = as.ndim == 3 && bs.ndim == 3 && as.d[0] == bs.d[0];
    if (!(as.ndim == 2 && bs.ndim == 2) && !batched)
        return dg__graph_fail(g, DG_ERR_SHAPE,
                              "matmul: operands %s and %s must both be 2-D, both 3-D with the same batch, "
                              "both 4-D with the same two leading axes, or 3-D x 2-D", dg_shape_str(as, sa, sizeof sa), dg_shape_str(bs, sb, sizeof sb));
    int r = as.ndim - 2;
    int64_t m = trans_a ? as.d[r + 1] : as.d[r], ka = trans_a ? as.d[r] : as.d[r + 1];
    int64_t kb = trans_b ? bs.d[r + 1] : bs.d[r], n = trans_b ? bs.d[r] : bs.d[r + 1];
    if (ka != kb)
        return dg__graph_fail(g, DG_ERR_SHAPE, "matmul: inner dimensions differ: %s%s x %s%s (%lld vs %lld)",
                              dg_shape_str(as, sa, sizeof sa), trans_a ? "^T" : "",
                              dg_shape_str(bs, sb, sizeof sb), trans_b ? "^T" : "",
                              (long long)ka, (long long)kb);
    dg_shape s = batched ? DG_SHAPE(as.d[0], m, n) : DG_SHAPE(m, n);
    dg_node *c = dg__node_new(g, DG_OP_MATMUL, s, 2, in);
    if (!c) return NULL;
    c->dtype = out;
    dg__attr_matmul_set(c, (dg_attr_matmul){trans_a, trans_b});
    return c;
}

/* ---- precision ---- */

dg_node *dg_cast(dg_graph *g, dg_node *a, dg_dtype to) {
    if (!check_inputs(g, "cast", 1, &a)) return NULL;
    if (float_dtype(to) && a->dtype == to) return a;
    if (!float_dtype(to) || !float_dtype(a->dtype) || (a->dtype != DG_F32 && to != DG_F32))
        return dg__graph_fail(g, DG_ERR_INVALID, "cast: '%s' from %s to %s: casts go from f32 to bf16 or f16, or back",
                              a->name, dg_dtype_name(a->dtype), dg_dtype_name(to));
    dg_node *n = dg__node_new(g, DG_OP_CAST, a->shape, 1, &a);
    if (n) n->dtype = to;
    return n;
}

/* ---- layout ---- */

dg_node *dg_permute(dg_graph *g, dg_node *a, const int *perm) {
    if (!check_inputs(g, "permute", 1, &a) || !check_float(g, "permute", a)) return NULL;
    if (!perm) return dg__graph_fail(g, DG_ERR_INVALID, "permute: perm is NULL");
    int nd = a->shape.ndim;
    unsigned seen = 0;
    dg_shape s = {.ndim = nd};
    for (int i = 0; i < nd; i++) {
        if (perm[i] < 0 || perm[i] >= nd || (seen >> perm[i] & 1u)) {
            char sa[96];
            return dg__graph_fail(g, DG_ERR_SHAPE, "permute: perm is not a permutation of the %d axes of %s",
                                  nd, dg_shape_str(a->shape, sa, sizeof sa));
        }
        seen |= 1u << perm[i];
        s.d[i] = a->shape.d[perm[i]];
    }
    dg_node *n = dg__node_new(g, DG_OP_PERMUTE, s, 1, &a);
    if (n) {
        n->dtype = a->dtype; /* a copy: 16-bit activations stay 16-bit */
        dg_attr_permute at = {{0, 1, 2, 3}};
        memcpy(at.perm, perm, (size_t)nd * sizeof *perm);
        dg__attr_permute_set(n, at);
    }
    return n;
}

dg_node *dg_transpose(dg_graph *g, dg_node *a) {
    if (!check_inputs(g, "transpose", 1, &a)) return NULL;
    int nd = a->shape.ndim, perm[DG_MAX_DIMS] = {0, 1, 2, 3};
    if (nd < 2) return dg__graph_fail(g, DG_ERR_SHAPE, "transpose: needs at least 2 axes, input has 1");
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    return dg_permute(g, a, perm);
}

dg_node *dg_reshape(dg_graph *g, dg_node *a, dg_shape s) {
    if (!check_inputs(g, "reshape", 1, &a)) return NULL;
    char sa[96], sb[96];
    if (!shape_valid(s) || dg_shape_numel(s) != dg_node_numel(a))
        return dg__graph_fail(g, DG_ERR_SHAPE, "reshape: cannot reshape %s into %s",
                              dg_shape_str(a->shape, sa, sizeof sa), dg_shape_str(s, sb, sizeof sb));
    dg_node *n = dg__node_new(g, DG_OP_RESHAPE, s, 1, &a);
    if (n) {
        n->dtype = a->dtype;
        n->view_of = a;
    }
    return n;
}

/* ---- reductions and broadcast ---- */

static dg_node *reduce(dg_graph *g, dg_op op, dg_node *a, uint32_t axes, bool keepdims) {
    const char *name = dg_op_name(op);
    if (!check_inputs(g, name, 1, &a) || !check_float(g, name, a)) return NULL;
    int nd = a->shape.ndim;
    axes &= (1u << nd) - 1u;
    if (axes == 0)
        return dg__graph_fail(g, DG_ERR_SHAPE, "%s: no axis of the %d-D input selected", name, nd);
    dg_shape s = {0};
    for (int i = 0; i < nd; i++) {
        bool red = axes >> i & 1u;
        if (keepdims) s.d[s.ndim++] = red ? 1 : a->shape.d[i];
        else if (!red) s.d[s.ndim++] = a->shape.d[i];
    }
    if (s.ndim == 0) s = DG_SHAPE(1); /* everything reduced: a 1-element tensor */
    dg_node *n = dg__node_new(g, op, s, 1, &a);
    if (!n) return NULL;
    n->dtype = a->dtype;
    dg__attr_reduce_set(n, (dg_attr_reduce){axes, keepdims});
    return n;
}

dg_node *dg_sum(dg_graph *g, dg_node *a, uint32_t axes, bool keepdims) {
    return reduce(g, DG_OP_SUM, a, axes, keepdims);
}
dg_node *dg_sum_ex(dg_graph *g, dg_node *a, uint32_t axes, bool keepdims, dg_dtype out) {
    /* refused before a node is made (reduce refuses an int32 a itself) */
    if (a && out != a->dtype && out != DG_F32)
        return dg__graph_fail(g, DG_ERR_INVALID, "sum: a %s input summed into %s (its own dtype, or f32 for bf16 "
                              "and f16)", dg_dtype_name(a->dtype), dg_dtype_name(out));
    dg_node *n = reduce(g, DG_OP_SUM, a, axes, keepdims);
    if (n) n->dtype = out;
    return n;
}
dg_node *dg_mean(dg_graph *g, dg_node *a, uint32_t axes, bool keepdims) {
    return reduce(g, DG_OP_MEAN, a, axes, keepdims);
}

dg_node *dg_broadcast_to(dg_graph *g, dg_node *a, dg_shape s) {
    if (!check_inputs(g, "broadcast_to", 1, &a) || !check_f32(g, "broadcast_to", a)) return NULL;
    dg_shape out;
    char sa[96], sb[96];
    if (!shape_valid(s) || s.ndim < a->shape.ndim || !broadcast_shape(a->shape, s, &out) ||
        !dg_shape_eq(out, s))
        return dg__graph_fail(g, DG_ERR_SHAPE, "broadcast_to: cannot broadcast %s to %s",
                              dg_shape_str(a->shape, sa, sizeof sa), dg_shape_str(s, sb, sizeof sb));
    return dg__node_new(g, DG_OP_BROADCAST_TO, s, 1, &a);
}

/* ---- softmax family ---- */

static dg_node *softmax_op(dg_graph *g, dg_op op, dg_node *a, float scale, bool causal) {
    const char *name = dg_op_name(op);
    if (!check_inputs(g, name, 1, &a) || !check_float(g, name, a)) return NULL;
    if (!isfinite(scale) || scale == 0.0f)
        return dg__graph_fail(g, DG_ERR_INVALID, "%s: scale %g must be finite and non-zero", name, (double)scale);
    dg_node *n = dg__node_new(g, op, a->shape, 1, &a);
    if (!n) return NULL;
    n->dtype = a->dtype;
    dg__attr_softmax_set(n, (dg_attr_softmax){scale, causal});
    return n;
}

dg_node *dg_softmax(dg_graph *g, dg_node *a) { return softmax_op(g, DG_OP_SOFTMAX, a, 1.0f, false); }
dg_node *dg_softmax_ex(dg_graph *g, dg_node *a, float scale, bool causal) {
    return softmax_op(g, DG_OP_SOFTMAX, a, scale, causal);
}
dg_node *dg_log_softmax(dg_graph *g, dg_node *a) { return softmax_op(g, DG_OP_LOG_SOFTMAX, a, 1.0f, false); }

dg_node *dg_softmax_cross_entropy(dg_graph *g, dg_node *logits, dg_node *labels) {
    dg_node *in[2] = {logits, labels};
    if (!check_inputs(g, "softmax_cross_entropy", 2, in) || !check_f32(g, "softmax_cross_entropy", logits))
        return NULL;
    char sa[96], sb[96];
    int64_t classes = logits->shape.d[logits->shape.ndim - 1];
    int64_t rows = dg_node_numel(logits) / classes;
    if (labels->dtype != DG_I32 || dg_node_numel(labels) != rows)
        return dg__graph_fail(g, DG_ERR_SHAPE,
                              "softmax_cross_entropy: labels %s must be int32 with one label per row of logits %s "
                              "(%lld rows)", dg_shape_str(labels->shape, sb, sizeof sb),
                              dg_shape_str(logits->shape, sa, sizeof sa), (long long)rows);
    dg_node *loss = dg__node_new(g, DG_OP_SOFTMAX_CE, DG_SHAPE(1), 2, in);
    /* the row log-sum-exp, saved for the backward: logits' shape without
     * its last axis ([r] for 2-D logits) */
    dg_shape rs = logits->shape;
    if (rs.ndim > 1) rs.ndim--;
    else rs = DG_SHAPE(1);
    return loss && dg__side_new(g, loss, rs, "lse") ? loss : NULL;
}
