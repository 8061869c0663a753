/* onnx_build.c: the walk over an ONNX graph that makes duograd nodes (the
 * nodes come in topological order, as ONNX requires), the value table and
 * the helpers the operators read their inputs and attributes through, and
 * the model (dg_onnx_model_new). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_internal.h"
#include "onnx_internal.h"

dg_node *dg__onnx_fail(ox_ctx *c, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const Onnx__NodeProto *n = c->node;
    return dg__graph_fail(c->g, DG_ERR_INVALID, "onnx '%s': node %d '%s' (%s): %s", c->o->name, c->index,
                          n && n->name ? n->name : "", n && n->op_type ? n->op_type : "", msg);
}

static ox_value *find(ox_ctx *c, const char *name) {
    for (int i = c->n_vals - 1; i >= 0; i--)
        if (!strcmp(c->vals[i].name, name)) return &c->vals[i];
    return NULL;
}

static bool put(ox_ctx *c, ox_value v) {
    if (c->n_vals == c->cap_vals) {
        int cap = c->cap_vals ? 2 * c->cap_vals : 64;
        ox_value *nv = realloc(c->vals, (size_t)cap * sizeof *nv);
        if (!nv) return dg__graph_fail(c->g, DG_ERR_OOM, "onnx '%s': out of memory", c->o->name), false;
        c->vals = nv;
        c->cap_vals = cap;
    }
    c->vals[c->n_vals++] = v;
    return true;
}

bool dg__onnx_has_in(const ox_ctx *c, int i) {
    return i < (int)c->node->n_input && c->node->input[i] && *c->node->input[i];
}

ox_value *dg__onnx_in_value(ox_ctx *c, int i) {
    if (!dg__onnx_has_in(c, i)) return dg__onnx_fail(c, "input %d is missing", i), NULL;
    ox_value *v = find(c, c->node->input[i]);
    if (!v) dg__onnx_fail(c, "input %d '%s' is made by no earlier node", i, c->node->input[i]);
    return v;
}

/* float data that a constant leaf reads for as long as the dg_onnx lives:
 * an equal block from an earlier walk is reused */
static const float *pooled(ox_ctx *c, const ox_tensor *k) {
    ox_pool *p = c->o->pool;
    size_t bytes = (size_t)k->numel * sizeof(float);
    for (int i = 0; i < p->n; i++)
        if (!memcmp(p->data[i], &k->numel, sizeof k->numel) && !memcmp(p->data[i] + 2, k->f, bytes))
            return p->data[i] + 2;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        float **nd = realloc(p->data, (size_t)cap * sizeof *nd);
        if (!nd) return NULL;
        p->data = nd;
        p->cap = cap;
    }
    float *d = malloc(bytes + 2 * sizeof(float)); /* the count, then the values */
    if (!d) return NULL;
    memcpy(d, &k->numel, sizeof k->numel);
    memcpy(d + 2, k->f, bytes);
    p->data[p->n++] = d;
    return d + 2;
}

static dg_shape shape_of(const ox_tensor *k) {
    dg_shape s = {.ndim = k->ndim ? k->ndim : 1, .d = {1}};
    for (int d = 0; d < k->ndim && d < DG_MAX_DIMS; d++) s.d[d] = k->dims[d];
    return s;
}

/* A constant as a graph leaf: an initializer is the model's parameter or
 * running statistic (m NULL: made now, on load's scratch graph); any other
 * a constant leaf. */
static dg_node *leaf_of(ox_ctx *c, int i, const ox_tensor *k) {
    if (k->dtype != OX_F32)
        return dg__onnx_fail(c, "input %d '%s' holds %s values where float32 is needed", i, k->name,
                             k->dtype == OX_I64 ? "int64" : dg__onnx_dtype_name(k->onnx_dtype));
    if (k->ndim > DG_MAX_DIMS || k->numel == 0)
        return dg__onnx_fail(c, "input %d '%s' has %d axes and %lld elements (1 to %d axes, not empty)", i, k->name,
                             k->ndim, (long long)k->numel, DG_MAX_DIMS);
    if (k->role != OX_ROLE_NONE && c->m) return k->role == OX_ROLE_PARAM ? c->m->params[k->slot] : c->m->state[k->slot];
    dg_init init = dg_init_data(k->f);
    if (k->role == OX_ROLE_PARAM) return dg_param(c->g, k->name, shape_of(k), init);
    if (k->role == OX_ROLE_STATE) return dg_state(c->g, k->name, shape_of(k), init);
    return dg__onnx_const_leaf(c, k);
}

dg_node *dg__onnx_const_leaf(ox_ctx *c, const ox_tensor *k) {
    const float *data = pooled(c, k);
    if (!data) return dg__graph_fail(c->g, DG_ERR_OOM, "onnx '%s': out of memory", c->o->name);
    return dg_const_data(c->g, k->name, shape_of(k), data);
}

