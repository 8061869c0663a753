/* test_onnx_nodes.c: the ONNX project's backend node tests (Debian's
 * libonnx-testdata: data/node/test_NAME/model.onnx and
 * test_data_set_0/{input,output}_N.pb) through the importer
 * (core/onnx/onnx.h). Every node test of a supported operator listed in
 * must_pass[] loads at the file's shapes, runs forward on the CPU backend
 * (and the GPU backend where there is one) and matches the reference
 * output at the ONNX backend test runner's tolerances (|got - want| <=
 * 1e-7 + 1e-3 |want|); every one listed in refused[] is refused at load
 * with a message naming its operator. Where libonnx-testdata is not
 * installed the suite skips, saying so. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/onnx/onnx.h"
#include "onnx_case.h"
#include "test_util.h"

#define NODE_DIR ONNX_TESTDATA "node/"
#define MAX_FILES 16

/* whether y is computed from x (an output such as LayerNormalization's
 * Mean reads fewer inputs than the node: the plan has no others) */
static bool reads(const dg_graph *g, const dg_node *y, const dg_node *x) {
    if (x->id > y->id) return false;
    bool *need = calloc((size_t)y->id + 1, sizeof *need);
    need[y->id] = true;
    for (int id = y->id; id > x->id; id--) /* inputs precede their node */
        if (need[id])
            for (int i = 0; i < dg_graph_node(g, id)->n_in; i++) need[dg_graph_node(g, id)->in[i]->id] = true;
    bool r = need[x->id];
    free(need);
    return r;
}

/* One output of the node test in dir on be against want (named as the
 * output), from the test's inputs files[n_files]: NULL when it matches,
 * else why not (static). The model's inputs are matched by name; the
 * int64 inputs (a Reshape's shape, axes, Split's sizes, Gather's
 * indices) are given as constants, as a model holds them. */
static const char *run_output(const char *dir, dg_backend *be, const dg_onnx_tensor *want,
                              const dg_onnx_tensor *files, int n_files) {
    static char why[1024];
    char path[600];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    dg_onnx *o = NULL;
    dg_onnx_tensor consts[MAX_FILES];
    int n_consts = 0;
    for (int i = 0; i < n_files; i++)
        if (files[i].i) consts[n_consts++] = files[i];
    dg_onnx_opts opts = {.output = *want->name ? want->name : NULL, .consts = consts, .n_consts = n_consts};
    if (dg_onnx_load(path, &opts, &o) != DG_OK) {
        snprintf(why, sizeof why, "load: %s", dg_last_error());
        return why;
    }
    int n_in = dg_onnx_n_inputs(o);
    dg_graph *g = dg_graph_new();
    dg_node *xs[MAX_FILES] = {0}, *y = NULL;
    const dg_onnx_tensor *in[MAX_FILES] = {0};
    const char *res = NULL;
    for (int i = 0; i < n_in && !res; i++) {
        const char *name = dg_onnx_input_name_at(o, i);
        for (int k = 0; k < n_files && !in[i]; k++)
            if (!strcmp(files[k].name, name)) in[i] = &files[k];
        if (!in[i]) {
            snprintf(why, sizeof why, "input '%s': no input_N.pb of that name", name);
            res = why;
        } else {
            res = onnx_case_input(g, o, i, &xs[i]);
        }
    }
    if (!res && !(y = dg_onnx_forward(g, o, xs, NULL))) {
        snprintf(why, sizeof why, "forward: %s", dg_last_error());
        res = why;
    }
    /* every axis as the reference's (a node test's output has its shape) */
    bool same = !res && (!want->ndim || want->ndim == y->shape.ndim);
    for (int d = 0; same && d < want->ndim; d++) same = want->dims[d] == y->shape.d[d];
    char shape[128];
    if (!res && !same) {
        snprintf(why, sizeof why, "output of shape %s, the reference %d axes", dg_shape_str(y->shape, shape, sizeof shape),
                 want->ndim);
        res = why;
    }
    if (!res) {
        for (int i = 0; i < n_in; i++)
            if (!reads(g, y, xs[i])) in[i] = NULL;
        res = onnx_case_run(g, be, y, xs, in, n_in, want);
    }
    dg_graph_free(g);
    dg_onnx_free(o);
    return res;
}

/* Every output of one node test (output_K.pb while there is one): NULL
 * when all match, else which does not and why. */
