/* onnx_load.c: a file's bytes to a checked dg_onnx (onnx.h): the framing
 * of the top-level message, protobuf-c's unpack, the opset, the graph's
 * input and output, the initializers, every node's operator and
 * attributes, then one walk of the forward on a scratch graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../graph_internal.h"
#include "onnx_internal.h"

#define OX_MAX_FILE ((size_t)1 << 31) /* protobuf's own limit on one message */

/* A varint at p (at most 10 bytes before end); 0 bytes read when it runs
 * past end. */
static size_t varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (size_t i = 0; i < 10 && p + i < end; i++) {
        *v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) return i + 1;
    }
    return 0;
}

/* The top level of a ModelProto is a sequence of (key, value) fields; a
 * cut or corrupt file breaks that sequence somewhere, and protobuf-c's
 * unpack does not say where. This walks the keys and lengths (no field's
 * contents) and names the offset of the first field that cannot be read. */
static dg_status check_framing(const uint8_t *b, size_t size, const char *name) {
    const uint8_t *p = b, *end = b + size;
    while (p < end) {
        size_t at = (size_t)(p - b);
        uint64_t key, len;
        size_t k = varint(p, end, &key);
        if (!k || key >> 3 == 0 || key >> 3 > (1u << 29))
            return dg__fail(DG_ERR_IO, "onnx '%s' (%zu bytes): no valid field key at byte %zu: not an ONNX model, "
                            "or a damaged one", name, size, at);
        p += k;
        unsigned wire = (unsigned)(key & 7);
        size_t need = 0;
        if (wire == 0) {
            if (!varint(p, end, &len))
                return dg__fail(DG_ERR_IO, "onnx '%s' (%zu bytes): field %llu at byte %zu: its number runs past the "
                                "end (truncated?)", name, size, (unsigned long long)(key >> 3), at);
            need = varint(p, end, &len);
        } else if (wire == 1 || wire == 5) {
            need = wire == 1 ? 8 : 4;
        } else if (wire == 2) {
            size_t l = varint(p, end, &len);
            if (!l || len > (uint64_t)(end - p - (ptrdiff_t)l))
                return dg__fail(DG_ERR_IO, "onnx '%s' (%zu bytes): field %llu at byte %zu claims %llu bytes, %zu "
                                "remain: the file is truncated or damaged", name, size,
                                (unsigned long long)(key >> 3), at, l ? (unsigned long long)len : 0ull,
                                (size_t)(end - p));
            need = l + (size_t)len;
        } else {
            return dg__fail(DG_ERR_IO, "onnx '%s' (%zu bytes): field %llu at byte %zu has wire type %u (groups or "
                            "an invalid type): not an ONNX model", name, size, (unsigned long long)(key >> 3), at,
                            wire);
        }
        if (need > (size_t)(end - p))
            return dg__fail(DG_ERR_IO, "onnx '%s' (%zu bytes): field %llu at byte %zu runs past the end (truncated?)",
                            name, size, (unsigned long long)(key >> 3), at);
        p += need;
    }
    return DG_OK;
}

static dg_status check_opset(dg_onnx *o) {
    for (size_t i = 0; i < o->pb->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *s = o->pb->opset_import[i];
        const char *d = s->domain ? s->domain : "";
        if (*d && strcmp(d, "ai.onnx"))
            return dg__fail(DG_ERR_INVALID, "onnx '%s': operator set of domain '%s' (only the default domain)",
                            o->name, d);
        o->opset = s->has_version ? s->version : 0;
    }
    if (o->opset < 1)
        return dg__fail(DG_ERR_INVALID, "onnx '%s': no opset of the default domain", o->name);
    return DG_OK;
}

static const ox_tensor *init_of(const dg_onnx *o, const char *name) {
    for (int i = 0; i < o->n_inits; i++)
        if (!strcmp(o->inits[i].name, name)) return &o->inits[i];
    return NULL;
}

const ox_tensor *dg__onnx_init(const dg_onnx *o, const char *name) { return name ? init_of(o, name) : NULL; }

/* One graph input that is no initializer: float32 (or int64 / int32 ids,
 * read as int32), 1 to DG_MAX_DIMS axes, each of a fixed size but the
 * first, which may be symbolic (the batch). */