dg_node *dg__onnx_in_node(ox_ctx *c, int i) {
    ox_value *v = dg__onnx_in_value(c, i);
    if (!v) return NULL;
    if (v->node) return v->node;
    if (!v->k) return dg__onnx_fail(c, "input %d '%s' has no value", i, v->name);
    dg_node *n = leaf_of(c, i, v->k);
    if (n) v->node = n; /* one leaf per constant and walk */
    return n;
}

const ox_tensor *dg__onnx_in_const(ox_ctx *c, int i) {
    ox_value *v = dg__onnx_in_value(c, i);
    if (!v) return NULL;
    if (!v->k) return dg__onnx_fail(c, "input %d '%s' must be a constant (an initializer, a Constant or "
                                    "folded from constants): it is computed from the graph's input", i, v->name),
               NULL;
    return v->k;
}

ox_tensor *dg__onnx_new_const(ox_ctx *c, ox_dtype t, int ndim, const int64_t *dims) {
    ox_tensor *k = calloc(1, sizeof *k);
    /* a folded constant is a shape, an index or a small table: a huge one
     * (a Gather of Gathers) is refused, not allocated. Any axis past the
     * limit refuses it, even beside a zero one, and the product is bounded
     * at each step (dims of 2^40 each overflow int64 by the third). */
    int64_t n = 1;
    bool big = false;
    for (int d = 0; d < ndim; d++) {
        big |= dims[d] > OX_MAX_FOLD;
        n = big ? 0 : n * dims[d];
        big |= n > OX_MAX_FOLD;
    }
    size_t es = t == OX_F32 ? sizeof(float) : sizeof(int64_t);
    if (big) {
        free(k);
        return dg__onnx_fail(c, "a folded constant of more than %d elements", OX_MAX_FOLD), NULL;
    }
    void *data = k ? calloc((size_t)(n ? n : 1), es) : NULL;
    if (c->n_tmp == c->cap_tmp && data) {
        int cap = c->cap_tmp ? 2 * c->cap_tmp : 16;
        ox_tensor **nt = realloc(c->tmp, (size_t)cap * sizeof *nt);
        if (nt) {
            c->tmp = nt;
            c->cap_tmp = cap;
        } else {
            free(data);
            data = NULL;
        }
    }
    if (!data) {
        free(k);
        return dg__graph_fail(c->g, DG_ERR_OOM, "onnx '%s': out of memory", c->o->name), NULL;
    }
    *k = (ox_tensor){.name = c->node->output[0], .dtype = t, .ndim = ndim, .numel = n};
    memcpy(k->dims, dims, (size_t)ndim * sizeof *dims);
    if (t == OX_F32) k->f = data;
    else k->i = data;
    c->tmp[c->n_tmp++] = k;
    return k;
}

const Onnx__AttributeProto *dg__onnx_attr(const ox_ctx *c, const char *name) {
    for (size_t a = 0; a < c->node->n_attribute; a++)
        if (c->node->attribute[a]->name && !strcmp(c->node->attribute[a]->name, name)) return c->node->attribute[a];
    return NULL;
}

static const Onnx__AttributeProto *typed(ox_ctx *c, const char *name, Onnx__AttributeProto__AttributeType t,
                                         const char *tname, bool *ok) {
    const Onnx__AttributeProto *a = dg__onnx_attr(c, name);
    if (a && a->type != t) {
        dg__onnx_fail(c, "attribute '%s' must be %s", name, tname);
        *ok = false;
        return NULL;
    }
    return a;
}

int64_t dg__onnx_attr_int(ox_ctx *c, const char *name, int64_t def, bool *ok) {
    const Onnx__AttributeProto *a = typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, "an int", ok);
    return a ? a->i : def;
}

float dg__onnx_attr_float(ox_ctx *c, const char *name, float def, bool *ok) {
    const Onnx__AttributeProto *a = typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, "a float", ok);
    return a ? a->f : def;
}

const char *dg__onnx_attr_string(ox_ctx *c, const char *name, const char *def, bool *ok) {
    const Onnx__AttributeProto *a = typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, "a string", ok);
    if (!a) return def;
    /* protobuf bytes: compared against C strings, so no embedded NUL */
    static const char *const known[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER", "none", "tanh"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (a->s.len == strlen(known[i]) && !memcmp(a->s.data, known[i], a->s.len)) return known[i];
    return "?";
}

int dg__onnx_attr_ints(ox_ctx *c, const char *name, int64_t *v, int max) {
    bool ok = true;
    const Onnx__AttributeProto *a = typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, "a list of ints", &ok);
    if (!ok) return -2;
    if (!a) return -1;
    if (a->n_ints > (size_t)max) {
        dg__onnx_fail(c, "attribute '%s' has %zu values (at most %d)", name, a->n_ints, max);
        return -2;
    }
    if (a->n_ints) memcpy(v, a->ints, a->n_ints * sizeof *v); /* an empty list has no array */
    return (int)a->n_ints;
}