static const char *run_node(const char *test, dg_backend *be) {
    static char why[1200];
    char dir[512];
    snprintf(dir, sizeof dir, NODE_DIR "%s", test);
    dg_onnx_tensor in[MAX_FILES];
    int n_in = 0;
    const char *res = onnx_case_inputs(dir, in, MAX_FILES, &n_in);
    for (int k = 0; !res && (k == 0 || onnx_case_has(dir, "output", k)); k++) {
        dg_onnx_tensor want;
        res = onnx_case_tensor(dir, "output", k, &want);
        if (res) break;
        const char *r = run_output(dir, be, &want, in, n_in);
        if (r) snprintf(why, sizeof why, "output %d '%s': %s", k, want.name, r), res = why;
        dg_onnx_tensor_free(&want);
    }
    for (int i = 0; i < n_in; i++) dg_onnx_tensor_free(&in[i]);
    return res;
}

/* Node tests of supported operators that must match (without "test_"):
 * each catches a wrong mapping of its operator or attribute (a Gemm's
 * transA or beta, Conv's auto_pad, a pool's strides, Flatten's negative
 * axis, broadcasting of a 1-D operand, a reduction's keepdims, an input
 * order, a Concat or Split placing entries at the wrong offset of an inner
 * axis, a Gather of the wrong rows, a Reshape's 0 and -1, Squeeze and
 * ReduceSum's axes as an input, LayerNormalization's Mean and InvStdDev,
 * a softmax over an inner axis),
 * and, with opset 11 files among them (Conv, the pools), an operator
 * refused for its file's opset although it reads alike. Every output of a
 * node test is compared (Split's parts, LayerNormalization's three). */
static const char *const must_pass[] = {
    "add", "add_bcast", "averagepool_2d_default", "averagepool_2d_precomputed_pads_count_include_pad",
    "averagepool_2d_precomputed_strides", "averagepool_2d_strides", "basic_conv_with_padding",
    "basic_conv_without_padding", "batchnorm_epsilon", "batchnorm_example", "concat_1d_axis_0",
    "concat_1d_axis_negative_1", "concat_2d_axis_0", "concat_2d_axis_1", "concat_2d_axis_negative_1",
    "concat_2d_axis_negative_2", "concat_3d_axis_0", "concat_3d_axis_1", "concat_3d_axis_2",
    "concat_3d_axis_negative_1", "concat_3d_axis_negative_2", "concat_3d_axis_negative_3", "conv_with_autopad_same",
    "conv_with_strides_and_asymmetric_padding", "conv_with_strides_no_padding", "conv_with_strides_padding", "div",
    "div_bcast", "div_example", "dropout_default", "erf", "exp", "exp_example", "flatten_axis0", "flatten_axis1",
    "flatten_axis2", "flatten_axis3", "flatten_default_axis", "flatten_negative_axis1", "flatten_negative_axis2",
    "flatten_negative_axis3", "flatten_negative_axis4", "gather_0", "gather_1", "gather_2d_indices",
    "gather_negative_indices", "gemm_all_attributes", "gemm_alpha", "gemm_beta", "gemm_default_matrix_bias",
    "gemm_default_no_bias", "gemm_default_single_elem_vector_bias", "gemm_default_vector_bias",
    "gemm_default_zero_bias", "gemm_transposeA", "gemm_transposeB", "globalaveragepool",
    "globalaveragepool_precomputed", "identity", "layer_normalization_2d_axis1",
    "layer_normalization_2d_axis_negative_1", "layer_normalization_3d_axis2_epsilon",
    "layer_normalization_3d_axis_negative_1_epsilon", "layer_normalization_4d_axis3",
    "layer_normalization_4d_axis_negative_1", "layer_normalization_default_axis", "leakyrelu", "leakyrelu_default",
    "leakyrelu_example", "log", "log_example", "logsoftmax_axis_0", "logsoftmax_axis_1", "logsoftmax_axis_2",
    "logsoftmax_default_axis", "logsoftmax_example_1", "logsoftmax_large_number", "logsoftmax_negative_axis",
    "matmul_2d", "matmul_3d", "matmul_4d", "maxpool_2d_default", "maxpool_2d_precomputed_pads",
    "maxpool_2d_precomputed_same_upper", "maxpool_2d_precomputed_strides", "maxpool_2d_strides", "mul", "mul_bcast",
    "mul_example", "mvn_expanded", "reduce_mean_default_axes_keepdims_example",
    "reduce_mean_default_axes_keepdims_random", "reduce_mean_do_not_keepdims_example",
    "reduce_mean_do_not_keepdims_random", "reduce_mean_keepdims_example", "reduce_mean_keepdims_random",
    "reduce_mean_negative_axes_keepdims_example", "reduce_mean_negative_axes_keepdims_random",
    "reduce_sum_default_axes_keepdims_example", "reduce_sum_default_axes_keepdims_random",
    "reduce_sum_do_not_keepdims_example", "reduce_sum_do_not_keepdims_random",
    "reduce_sum_empty_axes_input_noop_example", "reduce_sum_empty_axes_input_noop_random",
    "reduce_sum_keepdims_example", "reduce_sum_keepdims_random", "reduce_sum_negative_axes_keepdims_example",
    "reduce_sum_negative_axes_keepdims_random", "relu", "reshape_extended_dims", "reshape_negative_dim",
    "reshape_negative_extended_dims", "reshape_one_dim", "reshape_reduced_dims", "reshape_reordered_all_dims",
    "reshape_reordered_last_dims", "reshape_zero_and_negative_dim", "reshape_zero_dim", "sigmoid",
    "sigmoid_example", "softmax_axis_0", "softmax_axis_1", "softmax_axis_2", "softmax_default_axis",
    "softmax_example", "softmax_large_number", "softmax_negative_axis", "split_equal_parts_1d",
    "split_equal_parts_2d", "split_equal_parts_default_axis", "split_variable_parts_1d", "split_variable_parts_2d",
    "split_variable_parts_default_axis", "sqrt", "sqrt_example", "squeeze", "squeeze_negative_axes", "sub",
    "sub_bcast", "sub_example", "tanh", "tanh_example", "transpose_all_permutations_0",
    "transpose_all_permutations_1", "transpose_all_permutations_2", "transpose_all_permutations_3",
    "transpose_all_permutations_4", "transpose_all_permutations_5", "transpose_default", "unsqueeze_axis_0",
    "unsqueeze_axis_1", "unsqueeze_axis_2",
};

