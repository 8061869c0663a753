/* test_onnx_pytorch.c: the ONNX project's PyTorch-converted models
 * (Debian's libonnx-testdata: data/pytorch-converted/test_NAME/model.onnx
 * and test_data_set_0/{input,output}_N.pb, nn.Module layers exported by
 * torch.onnx, 80 of opset 6 and 2 of opset 12) through the importer
 * (core/onnx/onnx.h). The tables are exact: every model of the folder is
 * in must_pass[] (loads at the file's shapes, runs forward on the CPU
 * backend, and the GPU backend where there is one, and matches
 * output_0.pb at the ONNX backend test runner's tolerances, |got - want|
 * <= 1e-7 + 1e-3 |want|) or in refused[] (refused at load with a message
 * naming the operator, attribute, opset or shape rule that stops it). A
 * model in neither, a refused one that loads, or a must-pass one that
 * fails fails the suite. Where libonnx-testdata is not installed the
 * suite skips, saying so. */
#define _GNU_SOURCE /* memmem */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "core/onnx/onnx.h"
#include "onnx_case.h"
#include "test_util.h"

#define PT_DIR ONNX_TESTDATA "pytorch-converted/"
#define MAX_IN 8

/* Models that load and match the reference (without "test_"); each
 * catches a wrong mapping of its layer: LeakyRelu's slope, Linear's
 * transposed weight and bias (opset 6's Gemm, or Transpose and MatMul
 * without one), a pool's or convolution's strides, padding, dilation and
 * groups (depthwise, with a channel multiplier), batch norm's running
 * statistics and epsilon (opset 6's is_test), Split's halves (GLU), an
 * embedding's rows (Gather of int64 ids), a constant operand (Poisson
 * NLL), opset 6's softmax over the input flattened at its axis. */
static const char *const must_pass[] = {
    "AvgPool2d", "AvgPool2d_stride", "BatchNorm2d_eval", "BatchNorm2d_momentum_eval", "Conv2d",
    "Conv2d_depthwise", "Conv2d_depthwise_padded", "Conv2d_depthwise_strided",
    "Conv2d_depthwise_with_multiplier", "Conv2d_dilated", "Conv2d_groups", "Conv2d_groups_thnn",
    "Conv2d_no_bias", "Conv2d_padding", "Conv2d_strided", "Embedding", "Embedding_sparse", "GLU", "GLU_dim",
    "LeakyReLU", "LeakyReLU_with_negval", "Linear", "Linear_no_bias", "LogSoftmax", "MaxPool2d",
    "PoissonNLLLLoss_no_reduce", "ReLU", "Sigmoid", "Softmax", "Tanh", "log_softmax_dim3", "log_softmax_lastdim",
    "softmax_functional_dim3", "softmax_lastdim",
};

/* Models refused at load, each with the words its message must hold: an
 * older opset's operator whose definition differs from the one read,
 * operators duograd lacks (padding modes, ConvTranspose, activations),
 * 1-D and 3-D windows (convolution, pooling, batch norm over [N, C, L] or
 * 5 axes), dilated pooling, and a 6-D Reshape. */
