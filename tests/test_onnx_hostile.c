/* test_onnx_hostile.c: the ONNX importer (core/onnx/onnx.h) against
 * hostile files, built here with protobuf-c's generated structs (the
 * reader's own onnx.proto) and packed into bytes for dg_onnx_load_buffer:
 * each must be refused with a message naming the node or tensor and the
 * problem, never crash, overflow or leak (the ASan + UBSan build runs this
 * suite), or load where its values are read right. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "core/onnx/onnx.h"
#include "core/status.h"
#include "onnx.pb-c.h"
#include "test_util.h"

/* everything a model is made of, freed after the test */
static void *held[1024];
static int n_held;

static void *grab(size_t n) {
    cr_assert_lt(n_held, 1024);
    void *p = calloc(1, n ? n : 1);
    cr_assert_not_null(p);
    return held[n_held++] = p;
}

static void release(void) {
    while (n_held) free(held[--n_held]);
}

TestSuite(onnx_hostile, .fini = release);

/* a float32 value info [dims...]; dims[i] < 0: symbolic ("N") */
static Onnx__ValueInfoProto *value(const char *name, int elem, int rank, const int64_t *dims) {
    Onnx__TensorShapeProto *sh = grab(sizeof *sh);
    *sh = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    sh->n_dim = (size_t)rank;
    sh->dim = grab((size_t)rank * sizeof *sh->dim);
    for (int d = 0; d < rank; d++) {
        Onnx__TensorShapeProto__Dimension *dim = grab(sizeof *dim);
        *dim = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (dims[d] == INT64_MIN) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = "N";
        } else {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = dims[d];
        }
        sh->dim[d] = dim;
    }
    Onnx__TypeProto__Tensor *tt = grab(sizeof *tt);
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    tt->shape = sh;
    Onnx__TypeProto *t = grab(sizeof *t);
    *t = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    Onnx__ValueInfoProto *v = grab(sizeof *v);
    *v = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    v->name = (char *)name;
    v->type = t;
    return v;
}

/* a node; ins and outs NULL-terminated ("" an empty optional name) */
static Onnx__NodeProto *node(const char *op, const char *name, const char *const *ins, const char *const *outs) {
    Onnx__NodeProto *n = grab(sizeof *n);
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    n->op_type = (char *)op;
    n->name = (char *)name;
    while (ins[n->n_input]) n->n_input++;
    while (outs[n->n_output]) n->n_output++;
    n->input = (char **)ins;
    n->output = (char **)outs;
    n->attribute = grab(8 * sizeof *n->attribute);
    return n;
}

static void attr_ints(Onnx__NodeProto *n, const char *name, int count, const int64_t *v) {
    Onnx__AttributeProto *a = grab(sizeof *a);
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->n_ints = (size_t)count;
    a->ints = (int64_t *)v;
    n->attribute[n->n_attribute++] = a;
}

static void attr_int(Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = grab(sizeof *a);
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    n->attribute[n->n_attribute++] = a;
}

/* an initializer of dims[ndim] holding count values (f or i) */
static Onnx__TensorProto *tensor(const char *name, int ndim, const int64_t *dims, const float *f, const int64_t *i,
                                 size_t count) {
    Onnx__TensorProto *t = grab(sizeof *t);
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    t->name = (char *)name;
    t->n_dims = (size_t)ndim;
    t->dims = (int64_t *)dims;
    t->has_data_type = 1;
    t->data_type = f ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    if (f) t->n_float_data = count, t->float_data = (float *)f;
    else t->n_int64_data = count, t->int64_data = (int64_t *)i;
    return t;
}

/* A model of opset 13: input x (float32 xdims[xrank], INT64_MIN: "N"),
 * the nodes and initializers (NULL-terminated), output `out`; loaded from
 * its packed bytes. */