static dg_status check_one_input(dg_onnx *o, const Onnx__ValueInfoProto *in) {
    const Onnx__TypeProto *t = in->type;
    const Onnx__TypeProto__Tensor *tt =
        t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? t->tensor_type : NULL;
    if (!tt || !tt->shape)
        return dg__fail(DG_ERR_INVALID, "onnx '%s': input '%s' is not a tensor of known rank", o->name, in->name);
    bool ids = tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ||
               tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    if (tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && !ids)
        return dg__fail(DG_ERR_INVALID, "onnx '%s': input '%s' is %s (float32, or int64 or int32 ids, supported)",
                        o->name, in->name, dg__onnx_dtype_name(tt->elem_type));
    size_t rank = tt->shape->n_dim;
    if (rank < 1 || rank > DG_MAX_DIMS)
        return dg__fail(DG_ERR_INVALID, "onnx '%s': input '%s' has %zu axes (1 to %d)", o->name, in->name, rank,
                        DG_MAX_DIMS);
    int k = o->n_inputs++;
    o->inputs[k] = in->name;
    o->in_dtypes[k] = ids ? DG_I32 : DG_F32;
    o->in_shapes[k].ndim = (int)rank;
    for (size_t d = 0; d < rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        bool known = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value > 0;
        if (d && (!known || dim->dim_value > DG_MAX_NUMEL))
            return dg__fail(DG_ERR_INVALID, "onnx '%s': input '%s' axis %zu is not a fixed size (only the batch "
                            "axis, the first, may be symbolic)", o->name, in->name, d);
        o->in_shapes[k].d[d] = known && dim->dim_value <= DG_MAX_NUMEL ? dim->dim_value : 0;
    }
    return DG_OK;
}

/* the graph inputs that are no initializers, in the file's order; the
 * first is the model's (onnx.h) */
static dg_status check_input(dg_onnx *o) {
    const Onnx__GraphProto *gr = o->graph;
    for (size_t i = 0; i < gr->n_input; i++) {
        const Onnx__ValueInfoProto *in = gr->input[i];
        if (!in->name || init_of(o, in->name)) continue;
        if (o->n_inputs == OX_MAX_INPUTS)
            return dg__fail(DG_ERR_INVALID, "onnx '%s': more than %d inputs (input '%s')", o->name, OX_MAX_INPUTS,
                            in->name);
        for (int j = 0; j < o->n_inputs; j++)
            if (!strcmp(o->inputs[j], in->name))
                return dg__fail(DG_ERR_INVALID, "onnx '%s': two inputs named '%s'", o->name, in->name);
        dg_status st = check_one_input(o, in);
        if (st != DG_OK) return st;
    }
    if (!o->n_inputs) return dg__fail(DG_ERR_INVALID, "onnx '%s': the graph has no input", o->name);
    o->input = o->inputs[0];
    o->file_batch = o->in_shapes[0].d[0];
    o->example.ndim = o->in_shapes[0].ndim - 1;
    for (int d = 0; d < o->example.ndim; d++) o->example.d[d] = o->in_shapes[0].d[d + 1];
    return DG_OK;
}

static dg_status check_output(dg_onnx *o, const char *want) {
    const Onnx__GraphProto *gr = o->graph;
    if (!gr->n_output) return dg__fail(DG_ERR_INVALID, "onnx '%s': the graph has no output", o->name);
    for (size_t i = 0; i < gr->n_output; i++)
        if (!want || (gr->output[i]->name && !strcmp(gr->output[i]->name, want))) {
            o->output = gr->output[i]->name;
            if (o->output) return DG_OK;
        }
    return dg__fail(DG_ERR_INVALID, "onnx '%s': no graph output named '%s' (the first is '%s')", o->name,
                    want ? want : "", gr->output[0]->name ? gr->output[0]->name : "");
}

/* Whether nd is an Identity of a float32 initializer whose output load made
 * an initializer of its own (untie_identity_copies) */
static bool identity_copy(const dg_onnx *o, const Onnx__NodeProto *nd) {
    if (!nd->op_type || strcmp(nd->op_type, "Identity") || nd->n_input < 1 || nd->n_output < 1 || !nd->output[0])
        return false;
    const ox_tensor *t = init_of(o, nd->output[0]);
    return t && t->identity_copy;
}

