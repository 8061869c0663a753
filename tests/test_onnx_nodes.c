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
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/onnx/onnx.h"
#include "cpu_backend/cpu_backend.h"
#include "gpu_util.h"
#include "test_util.h"

#define NODE_DIR "/usr/share/libonnx-testdata/data/node/"
#define RTOL 1e-3
#define ATOL 1e-7

static void need_testdata(void) {
    struct stat st;
    if (stat(NODE_DIR, &st) != 0) cr_skip_test("no %s: apt-get install libonnx-testdata", NODE_DIR);
}

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

/* One output of a node test on be against ref (named as the output),
 * from the test's inputs files[n_files]: NULL when it matches, else why
 * not (static). The int64 inputs (a Reshape's shape, axes, Split's sizes,
 * Gather's indices) are given as constants, as a model holds them. */
static const char *run_output(const char *test, dg_backend *be, const dg_onnx_tensor *ref,
                              const dg_onnx_tensor *files, int n_files) {
    static char why[1024];
    char path[512];
    snprintf(path, sizeof path, NODE_DIR "%s/model.onnx", test);
    dg_onnx *o = NULL;
    dg_onnx_tensor consts[16];
    int n_consts = 0;
    for (int i = 0; i < n_files; i++)
        if (files[i].i) consts[n_consts++] = files[i];
    dg_onnx_opts opts = {.output = *ref->name ? ref->name : NULL, .consts = consts, .n_consts = n_consts};
    if (dg_onnx_load(path, &opts, &o) != DG_OK) {
        snprintf(why, sizeof why, "load: %s", dg_last_error());
        return why;
    }
    int n_in = dg_onnx_n_inputs(o);
    dg_graph *g = dg_graph_new();
    dg_node *xs[16] = {0};
    const dg_onnx_tensor *in[16] = {0};
    const dg_onnx_tensor want = *ref;
    dg_plan *p = NULL;
    float *got = NULL;
    const char *res = why;
    *why = 0;
    for (int i = 0; i < n_in && !*why; i++) {
        const char *name = dg_onnx_input_name_at(o, i);
        for (int k = 0; k < n_files && !in[i]; k++)
            if (!strcmp(files[k].name, name)) in[i] = &files[k];
        if (!in[i]) {
            snprintf(why, sizeof why, "input '%s': no input_N.pb of that name", name);
            break;
        }
        /* the file's shapes, as the node test fixes them */
        dg_shape s;
        cr_assert(dg_onnx_input_shape(o, i, 0, &s), "%s: input %d has no fixed shape", test, i);
        bool ids = dg_onnx_input_dtype(o, i) == DG_I32;
        xs[i] = ids ? dg_input_i32(g, name, s) : dg_input(g, name, s);
    }
    dg_node *y = *why ? NULL : dg_onnx_forward(g, o, xs, NULL);
    if (!*why && !y) snprintf(why, sizeof why, "forward: %s", dg_last_error());
    bool same = y && want.f && want.numel == dg_node_numel(y) && (!want.ndim || want.ndim == y->shape.ndim);
    for (int d = 0; same && d < want.ndim; d++) same = want.dims[d] == y->shape.d[d];
    char shape[128];
    if (!*why && !same)
        snprintf(why, sizeof why, "output of shape %s, the reference %d axes, %lld %s",
                 dg_shape_str(y->shape, shape, sizeof shape), want.ndim, (long long)want.numel,
                 want.f ? "floats" : "int64 values");
    if (!*why && dg_plan_new(&p, g, be, &y, 1, NULL) != DG_OK) snprintf(why, sizeof why, "plan: %s", dg_last_error());
    for (int i = 0; i < n_in && !*why; i++) {
        if (!reads(g, y, xs[i])) continue;
        dg_status st;
        if (in[i]->f) {
            st = dg_plan_set(p, xs[i], in[i]->f, (size_t)in[i]->numel * sizeof(float));
        } else {
            int32_t *ids = malloc((size_t)in[i]->numel * sizeof *ids);
            for (int64_t j = 0; j < in[i]->numel; j++) ids[j] = (int32_t)in[i]->i[j];
            st = dg_plan_set(p, xs[i], ids, (size_t)in[i]->numel * sizeof *ids);
            free(ids);
        }
        if (st != DG_OK) snprintf(why, sizeof why, "input %d: %s", i, dg_last_error());
    }
    if (!*why && dg_plan_run(p) != DG_OK) snprintf(why, sizeof why, "run: %s", dg_last_error());
    if (!*why) {
        got = malloc((size_t)want.numel * sizeof *got);
        if (dg_plan_get(p, y, got, (size_t)want.numel * sizeof *got) != DG_OK)
            snprintf(why, sizeof why, "get: %s", dg_last_error());
    }
    for (int64_t j = 0; !*why && j < want.numel; j++) {
        double w = want.f[j], d = fabs((double)got[j] - w);
        if (!(d <= ATOL + RTOL * fabs(w)))
            snprintf(why, sizeof why, "element %lld: %.9g, the reference %.9g", (long long)j, (double)got[j], w);
    }
    if (!*why) res = NULL;
    free(got);
    dg_plan_free(p);
    dg_graph_free(g);
    dg_onnx_free(o);
    return res;
}