static const onnx_refusal refused[] = {
    /* opset 6's Unsqueeze takes axes as an attribute, 13's as an input */
    {"AvgPool1d", "opset 6's Unsqueeze is not the one read"},
    {"AvgPool1d_stride", "opset 6's Unsqueeze is not the one read"},
    /* operators outside the supported list */
    {"ConstantPad2d", "operator Pad is not supported"},
    {"ReflectionPad2d", "operator Pad is not supported"},
    {"ReplicationPad2d", "operator Pad is not supported"},
    {"ZeroPad2d", "operator Pad is not supported"},
    {"ConvTranspose2d", "operator ConvTranspose is not supported"},
    {"ConvTranspose2d_no_bias", "operator ConvTranspose is not supported"},
    {"ELU", "operator Elu is not supported"},
    {"PReLU_1d", "operator PRelu is not supported"},
    {"PReLU_1d_multiparam", "operator PRelu is not supported"},
    {"PReLU_2d", "operator PRelu is not supported"},
    {"PReLU_2d_multiparam", "operator PRelu is not supported"},
    {"PReLU_3d", "operator PRelu is not supported"},
    {"PReLU_3d_multiparam", "operator PRelu is not supported"},
    {"SELU", "operator Selu is not supported"},
    {"Softmin", "operator Neg is not supported"},
    {"Softplus", "operator Softplus is not supported"},
    {"Softsign", "operator Abs is not supported"},
    /* 1-D and 3-D windows: 3 and 5 axes (an input has at most 4) */
    {"Conv1d", "(Conv): 2-D convolutions only"},
    {"Conv1d_dilated", "(Conv): 2-D convolutions only"},
    {"Conv1d_groups", "(Conv): 2-D convolutions only"},
    {"Conv1d_pad1", "(Conv): 2-D convolutions only"},
    {"Conv1d_pad1size1", "(Conv): 2-D convolutions only"},
    {"Conv1d_pad2", "(Conv): 2-D convolutions only"},
    {"Conv1d_pad2size1", "(Conv): 2-D convolutions only"},
    {"Conv1d_stride", "(Conv): 2-D convolutions only"},
    {"MaxPool1d", "(MaxPool): 2-D pooling only"},
    {"MaxPool1d_stride", "(MaxPool): 2-D pooling only"},
    {"MaxPool1d_stride_padding_dilation", "(MaxPool): 2-D pooling only"},
    {"AvgPool3d", "input '0' has 5 axes (1 to 4)"},
    {"AvgPool3d_stride", "input '0' has 5 axes (1 to 4)"},
    {"AvgPool3d_stride1_pad0_gpu_input", "input '0' has 5 axes (1 to 4)"},
    {"BatchNorm3d_eval", "input '0' has 5 axes (1 to 4)"},
    {"BatchNorm3d_momentum_eval", "input '0' has 5 axes (1 to 4)"},
    {"Conv3d", "input '0' has 5 axes (1 to 4)"},
    {"Conv3d_dilated", "input '0' has 5 axes (1 to 4)"},
    {"Conv3d_dilated_strided", "input '0' has 5 axes (1 to 4)"},
    {"Conv3d_groups", "input '0' has 5 axes (1 to 4)"},
    {"Conv3d_no_bias", "input '0' has 5 axes (1 to 4)"},
    {"Conv3d_stride", "input '0' has 5 axes (1 to 4)"},
    {"Conv3d_stride_padding", "input '0' has 5 axes (1 to 4)"},
    {"MaxPool3d", "input '0' has 5 axes (1 to 4)"},
    {"MaxPool3d_stride", "input '0' has 5 axes (1 to 4)"},
    {"MaxPool3d_stride_padding", "input '0' has 5 axes (1 to 4)"},
    {"BatchNorm1d_3d_input_eval", "batch_norm_eval: input [4,5,3] must be [N,C] or [N,C,H,W]"},
    /* attributes and shapes of a supported operator it cannot honour */
    {"MaxPool2d_stride_padding_dilation", "(MaxPool): dilated pooling is not supported"},
    {"PixelShuffle", "(Reshape): the shape must be 1 to 4 int64 values"},
};

#define N_PASS (int)(sizeof must_pass / sizeof *must_pass)
#define N_REFUSED (int)(sizeof refused / sizeof *refused)

/* The model's forward on be from the files' inputs (these files leave the
 * tensors unnamed: matched by position) against output_0.pb: NULL when it
 * matches, else why not (static). */
static const char *run_model(const char *test, dg_backend *be) {
    static char why[1024];
    char dir[512], path[600];
    snprintf(dir, sizeof dir, PT_DIR "%s", test);
    dg_onnx_tensor in[MAX_IN], want = {0};
    const dg_onnx_tensor *vals[MAX_IN];
    int n_files = 0;
    dg_onnx *o = NULL;
    dg_graph *g = dg_graph_new();
    dg_node *xs[MAX_IN] = {0}, *y = NULL;
    const char *r = onnx_case_inputs(dir, in, MAX_IN, &n_files);
    if (!r) r = onnx_case_tensor(dir, "output", 0, &want);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    if (!r && dg_onnx_load(path, NULL, &o) != DG_OK) {
        snprintf(why, sizeof why, "load: %s", dg_last_error());
        r = why;
    }
    int n_in = r ? 0 : dg_onnx_n_inputs(o);
    if (!r && n_in != n_files) {
        snprintf(why, sizeof why, "%d inputs, %d input_N.pb", n_in, n_files);
        r = why;
    }
    for (int i = 0; i < n_in && !r; i++) {
        r = onnx_case_input(g, o, i, &xs[i]);
        if (!r && dg_node_numel(xs[i]) != in[i].numel) {
            snprintf(why, sizeof why, "input %d: the file has %lld values", i, (long long)in[i].numel);
            r = why;
        }
        vals[i] = &in[i];
    }
    if (!r && !(y = dg_onnx_forward(g, o, xs, NULL))) {
        snprintf(why, sizeof why, "forward: %s", dg_last_error());
        r = why;
    }
    if (!r) r = onnx_case_run(g, be, y, xs, vals, n_in, &want);
    dg_graph_free(g);
    dg_onnx_free(o);
    dg_onnx_tensor_free(&want);
    for (int i = 0; i < n_files; i++) dg_onnx_tensor_free(&in[i]);
    return r;
}