/* PyTorch's TorchScript exporter, in evaluation mode, merges initializers
 * of equal values into one and hands it to each user through an Identity
 * node: a ResNet-18's twenty batch norms share one scale of ones per width,
 * one shift of zeros, one running mean and one running variance. Read as
 * written, those layers would train one shared parameter and would not
 * keep running statistics at all (the shared tensor's first user decides
 * its role). So the output of an Identity of a float32 initializer becomes
 * an initializer of its own, a copy, whose role its own users decide; the
 * Identity then passes that copy on (onnx_ops.c), and the merged tensor is
 * a parameter only where a node reads it directly. A model that means to
 * tie two layers names one initializer in both. */
static dg_status untie_identity_copies(dg_onnx *o) {
    const Onnx__GraphProto *gr = o->graph;
    for (size_t n = 0; n < gr->n_node; n++) {
        const Onnx__NodeProto *nd = gr->node[n];
        if (!nd->op_type || strcmp(nd->op_type, "Identity") || nd->n_input < 1 || nd->n_output < 1 ||
            !nd->input[0] || !nd->output[0] || !*nd->output[0] || init_of(o, nd->output[0]))
            continue;
        const ox_tensor *t = init_of(o, nd->input[0]);
        if (!t || t->dtype != OX_F32) continue;
        ox_tensor copy = *t;
        copy.name = nd->output[0];
        copy.role = OX_ROLE_NONE;
        copy.identity_copy = true;
        copy.i = NULL;
        copy.f = malloc((size_t)(t->numel > 0 ? t->numel : 1) * sizeof *copy.f);
        if (!copy.f) return dg__fail(DG_ERR_OOM, "onnx '%s': out of memory", o->name);
        memcpy(copy.f, t->f, (size_t)t->numel * sizeof *copy.f);
        o->inits[o->n_inits++] = copy;
    }
    return DG_OK;
}

/* Every node: a supported operator of the default domain, attributes it
 * reads, no output it does not make; and each initializer's role, in the
 * order the nodes first use them (an Identity that passes on a copy gives
 * its input none). */
static dg_status check_nodes(dg_onnx *o) {
    const Onnx__GraphProto *gr = o->graph;
    for (size_t n = 0; n < gr->n_node; n++) {
        const Onnx__NodeProto *nd = gr->node[n];
        const char *op = nd->op_type ? nd->op_type : "", *nm = nd->name ? nd->name : "";
        const ox_op *info = dg__onnx_op(op);
        if ((nd->domain && *nd->domain && strcmp(nd->domain, "ai.onnx")) || !info)
            return dg__fail(DG_ERR_INVALID, "onnx '%s': node %zu '%s': operator %s%s%s is not supported", o->name, n,
                            nm, nd->domain && *nd->domain ? nd->domain : "", nd->domain && *nd->domain ? "." : "",
                            op);
        /* an older file reads alike where its operators have not changed
         * since (the backend node tests' Conv is opset 11's) */
        if (o->opset < info->since)
            return dg__fail(DG_ERR_INVALID, "onnx '%s': node %zu '%s': opset %lld's %s is not the one read (opset "
                            "%d or later: re-export with opset_version=13 or more)", o->name, n, nm,
                            (long long)o->opset, op, info->since);
        for (size_t a = 0; a < nd->n_attribute; a++) {
            const char *an = nd->attribute[a]->name ? nd->attribute[a]->name : "";
            size_t len = strlen(an);
            const char *hit = len ? strstr(info->attrs, an) : NULL;
            while (hit && ((hit > info->attrs && hit[-1] != ' ') || (hit[len] && hit[len] != ' ')))
                hit = strstr(hit + 1, an);
            if (!hit)
                return dg__fail(DG_ERR_INVALID, "onnx '%s': node %zu '%s' (%s): attribute '%s' is not supported "
                                "(%s%s)", o->name, n, nm, op, an, *info->attrs ? "it reads: " : "it reads none",
                                info->attrs);
        }
        /* the walk keeps a node's outputs in a table of OX_MAX_OUTPUTS:
         * omitted optional outputs (empty names) count too */
        if (nd->n_output > OX_MAX_OUTPUTS)
            return dg__fail(DG_ERR_INVALID, "onnx '%s': node %zu '%s' (%s): %zu outputs (at most %d, empty names "
                            "included)", o->name, n, nm, op, nd->n_output, OX_MAX_OUTPUTS);
        for (size_t k = (size_t)info->max_outputs; k < nd->n_output; k++)
            if (nd->output[k] && *nd->output[k])
                return dg__fail(DG_ERR_INVALID, "onnx '%s': node %zu '%s' (%s): output %zu '%s' is not supported "
                                "(%d output%s)", o->name, n, nm, op, k, nd->output[k], info->max_outputs,
                                info->max_outputs > 1 ? "s" : "");
        if (!nd->n_output || !nd->output[0] || !*nd->output[0])
            return dg__fail(DG_ERR_INVALID, "onnx '%s': node %zu '%s' (%s) has no output", o->name, n, nm, op);
        for (size_t i = 0; i < nd->n_input && !identity_copy(o, nd); i++) {
            ox_tensor *t = (ox_tensor *)init_of(o, nd->input[i] ? nd->input[i] : "");
            if (!t || (info->const_in >> i & 1) || t->role != OX_ROLE_NONE || t->dtype != OX_F32) continue;
            bool state = info->state_in >> i & 1;
            int *count = state ? &o->n_state : &o->n_params;
            if (*count == DG_MODEL_MAX_PARAMS)
                return dg__fail(DG_ERR_INVALID, "onnx '%s': more than %d %s tensors (node %zu '%s')", o->name,
                                DG_MODEL_MAX_PARAMS, state ? "running-statistics" : "parameter", n, nm);
            t->role = state ? OX_ROLE_STATE : OX_ROLE_PARAM;
            t->slot = *count;
            (state ? o->state_of : o->param_of)[(*count)++] = t;
        }
    }
    return DG_OK;
}