static dg_status load(Onnx__NodeProto *const *nodes, Onnx__TensorProto *const *inits, int xrank,
                      const int64_t *xdims, const char *out, dg_onnx **o) {
    Onnx__GraphProto *g = grab(sizeof *g);
    *g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    g->name = "hostile";
    while (nodes[g->n_node]) g->n_node++;
    g->node = (Onnx__NodeProto **)nodes;
    while (inits && inits[g->n_initializer]) g->n_initializer++;
    g->initializer = (Onnx__TensorProto **)inits;
    g->n_input = 1;
    g->input = grab(sizeof *g->input);
    g->input[0] = value("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, xrank, xdims);
    g->n_output = 1;
    g->output = grab(sizeof *g->output);
    g->output[0] = value(out, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL);
    Onnx__OperatorSetIdProto *os = grab(sizeof *os);
    *os = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    os->domain = "";
    os->has_version = 1;
    os->version = 13;
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.n_opset_import = 1;
    m.opset_import = &os;
    m.graph = g;
    size_t n = onnx__model_proto__get_packed_size(&m);
    uint8_t *bytes = grab(n);
    cr_assert_eq(onnx__model_proto__pack(&m, bytes), n);
    *o = (dg_onnx *)&n; /* must be NULL after a refusal */
    return dg_onnx_load_buffer(bytes, n, "hostile", NULL, o);
}

/* the load is refused with DG_ERR_INVALID or DG_ERR_SHAPE, *o NULL, and a
 * message holding `what` */
static void refused(dg_status st, dg_onnx *const *o, const char *what) {
    cr_assert(st == DG_ERR_INVALID || st == DG_ERR_SHAPE, "%s: loaded (%s: %s)", what, dg_status_name(st),
              dg_last_error());
    cr_assert_null(*o, "%s: *out not NULL after a refusal", what);
    cr_assert(strstr(dg_last_error(), "onnx 'hostile'"), "the message does not name the file: %s", dg_last_error());
    cr_assert(strstr(dg_last_error(), what), "the message does not say '%s': %s", what, dg_last_error());
}

static const int64_t x2[] = {INT64_MIN, 4};

/* A node may name more outputs than its operator makes when the extra
 * names are empty (ONNX's omitted optional outputs), but the walk's table
 * of a node's outputs has OX_MAX_OUTPUTS entries: forty empty names wrote
 * past it on the stack (ASan: stack-buffer-overflow). Refused by count. */
Test(onnx_hostile, a_node_with_forty_empty_outputs_is_refused) {
    static const char *outs[42] = {"y"};
    for (int k = 1; k < 41; k++) outs[k] = "";
    Onnx__NodeProto *relu = node("Relu", "r", (const char *[]){"x", NULL}, outs);
    dg_onnx *o;
    refused(load((Onnx__NodeProto *[]){relu, NULL}, NULL, 2, x2, "y", &o), &o, "node 0 'r' (Relu): 41 outputs");
}

/* Split sizes that overflow int64 to the axis' length (2^63-1 twice, then
 * 6: the sum wraps to 4) passed the sum check, and the first part's loop
 * wrote 2^63-1 entries into a stack array of 4096 (a crash). Each size is
 * checked on its own; sizes that merely do not sum are refused too. */
Test(onnx_hostile, split_sizes_that_overflow_or_do_not_sum_are_refused) {
    static const int64_t three[] = {3}, two[] = {2};
    static const int64_t wrap[] = {INT64_MAX, INT64_MAX, 6}, short_[] = {1, 2}, neg[] = {-1, 5};
    const int64_t *sizes[] = {wrap, short_, neg};
    for (int t = 0; t < 3; t++) {
        Onnx__TensorProto *s = tensor("s", 1, t ? two : three, NULL, sizes[t], t ? 2 : 3);
        static const char *outs3[] = {"a", "b", "c", NULL}, *outs2[] = {"a", "b", NULL};
        Onnx__NodeProto *split = node("Split", "sp", (const char *[]){"x", "s", NULL}, t ? outs2 : outs3);
        attr_int(split, "axis", 1);
        dg_onnx *o;
        refused(load((Onnx__NodeProto *[]){split, NULL}, (Onnx__TensorProto *[]){s, NULL}, 2, x2, "a", &o), &o,
                "split sizes must be");
    }
}

/* MaxPool's kernel_shape is the attribute's int64 values: 2^32 + 2 was
 * cast to int (2) and the file loaded as a 2x2 pool; 2^62 overflowed
 * SAME padding's arithmetic (UBSan). Each must be 1 to 2^20. */
Test(onnx_hostile, a_pool_kernel_beyond_int_is_refused) {
    static const int64_t x4[] = {INT64_MIN, 1, 8, 8};
    static const int64_t wide[] = {((int64_t)1 << 32) + 2, 2}, huge[] = {(int64_t)1 << 62, (int64_t)1 << 62},
                         zero[] = {0, 2};
    const int64_t *ks[] = {wide, huge, zero};
    for (int t = 0; t < 3; t++) {
        Onnx__NodeProto *mp = node("MaxPool", "mp", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
        attr_ints(mp, "kernel_shape", 2, ks[t]);
        if (t == 1) {
            Onnx__AttributeProto *a = grab(sizeof *a);
            *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
            a->name = "auto_pad";
            a->has_type = 1;
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
            a->has_s = 1;
            a->s = (ProtobufCBinaryData){10, (uint8_t *)"SAME_UPPER"};
            mp->attribute[mp->n_attribute++] = a;
        }
        dg_onnx *o;
        refused(load((Onnx__NodeProto *[]){mp, NULL}, NULL, 4, x4, "y", &o), &o, "kernel_shape");
    }
}

/* Slice of a shape vector with step 2^63-1 (a legal step: one element)
 * overflowed the length's arithmetic (end - start + step - 1) and the
 * fold asked for 2^64 - 1 bytes; step -2^63 overflowed its negation. The
 * Reshape x [N, 3, 4] -> [Shape(x)[0:3:huge], 12] = [N, 12] loads. */
Test(onnx_hostile, a_slice_step_of_int64_extremes_takes_one_element) {
    static const int64_t x3[] = {INT64_MIN, 3, 4}, one[] = {1};
    static const int64_t st[] = {0}, en[] = {3}, ax[] = {0}, up[] = {INT64_MAX}, dn[] = {INT64_MIN}, st_dn[] = {-3},
                         en_dn[] = {-4}, twelve[] = {12};
    for (int t = 0; t < 2; t++) {
        Onnx__TensorProto *inits[] = {tensor("st", 1, one, NULL, t ? st_dn : st, 1),
                                      tensor("en", 1, one, NULL, t ? en_dn : en, 1), tensor("ax", 1, one, NULL, ax, 1),
                                      tensor("step", 1, one, NULL, t ? dn : up, 1),
                                      tensor("twelve", 1, one, NULL, twelve, 1), NULL};
        Onnx__NodeProto *nodes[] = {
            node("Shape", "sh", (const char *[]){"x", NULL}, (const char *[]){"s", NULL}),
            node("Slice", "sl", (const char *[]){"s", "st", "en", "ax", "step", NULL}, (const char *[]){"b", NULL}),
            node("Concat", "cat", (const char *[]){"b", "twelve", NULL}, (const char *[]){"shape", NULL}),
            node("Reshape", "rs", (const char *[]){"x", "shape", NULL}, (const char *[]){"y", NULL}), NULL};
        attr_int(nodes[2], "axis", 0);
        dg_onnx *o;
        dg_status st_ = load(nodes, inits, 3, x3, "y", &o);
        cr_assert_eq(st_, DG_OK, "step %s: %s", t ? "-2^63" : "2^63-1", dg_last_error());
        cr_assert_eq(dg_onnx_classes(o), 12);
        dg_onnx_free(o);
    }
}

/* A zero-sized initializer may declare any other dims; 2^62 was taken
 * (numel 0) and became a shape entry that Gather and Squeeze folded.
 * Each dim is 0 to 2^40 whatever the others. */
Test(onnx_hostile, an_initializer_dim_beyond_2_40_is_refused_even_when_empty) {
    static const int64_t dims[] = {0, (int64_t)1 << 62};
    Onnx__TensorProto *e = tensor("e", 2, dims, NULL, NULL, 0);
    e->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    Onnx__NodeProto *relu = node("Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    dg_onnx *o;
    refused(load((Onnx__NodeProto *[]){relu, NULL}, (Onnx__TensorProto *[]){e, NULL}, 2, x2, "y", &o), &o,
            "initializer 0 'e': dimension 1 is 4611686018427387904");
}

/* A folded Gather of a zero-sized table [0, 2^40, 2^40] by [0]: the
 * result's dims multiply past int64 (UBSan) and wrapped to 0 elements.
 * Refused as a folded constant too large before any index is read. */
Test(onnx_hostile, a_folded_constant_whose_dims_overflow_is_refused) {
    static const int64_t dims[] = {0, (int64_t)1 << 40, (int64_t)1 << 40}, one[] = {1}, zero[] = {0};
    Onnx__TensorProto *e = tensor("e", 3, dims, NULL, NULL, 0);
    e->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    Onnx__TensorProto *ix = tensor("ix", 1, one, NULL, zero, 1);
    Onnx__NodeProto *gather = node("Gather", "g", (const char *[]){"e", "ix", NULL}, (const char *[]){"k", NULL});
    Onnx__NodeProto *relu = node("Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    dg_onnx *o;
    refused(load((Onnx__NodeProto *[]){gather, relu, NULL}, (Onnx__TensorProto *[]){e, ix, NULL}, 2, x2, "y", &o), &o,
            "node 0 'g' (Gather): a folded constant of more than");
}

/* The refusals that held before this suite: one case each, so that a
 * change which loses one is seen. */
Test(onnx_hostile, malformed_graphs_are_refused_by_name) {
    static const int64_t d4[] = {4}, d40[] = {(int64_t)1 << 40}, d44[] = {4, 4}, one[] = {1},
                         far[] = {7}, x4neg[] = {INT64_MIN, -3}, x3[] = {INT64_MIN, 3};
    static const float w[] = {1, 2};
    dg_onnx *o;
    /* an initializer whose dims say 4 and whose data holds 2 */
    Onnx__NodeProto *add = node("Add", "a", (const char *[]){"x", "w", NULL}, (const char *[]){"y", NULL});
    refused(load((Onnx__NodeProto *[]){add, NULL}, (Onnx__TensorProto *[]){tensor("w", 1, d4, w, NULL, 2), NULL}, 2,
                 x2, "y", &o), &o, "initializer 0 'w': float32 tensor of 4 elements holds 8 bytes of data (16 expected)");
    /* 2^40 elements declared, two given */
    refused(load((Onnx__NodeProto *[]){add, NULL}, (Onnx__TensorProto *[]){tensor("w", 1, d40, w, NULL, 2), NULL}, 2,
                 x2, "y", &o), &o, "of 1099511627776 elements holds 8 bytes");
    /* a constant index out of range of the axis */
    Onnx__NodeProto *gather = node("Gather", "g", (const char *[]){"x", "ix", NULL}, (const char *[]){"y", NULL});
    attr_int(gather, "axis", 1);
    refused(load((Onnx__NodeProto *[]){gather, NULL}, (Onnx__TensorProto *[]){tensor("ix", 1, one, NULL, far, 1), NULL},
                 2, x2, "y", &o), &o, "node 0 'g' (Gather): index 7 out of range (4)");
    /* a Concat of [N, 4] and a [4, 4] constant on axis 1 (N is 2 at load) */
    static const float w16[16] = {0};
    Onnx__NodeProto *cat = node("Concat", "c", (const char *[]){"x", "w", NULL}, (const char *[]){"y", NULL});
    attr_int(cat, "axis", 1);
    refused(load((Onnx__NodeProto *[]){cat, NULL}, (Onnx__TensorProto *[]){tensor("w", 2, d44, w16, NULL, 16), NULL},
                 2, x2, "y", &o), &o, "node 0 'c' (Concat): input 1's shape differs from input 0's off axis 1");
    /* a cycle: a reads b, b reads a */
    Onnx__NodeProto *a = node("Relu", "na", (const char *[]){"b", NULL}, (const char *[]){"a", NULL});
    Onnx__NodeProto *b = node("Relu", "nb", (const char *[]){"a", NULL}, (const char *[]){"b", NULL});
    refused(load((Onnx__NodeProto *[]){a, b, NULL}, NULL, 2, x2, "b", &o), &o,
            "node 0 'na' (Relu): input 0 'b' is made by no earlier node");
    /* a name nothing makes */
    Onnx__NodeProto *lost = node("Relu", "r", (const char *[]){"ghost", NULL}, (const char *[]){"y", NULL});
    refused(load((Onnx__NodeProto *[]){lost, NULL}, NULL, 2, x2, "y", &o), &o, "input 0 'ghost' is made by no earlier");
    /* a negative input dimension */
    Onnx__NodeProto *relu = node("Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    refused(load((Onnx__NodeProto *[]){relu, NULL}, NULL, 2, x4neg, "y", &o), &o,
            "input 'x' axis 1 is not a fixed size");
    /* Split into parts of an axis that does not divide */
    Onnx__NodeProto *split = node("Split", "sp", (const char *[]){"x", NULL}, (const char *[]){"p", "q", NULL});
    attr_int(split, "axis", 1);
    refused(load((Onnx__NodeProto *[]){split, NULL}, NULL, 2, x3, "p", &o), &o, "3 entries do not split into 2");
    /* a Transpose perm that repeats an axis */
    static const int64_t perm[] = {0, 0};
    Onnx__NodeProto *tr = node("Transpose", "t", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    attr_ints(tr, "perm", 2, perm);
    refused(load((Onnx__NodeProto *[]){tr, NULL}, NULL, 2, x2, "y", &o), &o, "node 0 't' (Transpose)");
}

/* An axis out of range is named as the file gives it: -5 on rank 2 was
 * reported as -3 (the value after adding the rank). */
Test(onnx_hostile, an_axis_out_of_range_is_named_as_the_file_gives_it) {
    static const char *const ops[] = {"Softmax", "LogSoftmax", "Flatten"};
    for (int i = 0; i < 3; i++) {
        Onnx__NodeProto *n = node(ops[i], "n", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
        attr_int(n, "axis", -5);
        dg_onnx *o;
        refused(load((Onnx__NodeProto *[]){n, NULL}, NULL, 2, x2, "y", &o), &o, "axis -5 out of range (rank 2)");
    }
}

/* An input whose axes each fit but whose product passes 2^40 elements
 * (or a fixed batch of 2^40) was refused by the graph's leaf with a
 * message that named neither the file nor the input as an ONNX one
 * ("leaf 'x': shape ..."): the fuzz harness's rule that every refusal
 * names the file caught the like. */
Test(onnx_hostile, an_input_past_2_40_elements_is_refused_naming_the_file) {
    static const int64_t big[] = {INT64_MIN, (int64_t)1 << 40, (int64_t)1 << 40, (int64_t)1 << 40};
    static const int64_t fixed[] = {(int64_t)1 << 40, 1 << 20};
    Onnx__NodeProto *relu = node("Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
    dg_onnx *o;
    refused(load((Onnx__NodeProto *[]){relu, NULL}, NULL, 4, big, "y", &o), &o, "input 'x' at batch 2: ");
    refused(load((Onnx__NodeProto *[]){relu, NULL}, NULL, 2, fixed, "y", &o), &o,
            "input 'x' at batch 1099511627776: ");
}