static void check_must_pass(bool gpu) {
    onnx_case_need(PT_DIR);
    onnx_case_check_all(must_pass, N_PASS, gpu, "models", run_model);
}

Test(onnx_pytorch, supported_models_match_the_reference) { check_must_pass(false); }
Test(onnx_pytorch, gpu_supported_models_match_the_reference) { check_must_pass(true); }

/* Catches a refusal that names nothing, or a model that starts to load
 * (it belongs in must_pass[] then). */
Test(onnx_pytorch, unsupported_models_are_refused_with_the_reason) {
    onnx_case_need(PT_DIR);
    onnx_case_check_refused(PT_DIR, refused, N_REFUSED);
}

static bool listed(const char *name) {
    for (int i = 0; i < N_PASS; i++)
        if (!strcmp(must_pass[i], name)) return true;
    for (int i = 0; i < N_REFUSED; i++)
        if (!strcmp(refused[i].test, name)) return true;
    return false;
}

/* Catches a model of the folder in neither table (one added by a newer
 * libonnx-testdata, or a name mistyped in a table), and a table naming a
 * model the folder lacks. */
Test(onnx_pytorch, every_model_is_in_one_table) {
    onnx_case_need(PT_DIR);
    DIR *d = opendir(PT_DIR);
    cr_assert_not_null(d, "%s: cannot list", PT_DIR);
    int n = 0, unlisted = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "test_", 5)) continue;
        n++;
        if (!listed(e->d_name + 5)) {
            cr_log_error("%s: in neither must_pass[] nor refused[]", e->d_name);
            unlisted++;
        }
    }
    closedir(d);
    cr_assert_eq(unlisted, 0, "%d models unlisted (above)", unlisted);
    cr_assert_eq(n, N_PASS + N_REFUSED, "%d models in the folder, %d listed (one listed twice, or one missing)", n,
                 N_PASS + N_REFUSED);
}

/* The file at path with the bytes find[n] replaced by repl[n] (the same
 * length: the protobuf framing holds), loaded from memory: its status. */
static dg_status load_patched(const char *path, const char *find, const char *repl, size_t n) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s: cannot open", path);
    static char buf[1 << 16];
    size_t size = fread(buf, 1, sizeof buf, f);
    fclose(f);
    char *at = memmem(buf, size, find, n);
    cr_assert_not_null(at, "%s: the bytes to patch are not there", path);
    memcpy(at, repl, n);
    dg_onnx *o = NULL;
    dg_status st = dg_onnx_load_buffer(buf, size, path, NULL, &o);
    dg_onnx_free(o);
    return st;
}

/* The older forms that the lowered opsets let in but read otherwise:
 * opset 6's BatchNormalization with is_test 0 (the training form, of five
 * outputs), and auto_pad SAME before opset 11 (out = in, not ceil(in /
 * stride): the node test conv_with_autopad_same, its opset 11 made 10).
 * Catches either let through and run as the later definition. */
Test(onnx_pytorch, older_forms_read_otherwise_are_refused) {
    onnx_case_need(PT_DIR);
    cr_assert_neq(load_patched(PT_DIR "test_BatchNorm2d_eval/model.onnx", "is_test\x18\x01", "is_test\x18\x00", 9),
                  DG_OK);
    cr_assert(strstr(dg_last_error(), "(BatchNormalization): is_test 0 (opset 6's training form) is not supported"),
              "%s", dg_last_error());
    const char *conv = ONNX_TESTDATA "node/test_conv_with_autopad_same/model.onnx";
    cr_assert_neq(load_patched(conv, "\x42\x04\x0a\x00\x10\x0b", "\x42\x04\x0a\x00\x10\x0a", 6), DG_OK);
    cr_assert(strstr(dg_last_error(), "(Conv): auto_pad SAME_LOWER before opset 11 (the file's 10) is not supported"),
              "%s", dg_last_error());
}