/* an input given a value at load (dg_onnx_opts.consts): a copy as an
 * initializer named by the graph input it replaces */
static dg_status given_const(dg_onnx *o, const dg_onnx_tensor *v, ox_tensor *t) {
    const Onnx__GraphProto *gr = o->graph;
    const char *name = NULL;
    for (size_t i = 0; i < gr->n_input && !name; i++)
        if (gr->input[i]->name && !strcmp(gr->input[i]->name, v->name) && !init_of(o, v->name))
            name = gr->input[i]->name;
    if (!name) return dg__fail(DG_ERR_INVALID, "onnx '%s': no graph input '%s' to give a value", o->name, v->name);
    if ((!v->f == !v->i) || v->ndim < 0 || v->ndim > OX_MAX_RANK || v->numel < 0 || v->numel > OX_MAX_FOLD)
        return dg__fail(DG_ERR_INVALID, "onnx '%s': the value given for '%s' is not float32 or int64 values of 0 to "
                        "%d axes", o->name, name, OX_MAX_RANK);
    int64_t n = 1;
    for (int d = 0; d < v->ndim && n >= 0; d++) /* bounded each step: no overflow */
        n = v->dims[d] < 0 || v->dims[d] > OX_MAX_FOLD || n * v->dims[d] > OX_MAX_FOLD ? -1 : n * v->dims[d];
    if (n != v->numel) return dg__fail(DG_ERR_INVALID, "onnx '%s': the value given for '%s' has %lld elements, its "
                                       "dims %lld", o->name, name, (long long)v->numel, (long long)n);
    *t = (ox_tensor){.name = name, .dtype = v->f ? OX_F32 : OX_I64, .ndim = v->ndim, .numel = n,
                     .onnx_dtype = v->f ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT64};
    memcpy(t->dims, v->dims, (size_t)v->ndim * sizeof *t->dims);
    size_t bytes = (size_t)n * (v->f ? sizeof(float) : sizeof(int64_t));
    void *data = malloc(bytes ? bytes : 1);
    if (!data) return dg__fail(DG_ERR_OOM, "onnx '%s': out of memory", o->name);
    if (bytes) memcpy(data, v->f ? (const void *)v->f : (const void *)v->i, bytes);
    if (v->f) t->f = data;
    else t->i = data;
    return DG_OK;
}