/* Every output of one node test (output_K.pb while there is one): NULL
 * when all match, else which does not and why. */
static const char *run_node(const char *test, dg_backend *be) {
    static char why[1200];
    char path[512];
    struct stat st;
    dg_onnx_tensor in[16];
    int n_in = 0;
    const char *res = NULL;
    for (; n_in < 16 && !res; n_in++) {
        snprintf(path, sizeof path, NODE_DIR "%s/test_data_set_0/input_%d.pb", test, n_in);
        if (stat(path, &st) != 0) break;
        if (dg_onnx_tensor_load(path, &in[n_in]) != DG_OK) {
            snprintf(why, sizeof why, "input %d: %s", n_in, dg_last_error());
            res = why;
        }
    }
    for (int k = 0; !res; k++) {
        snprintf(path, sizeof path, NODE_DIR "%s/test_data_set_0/output_%d.pb", test, k);
        if (k && stat(path, &st) != 0) break;
        dg_onnx_tensor want;
        if (dg_onnx_tensor_load(path, &want) != DG_OK) {
            snprintf(why, sizeof why, "output %d: %s", k, dg_last_error());
            res = why;
            break;
        }
        const char *r = run_output(test, be, &want, in, n_in);
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
    need_testdata();
    dg_backend *be = test_backend_open(gpu);
    int n = (int)(sizeof must_pass / sizeof *must_pass), failed = 0;
    char test[128];
    for (int i = 0; i < n; i++) {
        snprintf(test, sizeof test, "test_%s", must_pass[i]);
        const char *why = run_node(test, be);
        if (why) {
            cr_log_error("%s: %s", test, why);
            failed++;
        }
    }
    cr_log_info("%s: %d of %d node tests match the reference", gpu ? "gpu" : "cpu", n - failed, n);
    dg_backend_free(be);
    cr_assert_eq(failed, 0, "%d of %d node tests do not match (above)", failed, n);
}

Test(onnx_nodes, supported_operators_match_the_reference) { check_must_pass(false); }
Test(onnx_nodes, gpu_supported_operators_match_the_reference) { check_must_pass(true); }

/* Node tests refused at load, each with what its message must name: an
 * operator outside the supported list (its name), or a supported one with
 * an attribute value or opset it cannot honour (what that is). Catches a
 * refusal that names nothing, or an unsupported operator let through. */
static const struct { const char *test, *names; } refused[] = {
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
    need_testdata();
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char path[512];
        snprintf(path, sizeof path, NODE_DIR "test_%s/model.onnx", refused[i].test);
        dg_onnx *o = NULL;
        cr_assert_neq(dg_onnx_load(path, NULL, &o), DG_OK, "test_%s: loaded", refused[i].test);
        cr_assert_null(o);
        cr_assert(strstr(dg_last_error(), refused[i].names), "test_%s: '%s' lacks '%s'", refused[i].test,
                  dg_last_error(), refused[i].names);
    }
}