bool dg__onnx_axes(ox_ctx *c, const int64_t *v, int n, int rank, uint32_t *mask) {
    *mask = 0;
    for (int i = 0; i < n; i++) {
        int64_t a = v[i] < 0 ? v[i] + rank : v[i];
        if (a < 0 || a >= rank || (*mask >> a & 1))
            return dg__onnx_fail(c, "axis %lld is out of range or repeated (rank %d)", (long long)v[i], rank), false;
        *mask |= 1u << a;
    }
    return true;
}

static void walk_free(ox_ctx *c) {
    for (int i = 0; i < c->n_tmp; i++) {
        dg__onnx_tensor_clear(c->tmp[i]);
        free(c->tmp[i]);
    }
    free(c->tmp);
    free(c->vals);
}

dg_node *dg__onnx_walk(dg_graph *g, const dg_onnx *o, const dg_model *m, dg_node *const *xs, dg_forward_mode *mode,
                       int *failed) {
    if (failed) *failed = -1;
    for (int i = 0; i < o->n_inputs; i++)
        if (!xs[i]) return NULL;
    ox_ctx c = {.g = g, .o = o, .m = m, .mode = mode, .index = -1};
    bool ok = true;
    for (int i = 0; ok && i < o->n_inputs; i++) ok = put(&c, (ox_value){o->inputs[i], xs[i], NULL});
    for (int i = 0; ok && i < o->n_inits; i++) ok = put(&c, (ox_value){o->inits[i].name, NULL, &o->inits[i]});
    for (size_t n = 0; ok && n < o->graph->n_node; n++) {
        c.node = o->graph->node[n];
        c.index = (int)n;
        /* load checked that no node has more outputs than its operator makes */
        ox_value out[OX_MAX_OUTPUTS] = {{0}};
        int n_out = (int)c.node->n_output;
        for (int k = 0; k < n_out; k++) out[k].name = c.node->output[k];
        ok = dg__onnx_op(c.node->op_type)->build(&c, out) && (out[0].node || out[0].k);
        if (ok && dg_graph_status(g) != DG_OK) ok = false;
        for (int k = 0; ok && k < n_out; k++)
            if (out[k].name && *out[k].name && (out[k].node || out[k].k)) ok = put(&c, out[k]);
        if (!ok && dg_graph_status(g) == DG_OK) dg__onnx_fail(&c, "made no value");
        if (!ok && failed) *failed = (int)n;
    }
    dg_node *y = NULL;
    if (ok) {
        ox_value *v = find(&c, o->output);
        y = v ? v->node : NULL;
        if (!y)
            dg__graph_fail(g, DG_ERR_INVALID, "onnx '%s': output '%s' is %s", o->name, o->output,
                           v ? "a constant, not computed from the input" : "made by no node");
    }
    walk_free(&c);
    return y;
}

dg_node *dg_onnx_forward(dg_graph *g, const dg_onnx *o, dg_node *const *inputs, dg_forward_mode *mode) {
    if (!g) return NULL;
    if (!o || !inputs)
        return dg__graph_fail(g, DG_ERR_INVALID, "dg_onnx_forward: NULL %s", !o ? "model" : "inputs");
    if (dg_graph_status(g) != DG_OK) return NULL;
    return dg__onnx_walk(g, o, NULL, inputs, mode, NULL);
}

static dg_node *onnx_forward(dg_graph *g, const dg_model *m, dg_node *x, dg_forward_mode *mode) {
    return dg__onnx_walk(g, m->source, m, &x, mode, NULL);
}

dg_status dg_onnx_model_new(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out) {
    (void)seed;
    const dg_onnx *o = cfg;
    if (!g || !o || !out) return dg__fail(DG_ERR_INVALID, "onnx model: NULL %s", !g ? "graph" : !o ? "file" : "model");
    if (dg_graph_status(g) != DG_OK) return dg__graph_refuse(g, "onnx model");
    /* a model's forward takes one input [batch, ...] and makes [batch, ...] */
    if (o->n_inputs != 1 || o->in_shapes[0].ndim < 2 || o->out_ndim < 2)
        return dg__graph_fail(g, DG_ERR_INVALID, "onnx '%s': %s (a model takes one input and makes one output, "
                              "each [batch, ...]: build it with dg_onnx_forward)", o->name,
                              o->n_inputs != 1 ? "more than one input" : o->in_shapes[0].ndim < 2 ? "a 1-D input"
                                                                                             : "a 1-D output"),
               dg_graph_status(g);
    *out = (dg_model){.name = "onnx", .in_shape = o->example, .forward = onnx_forward, .source = o,
                      .in_dtype = o->in_dtypes[0]};
    for (int i = 0; i < o->n_params; i++)
        out->params[out->n_params++] = dg_param(g, o->param_of[i]->name, shape_of(o->param_of[i]),
                                                dg_init_data(o->param_of[i]->f));
    for (int i = 0; i < o->n_state; i++)
        out->state[out->n_state++] = dg_state(g, o->state_of[i]->name, shape_of(o->state_of[i]),
                                              dg_init_data(o->state_of[i]->f));
    out->classes = o->classes;
    return dg_graph_status(g);
}