static dg_status check_model(dg_onnx *o, const dg_onnx_opts *opts) {
    dg_status st = check_opset(o);
    if (st != DG_OK) return st;
    o->graph = o->pb->graph;
    if (!o->graph) return dg__fail(DG_ERR_INVALID, "onnx '%s': the model has no graph", o->name);
    const Onnx__GraphProto *gr = o->graph;
    if (gr->n_sparse_initializer)
        return dg__fail(DG_ERR_INVALID, "onnx '%s': sparse initializers are not supported", o->name);
    size_t identities = 0; /* room for untie_identity_copies */
    for (size_t n = 0; n < gr->n_node; n++)
        identities += gr->node[n]->op_type && !strcmp(gr->node[n]->op_type, "Identity");
    o->inits = calloc(gr->n_initializer + (size_t)(opts->n_consts > 0 ? opts->n_consts : 0) + identities + 1,
                      sizeof *o->inits);
    if (!o->inits) return dg__fail(DG_ERR_OOM, "onnx '%s': out of memory", o->name);
    for (size_t i = 0; i < gr->n_initializer; i++, o->n_inits++) {
        char what[400];
        snprintf(what, sizeof what, "onnx '%s': initializer %zu '%s'", o->name, i,
                 gr->initializer[i]->name ? gr->initializer[i]->name : "");
        if ((st = dg__onnx_tensor(gr->initializer[i], what, &o->inits[i])) != DG_OK) {
            o->n_inits++; /* cleared with the others */
            return st;
        }
    }
    for (int i = 0; i < opts->n_consts; i++, o->n_inits++)
        if ((st = given_const(o, &opts->consts[i], &o->inits[o->n_inits])) != DG_OK) return st;
    /* the operators first: a file with one this importer lacks is refused
     * naming it, whatever its inputs (NonZero's are bool) */
    if ((st = untie_identity_copies(o)) != DG_OK || (st = check_nodes(o)) != DG_OK || (st = check_input(o)) != DG_OK ||
        (st = check_output(o, opts->output)) != DG_OK)
        return st;
    /* the forward once, so that shapes that do not fit are refused now */
    int64_t batch = opts->batch > 0 ? opts->batch : o->file_batch > 0 ? o->file_batch : 2;
    dg_graph *g = dg_graph_new();
    if (!g) return dg__fail(DG_ERR_OOM, "onnx '%s': out of memory", o->name);
    dg_node *xs[OX_MAX_INPUTS];
    for (int i = 0; i < o->n_inputs; i++) {
        dg_shape s;
        dg_onnx_input_shape(o, i, batch, &s);
        xs[i] = o->in_dtypes[i] == DG_I32 ? dg_input_i32(g, o->inputs[i], s) : dg_input(g, o->inputs[i], s);
        if (!xs[i]) { /* each axis fits, their product may not: say which file and input */
            char msg[512];
            snprintf(msg, sizeof msg, "%s", dg_last_error());
            st = dg__fail(dg_graph_status(g), "onnx '%s': input '%s' at batch %lld: %s", o->name, o->inputs[i],
                          (long long)batch, msg);
            dg_graph_free(g);
            return st;
        }
    }
    int failed;
    dg_node *y = dg__onnx_walk(g, o, NULL, xs, NULL, &failed);
    st = y ? DG_OK : dg_graph_status(g);
    if (st != DG_OK && failed >= 0 && strncmp(dg_last_error(), "onnx '", 6)) {
        /* a builder's own message (shapes): say which node made it */
        char msg[512];
        const Onnx__NodeProto *nd = gr->node[failed];
        snprintf(msg, sizeof msg, "%s", dg_last_error());
        st = dg__fail(st, "onnx '%s': node %d '%s' (%s) at batch %lld: %s", o->name, failed, nd->name ? nd->name : "",
                      nd->op_type, (long long)batch, msg);
    }
    if (st == DG_OK) {
        o->classes = (int)y->shape.d[y->shape.ndim - 1];
        o->out_ndim = y->shape.ndim;
    }
    dg_graph_free(g);
    return st;
}