static void check_must_pass(bool gpu) {
    onnx_case_need(NODE_DIR);
    onnx_case_check_all(must_pass, (int)(sizeof must_pass / sizeof *must_pass), gpu, "node tests", run_node);
}

Test(onnx_nodes, supported_operators_match_the_reference) { check_must_pass(false); }
Test(onnx_nodes, gpu_supported_operators_match_the_reference) { check_must_pass(true); }

/* Node tests refused at load, each with what its message must name: an
 * operator outside the supported list (its name), or a supported one with
 * an attribute value or opset it cannot honour (what that is). Catches a
 * refusal that names nothing, or an unsupported operator let through. */
static const onnx_refusal refused[] = {
    {"lstm_defaults", "operator LSTM is not supported"},
    {"gru_defaults", "operator GRU is not supported"},
    {"nonzero_example", "operator NonZero is not supported"},
    {"convtranspose", "operator ConvTranspose is not supported"},
    {"hardmax_example", "operator Hardmax is not supported"},
    {"globalmaxpool", "operator GlobalMaxPool is not supported"},
    {"maxpool_2d_ceil", "(MaxPool): ceil_mode 1 is not supported"},
    {"maxpool_2d_dilations", "(MaxPool): dilated pooling is not supported"},
    {"maxpool_2d_same_upper", "(MaxPool): pads 0 (begin) and 1 (end) on axis 2"},
    {"averagepool_2d_pads", "(AveragePool): count_include_pad 0 with padding is not supported"},
    {"batchnorm_example_training_mode", "(BatchNormalization): output 1 'output_mean' is not supported"},
    {"dropout_default_old", "opset 11's Dropout is not the one read"},
    {"maxpool_3d_default", "input 'x' has 5 axes"},
    {"reshape_allowzero_reordered", "(Reshape): allowzero 1 is not supported"},
    {"layer_normalization_4d_axis2", "(LayerNormalization): axis 2: only the last axis is supported"},
    /* loaded without its shape given: a Reshape whose target is computed */
    {"reshape_zero_dim", "(Reshape): input 1 'shape' must be a constant"},
};

Test(onnx_nodes, unsupported_operators_are_refused_by_name) {
    onnx_case_need(NODE_DIR);
    onnx_case_check_refused(NODE_DIR, refused, (int)(sizeof refused / sizeof *refused));
}