dg_status dg_onnx_load_buffer(const void *data, size_t size, const char *name, const dg_onnx_opts *opts,
                              dg_onnx **out) {
    if (!out) return dg__fail(DG_ERR_INVALID, "dg_onnx_load_buffer: NULL out");
    *out = NULL;
    if (!data && size) return dg__fail(DG_ERR_INVALID, "dg_onnx_load_buffer: NULL data");
    const dg_onnx_opts dflt = {0};
    dg_onnx *o = calloc(1, sizeof *o);
    if (!o) return dg__fail(DG_ERR_OOM, "onnx: out of memory");
    snprintf(o->name, sizeof o->name, "%s", name ? name : "buffer");
    dg_status st = size ? check_framing(data, size, o->name)
                        : dg__fail(DG_ERR_IO, "onnx '%s': the file is empty", o->name);
    if (st == DG_OK && size > OX_MAX_FILE)
        st = dg__fail(DG_ERR_IO, "onnx '%s': %zu bytes, more than protobuf's 2 GiB", o->name, size);
    if (st == DG_OK) {
        o->pb = onnx__model_proto__unpack(NULL, size, data);
        if (!o->pb)
            st = dg__fail(DG_ERR_IO, "onnx '%s' (%zu bytes): protobuf-c could not unpack it as an ONNX ModelProto "
                          "(a nested message is malformed, or a field has the wrong type)", o->name, size);
    }
    if (st == DG_OK) {
        uLong crc = crc32(0L, Z_NULL, 0);
        for (size_t at = 0; at < size; at += 1u << 30) /* crc32 takes a uInt length */
            crc = crc32(crc, (const Bytef *)data + at, (uInt)(size - at < (1u << 30) ? size - at : 1u << 30));
        snprintf(o->digest, sizeof o->digest, "%zu bytes, crc32 %08lx", size, (unsigned long)crc);
    }
    if (st == DG_OK && !(o->pool = calloc(1, sizeof *o->pool))) st = dg__fail(DG_ERR_OOM, "onnx: out of memory");
    if (st == DG_OK) st = check_model(o, opts ? opts : &dflt);
    if (st != DG_OK) {
        dg_onnx_free(o);
        return st;
    }
    *out = o;
    return DG_OK;
}

dg_status dg_onnx_load(const char *path, const dg_onnx_opts *opts, dg_onnx **out) {
    if (!path || !out) return dg__fail(DG_ERR_INVALID, "dg_onnx_load: NULL %s", !path ? "path" : "out");
    *out = NULL;
    FILE *f;
    dg_status st0 = dg__onnx_open(path, "onnx", &f);
    if (st0 != DG_OK) return st0;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    dg_status st = DG_OK;
    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 1 << 16;
            uint8_t *nb = ncap <= OX_MAX_FILE + 1 ? realloc(buf, ncap) : NULL;
            if (!nb) {
                st = dg__fail(cap > OX_MAX_FILE ? DG_ERR_IO : DG_ERR_OOM, "onnx '%s': %s", path,
                              cap > OX_MAX_FILE ? "more than protobuf's 2 GiB" : "out of memory reading it");
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) st = dg__fail(DG_ERR_IO, "onnx '%s': read error after %zu bytes", path, n);
            break;
        }
    }
    fclose(f);
    if (st == DG_OK) st = dg_onnx_load_buffer(buf, n, path, opts, out);
    free(buf);
    return st;
}

void dg_onnx_free(dg_onnx *o) {
    if (!o) return;
    for (int i = 0; i < o->n_inits; i++) dg__onnx_tensor_clear(&o->inits[i]);
    free(o->inits);
    if (o->pool) {
        for (int i = 0; i < o->pool->n; i++) free(o->pool->data[i]);
        free(o->pool->data);
        free(o->pool);
    }
    if (o->pb) onnx__model_proto__free_unpacked(o->pb, NULL);
    free(o);
}

const char *dg_onnx_input_name(const dg_onnx *o) { return o ? o->input : NULL; }
int         dg_onnx_n_inputs(const dg_onnx *o) { return o ? o->n_inputs : 0; }
const char *dg_onnx_input_name_at(const dg_onnx *o, int i) {
    return o && i >= 0 && i < o->n_inputs ? o->inputs[i] : NULL;
}
dg_dtype dg_onnx_input_dtype(const dg_onnx *o, int i) {
    return o && i >= 0 && i < o->n_inputs ? o->in_dtypes[i] : DG_F32;
}

bool dg_onnx_input_shape(const dg_onnx *o, int i, int64_t batch, dg_shape *out) {
    if (!o || !out || i < 0 || i >= o->n_inputs) return false;
    *out = o->in_shapes[i];
    /* the first input's batch is free; another's follows it where symbolic
     * or the first's size in the file (a model exported at a fixed batch) */
    if (batch > 0 && (i == 0 || !out->d[0] || out->d[0] == o->file_batch)) out->d[0] = batch;
    return out->d[0] > 0;
}
const char *dg_onnx_output_name(const dg_onnx *o) { return o ? o->output : NULL; }
dg_shape    dg_onnx_example_shape(const dg_onnx *o) { return o ? o->example : (dg_shape){0}; }
int         dg_onnx_classes(const dg_onnx *o) { return o ? o->classes : 0; }
const char *dg_onnx_digest(const dg_onnx *o) { return o ? o->digest : NULL; }
