/* test_onnx.c: the ONNX importer (core/onnx/onnx.h) on the models that
 * tests/data/onnx/make_models.py writes: each model's forward on the CPU
 * backend against the output NumPy computed in the script and against the
 * float64 interpreter (core/check/ref.h) on the same graph; every refusal
 * (unknown operator, unknown attribute, an int64 weight, asymmetric
 * padding, an old opset, shapes that do not fit, a cut file, random bytes) with its message; and a
 * few SGD steps of the imported MLP against the built-in MLP given the same
 * weights; `bench profile --model FILE.onnx`. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/attrs.h"
#include "core/check/ref.h"
#include "core/check/step_check.h"
#include "core/nn/mlp.h"
#include "core/nn/train_step.h"
#include "core/onnx/onnx.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "gpu_util.h"
#include "shell_util.h"
#include "test_util.h"

#define DATA DG_SOURCE_DIR "/tests/data/onnx/"

/* a whole file into *buf (freed by the caller); its size */
static size_t slurp(const char *path, void **buf) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc((size_t)n + 1);
    cr_assert(*buf && fread(*buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    return (size_t)n;
}

static dg_onnx *load(const char *name) {
    char path[512];
    snprintf(path, sizeof path, DATA "%s.onnx", name);
    dg_onnx *o = NULL;
    ASSERT_OK(dg_onnx_load(path, NULL, &o));
    return o;
}

/* The forward of model `name` for the script's input: on the CPU against
 * NumPy's output (float32 rounding of a few sums: 1e-5 relative to the
 * largest value) and against the float64 interpreter of the same graph.
 * Catches a wrong mapping (a transposed Gemm, BN's eps or statistics
 * swapped, padding on the wrong side, a Reshape target folded wrong). */
static void check_forward_on(const char *name, bool gpu) {
    dg_onnx *o = load(name);
    dg_graph *g = dg_graph_new();
    dg_model m;
    ASSERT_OK(dg_onnx_model_new(g, o, 0, &m));
    char path[512];
    void *xin, *want;
    snprintf(path, sizeof path, DATA "%s.in.f32", name);
    /* the batch: the script's input over one example */
    int64_t batch = (int64_t)slurp(path, &xin) / (dg_shape_numel(m.in_shape) * (int64_t)sizeof(float));
    dg_shape xs;
    cr_assert(dg_model_input_shape(&m, batch, &xs));
    dg_node *x = m.in_dtype == DG_I32 ? dg_input_i32(g, "x", xs) : dg_input(g, "x", xs);
    dg_node *y = dg_model_forward(g, &m, x, NULL);
    ASSERT_OK(dg_graph_status(g));
    snprintf(path, sizeof path, DATA "%s.out.f32", name);
    cr_assert_eq(slurp(path, &want), dg_node_bytes(y), "%s: output size", name);
    dg_backend *be = test_backend_open(gpu);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &y, 1, NULL));
    ASSERT_OK(dg_plan_set(p, x, xin, dg_node_bytes(x)));
    ASSERT_OK(dg_plan_run(p));
    int64_t n = dg_node_numel(y);
    float *got = malloc((size_t)n * sizeof *got);
    ASSERT_OK(dg_plan_get(p, y, got, (size_t)n * sizeof *got));
    /* the float64 interpreter: leaves from their init (the file's values) */
    double **vals = calloc((size_t)dg_graph_size(g), sizeof *vals);
    for (int id = 0; id < dg_graph_size(g); id++) {
        const dg_node *nd = dg_graph_node(g, id);
        if (nd->op != DG_OP_LEAF) continue;
        int64_t k = dg_node_numel(nd);
        float *f = malloc((size_t)k * sizeof *f);
        if (nd == x && x->dtype == DG_I32) /* ids: their values */
            for (int64_t j = 0; j < k; j++) f[j] = (float)((const int32_t *)xin)[j];
        else if (nd == x) memcpy(f, xin, (size_t)k * sizeof *f);
        else ASSERT_OK(dg_init_fill(nd->init, f, k));
        vals[id] = malloc((size_t)k * sizeof **vals);
        for (int64_t j = 0; j < k; j++) vals[id][j] = f[j];
        free(f);
    }
    ASSERT_OK(ref_eval(g, y->id + 1, vals));
    double scale = 0;
    for (int64_t j = 0; j < n; j++) scale = fmax(scale, fabs(((float *)want)[j]));
    for (int64_t j = 0; j < n; j++) {
        double w = ((float *)want)[j];
        cr_assert(fabs(got[j] - w) <= 1e-5 * scale, "%s: element %lld: %.9g, NumPy %.9g", name, (long long)j,
                  (double)got[j], w);
        cr_assert(fabs(vals[y->id][j] - w) <= 1e-5 * scale, "%s: element %lld: float64 %.9g, NumPy %.9g", name,
                  (long long)j, vals[y->id][j], w);
    }
    ref_free(vals, dg_graph_size(g));
    free(vals);
    free(got);
    free(xin);
    free(want);
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
    dg_onnx_free(o);
}

static void check_forward(const char *name) { check_forward_on(name, false); }

Test(onnx, mlp_forward_matches_numpy_and_float64) { check_forward("mlp"); }
Test(onnx, cnn_forward_matches_numpy_and_float64) { check_forward("cnn"); }
Test(onnx, reshape_chain_folds_the_batch_from_the_shape) { check_forward("reshape_chain"); }
/* PyTorch's form of a ResNet: padded max pool, a shortcut Add, GAP, Flatten */
Test(onnx, resnet_tiny_forward_matches_numpy_and_float64) { check_forward("resnet_tiny"); }

/* The ResNet's whole training step (batch norm in training mode and its
 * running statistics, SGD with momentum and weight decay: the resnet
 * sweep's step) against the float64 step of the check kit, as bench
 * profile --model FILE.onnx checks it, on each backend. */
static void check_step(bool gpu) {
    dg_onnx *o = load("resnet_tiny");
    dg_resnet_cfg rc = dg_resnet18_default(DG_RESNET_CIFAR);
    bench_step_spec spec = bench_resnet_step(&rc);
    spec.model = dg_onnx_model_new;
    spec.cfg = o;
    void *x;
    int32_t *y;
    ASSERT_OK(bench_synth_batch((bench_batch_shape){3 * 16 * 16, 5, 0, 0}, 2, test_seed(), &x, &y));
    dg_backend *be = test_backend_open(gpu);
    bench_step s = {0};
    bench_step_ref ref = {0};
    double err;
    bool ok;
    ASSERT_OK(bench_step_new(&s, be, &spec, 2, x, y, NULL, &ref, &err, &ok));
    cr_assert(ok, "%s: the imported ResNet's step is off the float64 step by %.3g", gpu ? "gpu" : "cpu", err);
    cr_assert_eq(s.model.n_state, 6, "three batch norms' running statistics");
    /* ONNX's momentum 0.9 weighs the old statistic: duograd's 0.1 the batch */
    int updates = 0;
    for (int id = 0; id < dg_graph_size(s.g); id++) {
        const dg_node *n = dg_graph_node(s.g, id);
        if (n->op != DG_OP_BATCH_NORM_RUNNING) continue;
        updates++;
        cr_assert_float_eq(dg_attr_norm_of(n).momentum, 0.1f, 1e-7f, "running update's momentum %g",
                           (double)dg_attr_norm_of(n).momentum);
    }
    cr_assert_eq(updates, 3);
    bench_step_free(&s);
    bench_step_ref_free(&ref);
    dg_backend_free(be);
    free(x);
    free(y);
    dg_onnx_free(o);
}
Test(onnx, resnet_tiny_step_matches_the_float64_step) { check_step(false); }
Test(onnx, gpu_resnet_tiny_step_matches_the_float64_step) { check_step(true); }

/* the single-operator models of make_models.py (op_NAME.onnx) */
static const char *const op_models[] = {
    "sub", "mul", "div", "add_const", "leaky_relu", "sigmoid", "tanh", "exp", "log", "sqrt", "pow",
    "identity_dropout", "transpose", "softmax", "log_softmax", "reduce_mean", "reduce_sum", "squeeze_unsqueeze",
    "flatten_axis2", "matmul3d", "gemm_alpha_beta_trans", "conv_groups_stride_dil", "conv_same_upper", "avg_pool",
    "global_avg_pool", "layer_norm", "layer_norm_nobias", "erf", "gelu_erf_export", "gelu", "gelu_tanh",
    "split_concat", "gather_const_indices", "embedding", "softmax_opset12", "log_softmax_opset11"};
#define N_OP_MODELS (sizeof op_models / sizeof *op_models)

/* each operator alone, with its attributes: broadcasting operands, a
 * Constant operand, Pow's constant exponent, Transpose's perm, the softmax
 * axis given as -1 and as the last, reductions with axes as an attribute
 * and as an input, Flatten at axis 2, a 3-D MatMul, Gemm's alpha, beta
 * and transposes, grouped strided dilated and SAME_UPPER convolutions, the
 * pools, LayerNormalization with and without its bias, Erf and the GELU
 * PyTorch exports with it, Gelu (opset 20, exact and tanh), Split into
 * computed parts concatenated back in another order, Gather of constant
 * indices (a list, then a scalar) from a computed tensor, Gather of int64
 * ids into a table (an embedding, the model's input int ids), and
 * Softmax and LogSoftmax of opsets 12 and 11, which flatten the input at
 * their axis (1 by default) */
Test(onnx, each_operator_matches_numpy_and_float64) {
    for (size_t i = 0; i < N_OP_MODELS; i++) {
        char name[64];
        snprintf(name, sizeof name, "op_%s", op_models[i]);
        check_forward(name);
    }
}

/* the same models on the GPU backend (skipped without a device): the
 * imported graphs use the ops every backend has */
Test(onnx, gpu_forwards_match_numpy_and_float64) {
    check_forward_on("mlp", true);
    check_forward_on("cnn", true);
    check_forward_on("reshape_chain", true);
    check_forward_on("resnet_tiny", true);
    for (size_t i = 0; i < N_OP_MODELS; i++) {
        char name[64];
        snprintf(name, sizeof name, "op_%s", op_models[i]);
        check_forward_on(name, true);
    }
}

/* the float64 interpreter's loss for leaf values host[] (NULL: the
 * leaf's init), ids leaves as their integer values */
static double ref_loss(dg_graph *g, dg_node *loss, float *const *host) {
    int upto = loss->id + 1;
    double **vals = calloc((size_t)upto, sizeof *vals);
    for (int id = 0; id < upto; id++) {
        const dg_node *nd = dg_graph_node(g, id);
        if (nd->op != DG_OP_LEAF) continue;
        int64_t k = dg_node_numel(nd);
        float *f = malloc((size_t)k * sizeof *f);
        if (host[id] && nd->dtype == DG_I32)
            for (int64_t j = 0; j < k; j++) f[j] = (float)((const int32_t *)host[id])[j];
        else if (host[id]) memcpy(f, host[id], (size_t)k * sizeof *f);
        else ASSERT_OK(dg_init_fill(nd->init, f, k));
        vals[id] = malloc((size_t)k * sizeof **vals);
        for (int64_t j = 0; j < k; j++) vals[id][j] = f[j];
        free(f);
    }
    ASSERT_OK(ref_eval(g, upto, vals));
    double l = vals[loss->id][0];
    ref_free(vals, upto);
    free(vals);
    return l;
}

/* The gradient check of an imported model: loss = sum(y * w) for a random
 * w; dg_grad's gradients with respect to the input (unless ids) and every
 * parameter, run on the CPU backend, against central differences of the
 * float64 interpreter's loss. Catches a wrong gradient of a new operator
 * or of its composition (Erf's, the selection products of Split, Concat
 * and Gather, the embedding's rows). */
static void check_grad(const char *name) {
    dg_onnx *o = load(name);
    dg_graph *g = dg_graph_new();
    dg_model m;
    ASSERT_OK(dg_onnx_model_new(g, o, 0, &m));
    dg_shape xs;
    cr_assert(dg_model_input_shape(&m, 2, &xs));
    bool ids = m.in_dtype == DG_I32;
    dg_node *x = ids ? dg_input_i32(g, "x", xs) : dg_input(g, "x", xs), *y = dg_model_forward(g, &m, x, NULL);
    dg_node *w = dg_input(g, "w", y ? y->shape : xs), *loss = dg_sum(g, dg_mul(g, y, w), DG_ALL_AXES, false);
    ASSERT_OK(dg_graph_status(g));
    dg_node *wrt[DG_MODEL_MAX_PARAMS + 1], *grads[DG_MODEL_MAX_PARAMS + 2];
    int n = 0;
    if (!ids) wrt[n++] = x;
    for (int i = 0; i < m.n_params; i++) wrt[n++] = m.params[i];
    cr_assert(n > 0, "%s: nothing to differentiate", name);
    ASSERT_OK(dg_grad(g, loss, wrt, n, grads));
    /* host values: x (ids below the table's rows), w */
    float **host = calloc((size_t)dg_graph_size(g), sizeof *host);
    dg_rng r = dg_rng_new(test_seed());
    int64_t nx = dg_node_numel(x), nw = dg_node_numel(w);
    host[x->id] = malloc((size_t)nx * sizeof(float));
    host[w->id] = malloc((size_t)nw * sizeof(float));
    for (int64_t j = 0; j < nx; j++) {
        if (ids) ((int32_t *)host[x->id])[j] = (int32_t)(dg_rng_uniform(&r) * (double)m.params[0]->shape.d[0]);
        else host[x->id][j] = (float)dg_rng_normal(&r);
    }
    for (int64_t j = 0; j < nw; j++) host[w->id][j] = (float)dg_rng_normal(&r);
    dg_backend *be = test_backend_open(false);
    dg_plan *p;
    grads[n] = loss; /* the plan reads x and w also where no gradient needs them (a selection's) */
    ASSERT_OK(dg_plan_new(&p, g, be, grads, n + 1, NULL));
    ASSERT_OK(dg_plan_set(p, x, host[x->id], dg_node_bytes(x)));
    ASSERT_OK(dg_plan_set(p, w, host[w->id], dg_node_bytes(w)));
    ASSERT_OK(dg_plan_run(p));
    for (int i = 0; i < n; i++) {
        int64_t k = dg_node_numel(wrt[i]);
        float *got = malloc((size_t)k * sizeof *got), *v = malloc((size_t)k * sizeof *v);
        ASSERT_OK(dg_plan_get(p, grads[i], got, (size_t)k * sizeof *got));
        if (wrt[i] == x) memcpy(v, host[x->id], (size_t)k * sizeof *v);
        else ASSERT_OK(dg_init_fill(wrt[i]->init, v, k));
        float *saved = host[wrt[i]->id];
        host[wrt[i]->id] = v;
        double *fd = malloc((size_t)k * sizeof *fd), scale = 0;
        for (int64_t j = 0; j < k; j++) {
            float v0 = v[j];
            double h = 1e-3 * fmax(1.0, fabs(v0));
            v[j] = (float)(v0 + h);
            double hi = ref_loss(g, loss, host);
            v[j] = (float)(v0 - h);
            double lo = ref_loss(g, loss, host);
            v[j] = v0;
            fd[j] = (hi - lo) / ((double)(float)(v0 + h) - (double)(float)(v0 - h));
            scale = fmax(scale, fabs(fd[j]));
        }
        for (int64_t j = 0; j < k; j++)
            cr_assert(fabs(got[j] - fd[j]) <= 1e-3 * scale + 1e-6,
                      "%s: d loss / d %s[%lld]: %.7g, finite differences %.7g", name, wrt[i]->name, (long long)j,
                      (double)got[j], fd[j]);
        host[wrt[i]->id] = saved;
        free(fd);
        free(v);
        free(got);
    }
    for (int id = 0; id < dg_graph_size(g); id++) free(host[id]);
    free(host);
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
    dg_onnx_free(o);
}

Test(onnx, new_operators_gradients_match_finite_differences) {
    const char *names[] = {"op_erf", "op_gelu_erf_export", "op_gelu", "op_gelu_tanh", "op_split_concat",
                           "op_gather_const_indices", "op_embedding", "mlp"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) check_grad(names[i]);
}

/* A file of two inputs (x [N, 5], t [N, 3] concatenated into a Gemm):
 * dg_onnx_forward builds it from one node per input, in the file's order,
 * and matches NumPy; dg_onnx_model_new, whose forward takes one input,
 * refuses it saying so. Catches inputs bound in the wrong order, or a
 * second input left unbound. */
Test(onnx, two_inputs_through_dg_onnx_forward) {
    dg_onnx *o = load("two_inputs");
    cr_assert_eq(dg_onnx_n_inputs(o), 2);
    cr_assert_str_eq(dg_onnx_input_name_at(o, 1), "t");
    cr_assert_null(dg_onnx_input_name_at(o, 2));
    dg_graph *g = dg_graph_new();
    dg_node *xs[2];
    for (int i = 0; i < 2; i++) {
        dg_shape s;
        cr_assert(dg_onnx_input_shape(o, i, 2, &s));
        xs[i] = dg_input(g, dg_onnx_input_name_at(o, i), s);
    }
    cr_assert(dg_shape_eq(xs[1]->shape, DG_SHAPE(2, 3)));
    dg_node *y = dg_onnx_forward(g, o, xs, NULL);
    ASSERT_OK(dg_graph_status(g));
    void *in, *want;
    size_t n_in = slurp(DATA "two_inputs.in.f32", &in);
    cr_assert_eq(n_in, dg_node_bytes(xs[0]) + dg_node_bytes(xs[1]));
    cr_assert_eq(slurp(DATA "two_inputs.out.f32", &want), dg_node_bytes(y));
    dg_backend *be = test_backend_open(false);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &y, 1, NULL));
    ASSERT_OK(dg_plan_set(p, xs[0], in, dg_node_bytes(xs[0])));
    ASSERT_OK(dg_plan_set(p, xs[1], (char *)in + dg_node_bytes(xs[0]), dg_node_bytes(xs[1])));
    ASSERT_OK(dg_plan_run(p));
    float got[4];
    ASSERT_OK(dg_plan_get(p, y, got, sizeof got));
    for (int j = 0; j < 4; j++)
        cr_assert(fabs(got[j] - ((float *)want)[j]) <= 1e-5f * (1 + fabsf(((float *)want)[j])),
                  "element %d: %g, NumPy %g", j, (double)got[j], (double)((float *)want)[j]);
    dg_graph *g2 = dg_graph_new();
    dg_model m;
    cr_assert_eq(dg_onnx_model_new(g2, o, 0, &m), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "more than one input"), "%s", dg_last_error());
    dg_graph_free(g2);
    free(in);
    free(want);
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
    dg_onnx_free(o);
}

/* dg_onnx_opts.consts: an input given a value at load is an initializer
 * (two_inputs with t given: one input left, a model of it builds, t a
 * parameter); a name the graph's inputs lack, or a value whose dims do
 * not hold its count, is refused naming it. */
Test(onnx, inputs_given_as_constants) {
    float tv[6] = {1, 2, 3, 4, 5, 6};
    dg_onnx_tensor t = {.name = "t", .ndim = 2, .dims = {2, 3}, .numel = 6, .f = tv};
    dg_onnx_opts opts = {.consts = &t, .n_consts = 1};
    dg_onnx *o = NULL;
    ASSERT_OK(dg_onnx_load(DATA "two_inputs.onnx", &opts, &o));
    cr_assert_eq(dg_onnx_n_inputs(o), 1);
    dg_graph *g = dg_graph_new();
    dg_model m;
    ASSERT_OK(dg_onnx_model_new(g, o, 0, &m));
    cr_assert_eq(m.n_params, 3, "t, w and b");
    cr_assert_str_eq(m.params[0]->name, "t");
    dg_graph_free(g);
    dg_onnx_free(o);
    snprintf(t.name, sizeof t.name, "nope");
    cr_assert_eq(dg_onnx_load(DATA "two_inputs.onnx", &opts, &o), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "no graph input 'nope' to give a value"), "%s", dg_last_error());
    snprintf(t.name, sizeof t.name, "t");
    t.numel = 5;
    cr_assert_eq(dg_onnx_load(DATA "two_inputs.onnx", &opts, &o), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "the value given for 't' has 5 elements, its dims 6"), "%s", dg_last_error());
    cr_assert_null(o);
}

/* DG_INIT_DATA, which the importer's leaves use: a copy of the data;
 * refused without data (a leaf would read address 0); dg_const_data a
 * constant leaf */
Test(onnx, init_data_copies_and_refuses_null) {
    const float v[3] = {1.5f, -2.0f, 0.25f};
    float host[3] = {0};
    ASSERT_OK(dg_init_fill(dg_init_data(v), host, 3));
    cr_assert_eq(memcmp(host, v, sizeof v), 0);
    cr_assert_eq(dg_init_fill(dg_init_data(NULL), host, 3), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "DG_INIT_DATA without data"), "%s", dg_last_error());
    dg_graph *g = dg_graph_new();
    dg_node *k = dg_const_data(g, "k", DG_SHAPE(3), v);
    cr_assert(k && k->leaf == DG_LEAF_CONST && k->init.kind == DG_INIT_DATA);
    cr_assert_null(dg_param(g, "w", DG_SHAPE(3), dg_init_data(NULL)));
    cr_assert_eq(dg_graph_status(g), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "leaf 'w': DG_INIT_DATA without data"), "%s", dg_last_error());
    dg_graph_free(g);
}

/* The model's facts: names, example shape, classes, parameters in the
 * order of first use, batch norm's mean and var as state. */
Test(onnx, model_names_shapes_and_parameters) {
    dg_onnx *o = load("cnn");
    cr_assert_str_eq(dg_onnx_input_name(o), "x");
    cr_assert_str_eq(dg_onnx_output_name(o), "y");
    cr_assert_eq(dg_onnx_classes(o), 3);
    cr_assert(strstr(dg_onnx_digest(o), "1290 bytes, crc32 "), "%s", dg_onnx_digest(o));
    dg_graph *g = dg_graph_new();
    dg_model m;
    ASSERT_OK(dg_onnx_model_new(g, o, 0, &m));
    cr_assert(dg_shape_eq(m.in_shape, DG_SHAPE(2, 6, 6)));
    cr_assert_eq(m.classes, 3);
    cr_assert_eq(m.n_params, 6);
    cr_assert_eq(m.n_state, 2);
    const char *names[] = {"cw", "cb", "sc", "sh", "fw", "fb"};
    for (int i = 0; i < 6; i++) cr_assert_str_eq(m.params[i]->name, names[i]);
    cr_assert_str_eq(m.state[0]->name, "mu");
    cr_assert_str_eq(m.state[1]->name, "var");
    dg_graph_free(g);
    dg_onnx_free(o);
}

/* each refused before anything runs, naming the node and what is missing */
static void refused(const char *name, dg_status want, const char *what) {
    char path[512];
    snprintf(path, sizeof path, DATA "%s.onnx", name);
    dg_onnx *o = (dg_onnx *)1;
    dg_status st = dg_onnx_load(path, NULL, &o);
    cr_assert_eq(st, want, "%s: %s (%s)", name, dg_status_name(st), dg_last_error());
    cr_assert_null(o, "%s: *out not NULL after a refusal", name);
    cr_assert(strstr(dg_last_error(), what), "%s: message '%s' does not name '%s'", name, dg_last_error(), what);
}

Test(onnx, refusals_name_the_node_and_what_is_missing) {
    refused("unknown_op", DG_ERR_INVALID, "node 1 'hm': operator Hardmax is not supported");
    refused("bad_attr", DG_ERR_INVALID, "node 0 'fc0' (Gemm): attribute 'gamma' is not supported");
    refused("int64_weight", DG_ERR_INVALID, "node 0 'mm' (MatMul): input 1 'w' holds int64 values where float32");
    refused("asym_pad", DG_ERR_INVALID, "node 0 'conv' (Conv): pads 0 (begin) and 1 (end) on axis 2");
    refused("old_opset", DG_ERR_INVALID, "node 0 'us': opset 12's Unsqueeze is not the one read (opset 13 or later");
    refused("bad_shape", DG_ERR_SHAPE, "node 0 'mm' (MatMul) at batch 2: matmul: inner dimensions differ");
    refused("no_such_file", DG_ERR_IO, "cannot open");
    dg_onnx *o = NULL;
    dg_status st = dg_onnx_load(DATA "mlp.onnx", &(dg_onnx_opts){.output = "h"}, &o);
    cr_assert_eq(st, DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "no graph output named 'h'"), "%s", dg_last_error());
}

/* Every cut of a valid file is refused cleanly (no crash, no leak under
 * ASan), the framing's failures with a byte offset; then seeded random
 * bytes, and random bytes written over a valid file. */
Test(onnx, truncated_and_random_files_are_refused) {
    void *buf;
    size_t n = slurp(DATA "cnn.onnx", &buf);
    int with_offset = 0;
    for (size_t cut = 0; cut < n; cut++) {
        dg_onnx *o = NULL;
        dg_status st = dg_onnx_load_buffer(buf, cut, "cut", NULL, &o);
        cr_assert(st != DG_OK && !o, "a file cut at %zu of %zu bytes loaded", cut, n);
        with_offset += strstr(dg_last_error(), " at byte ") != NULL;
    }
    cr_assert_gt(with_offset, (int)n / 2, "only %d of %zu cuts name a byte offset", with_offset, n);
    dg_onnx *o = NULL;
    dg_status st = dg_onnx_load_buffer(buf, n - 7, "cut", NULL, &o);
    cr_assert_eq(st, DG_ERR_IO, "%s", dg_last_error());
    cr_assert(strstr(dg_last_error(), "remain: the file is truncated"), "%s", dg_last_error());
    dg_rng r = dg_rng_new(test_seed());
    uint8_t *junk = malloc(n);
    for (int t = 0; t < 200; t++) {
        memcpy(junk, buf, n);
        size_t from = t < 100 ? 0 : (size_t)(dg_rng_uniform(&r) * (double)n);
        for (size_t i = from; i < n && (t < 100 || i < from + 8); i++) junk[i] = (uint8_t)(dg_rng_uniform(&r) * 256);
        o = NULL;
        if (dg_onnx_load_buffer(junk, n, "junk", NULL, &o) == DG_OK) dg_onnx_free(o);
    }
    free(junk);
    free(buf);
}

/* Three SGD steps of the imported MLP equal, bit for bit, three steps of
 * the built-in MLP of the same widths started from the file's weights:
 * the importer's Gemm + Relu is the built-in forward, and the model
 * trains through dg_train_step_build like any other. */
Test(onnx, sgd_steps_equal_the_builtin_mlp) {
    dg_onnx *o = load("mlp");
    dg_graph *g[2] = {dg_graph_new(), dg_graph_new()};
    dg_model m[2];
    dg_mlp_cfg cfg = {{6, 5, 3}, 3};
    ASSERT_OK(dg_onnx_model_new(g[0], o, 0, &m[0]));
    ASSERT_OK(dg_mlp_new(g[1], &cfg, 1, &m[1]));
    cr_assert_eq(m[0].n_params, m[1].n_params);
    for (int i = 0; i < m[0].n_params; i++) {
        cr_assert(dg_shape_eq(m[0].params[i]->shape, m[1].params[i]->shape), "parameter %d's shape", i);
        m[1].params[i]->init = m[0].params[i]->init;
    }
    const int batch = 8, steps = 3;
    float x[8 * 6];
    int32_t y[8];
    dg_rng r = dg_rng_new(test_seed());
    for (int i = 0; i < batch * 6; i++) x[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    for (int i = 0; i < batch; i++) y[i] = (int32_t)(dg_rng_uniform(&r) * 3);
    dg_optim sgd = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    float after[2][64], loss[2][3];
    for (int k = 0; k < 2; k++) {
        dg_train_step ts;
        dg_plan *p;
        ASSERT_OK(dg_train_step_build(g[k], &m[k], batch, &sgd, &ts));
        ASSERT_OK(dg_plan_new(&p, g[k], be, ts.outputs, ts.n_outputs, NULL));
        ASSERT_OK(dg_plan_set(p, ts.x, x, sizeof x));
        ASSERT_OK(dg_plan_set(p, ts.y, y, sizeof y));
        for (int s = 0; s < steps; s++) {
            ASSERT_OK(dg_plan_run(p));
            ASSERT_OK(dg_plan_get(p, ts.loss, &loss[k][s], sizeof(float)));
        }
        int at = 0;
        for (int i = 0; i < m[k].n_params; i++) {
            ASSERT_OK(dg_plan_get(p, m[k].params[i], after[k] + at, dg_node_bytes(m[k].params[i])));
            at += (int)dg_node_numel(m[k].params[i]);
        }
        cr_assert_eq(at, 6 * 5 + 5 + 5 * 3 + 3);
        dg_plan_free(p);
    }
    for (int s = 0; s < steps; s++)
        cr_assert_eq(memcmp(&loss[0][s], &loss[1][s], sizeof(float)), 0, "step %d: loss %.9g vs built-in %.9g", s,
                     (double)loss[0][s], (double)loss[1][s]);
    cr_assert_lt(loss[0][2], loss[0][0], "the loss did not fall: %g -> %g", (double)loss[0][0], (double)loss[0][2]);
    cr_assert_eq(memcmp(after[0], after[1], (6 * 5 + 5 + 5 * 3 + 3) * sizeof(float)), 0, "parameters differ");
    dg_backend_free(be);
    dg_graph_free(g[0]);
    dg_graph_free(g[1]);
    dg_onnx_free(o);
}

/* `bench profile --model FILE.onnx`: the step checked against float64
 * before it is timed, the result files named onnx-STEM, the file's name
 * and digest in their metadata; a file it refuses is exit 1 naming the
 * node, never a crash. */
Test(onnx, bench_profile_takes_a_file) {
    char dir[] = "/tmp/dg-onnx-XXXXXX", cmd[2048], out[16384], path[1100];
    tmp_dir(dir);
    snprintf(cmd, sizeof cmd, "%s profile --model " DATA "cnn.onnx --backend cpu --batch 8 --steps 2 --warmup 0 "
             "--ceilings /nonexistent --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "onnx-cnn on cpu, batch 8, 2 profiled steps, TF32 off; check f64-step@b2+finite: ok"),
              "%s", out);
    snprintf(path, sizeof path, "%s/profile-onnx-cnn-cpu-nodes.csv", dir);
    char *csv = read_file(path);
    cr_assert(strstr(csv, "# model: " DATA "cnn.onnx (1290 bytes, crc32 "), "%.2000s", csv);
    cr_assert(strstr(csv, "conv2d_backward_weight"), "no convolution's backward among the nodes");
    free(csv);
    snprintf(cmd, sizeof cmd, "%s profile --model " DATA "unknown_op.onnx --backend cpu --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "node 1 'hm': operator Hardmax is not supported"), "%s", out);
    remove_dir(dir);
}

/* `bench train --model FILE.onnx`: a file it refuses is exit 1 naming the
 * node; a model whose examples the data set lacks is refused by the
 * trainer naming both (Fashion-MNIST's 784 features, the CNN's 2x6x6)
 * after the file loaded, which is what this checks where Debian's
 * dataset-fashion-mnist is installed. */
Test(onnx, bench_train_takes_a_file) {
    char cmd[2048], out[16384];
    snprintf(cmd, sizeof cmd, "%s train --model " DATA "asym_pad.onnx --epochs 1 --out /tmp", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "node 0 'conv' (Conv): pads 0 (begin) and 1 (end)"), "%s", out);
    if (access("/usr/share/datasets/fashion-mnist", R_OK)) cr_skip_test("no Fashion-MNIST (dataset-fashion-mnist)");
    snprintf(cmd, sizeof cmd, "%s train --model " DATA "cnn.onnx --epochs 1 --subset 256 --out /tmp", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "model onnx takes 72 features into 3 classes; the data set has 784 features and 10 "
                          "classes"), "%s", out);
}

/* The imported MLP trained on a regression (DG_LOSS_MSE): the first
 * step's loss equals mean((NumPy's output - t)^2) for the script's input,
 * its parameter updates equal the float64 interpreter's run of the same
 * step graph, and ten steps reduce the loss. Catches a loss that is not
 * the mean of squares, targets of the wrong shape, an update that does
 * not reach the file's weights. */
Test(onnx, mse_step_on_an_imported_output) {
    dg_onnx *o = load("mlp");
    dg_graph *g = dg_graph_new();
    dg_model m;
    ASSERT_OK(dg_onnx_model_new(g, o, 0, &m));
    dg_optim sgd = dg_optim_default(DG_OPTIM_SGD, 0.05f);
    dg_train_step ts;
    ASSERT_OK(dg_train_step_build_opts(g, &m, 4, &sgd, &(dg_train_step_opts){.loss = DG_LOSS_MSE}, &ts));
    cr_assert(ts.y->dtype == DG_F32 && dg_shape_eq(ts.y->shape, DG_SHAPE(4, 3)), "targets: the output's shape");
    void *x, *ynp;
    cr_assert_eq(slurp(DATA "mlp.in.f32", &x), dg_node_bytes(ts.x));
    cr_assert_eq(slurp(DATA "mlp.out.f32", &ynp), dg_node_bytes(ts.y));
    float t[12];
    double want = 0;
    for (int i = 0; i < 12; i++) {
        t[i] = 0.25f * (float)(i % 5) - 0.5f;
        double d = (double)((float *)ynp)[i] - t[i];
        want += d * d / 12;
    }
    dg_backend *be;
    dg_plan *p;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    ASSERT_OK(dg_plan_new(&p, g, be, ts.outputs, ts.n_outputs, NULL));
    ASSERT_OK(dg_plan_set(p, ts.x, x, dg_node_bytes(ts.x)));
    ASSERT_OK(dg_plan_set(p, ts.y, t, sizeof t));
    ASSERT_OK(dg_plan_run(p));
    float loss0;
    ASSERT_OK(dg_plan_get(p, ts.loss, &loss0, sizeof loss0));
    cr_assert(fabs(loss0 - want) <= 1e-5 * want, "loss %.9g, NumPy's outputs give %.9g", (double)loss0, want);
    /* the float64 step: every leaf from its init or the inputs */
    int n = dg_graph_size(g);
    double **vals = calloc((size_t)n, sizeof *vals);
    for (int id = 0; id < n; id++) {
        const dg_node *nd = dg_graph_node(g, id);
        if (nd->op != DG_OP_LEAF) continue;
        int64_t k = dg_node_numel(nd);
        float *f = malloc((size_t)k * sizeof *f);
        if (nd == ts.x) memcpy(f, x, (size_t)k * sizeof *f);
        else if (nd == ts.y) memcpy(f, t, sizeof t);
        else ASSERT_OK(dg_init_fill(nd->init, f, k));
        vals[id] = malloc((size_t)k * sizeof **vals);
        for (int64_t j = 0; j < k; j++) vals[id][j] = f[j];
        free(f);
    }
    ASSERT_OK(ref_eval(g, n, vals));
    cr_assert(fabs(vals[ts.loss->id][0] - loss0) <= 1e-5 * want);
    for (int i = 0; i < m.n_params; i++) {
        int64_t k = dg_node_numel(m.params[i]);
        float *got = malloc((size_t)k * sizeof *got), *init = malloc((size_t)k * sizeof *init);
        ASSERT_OK(dg_plan_get(p, m.params[i], got, (size_t)k * sizeof *got));
        ASSERT_OK(dg_init_fill(m.params[i]->init, init, k));
        double num = 0, den = 0;
        for (int64_t j = 0; j < k; j++) {
            double dref = vals[m.params[i]->id][j] - init[j], dgot = (double)got[j] - init[j];
            num += (dgot - dref) * (dgot - dref);
            den += dref * dref;
        }
        cr_assert(den > 0 && sqrt(num / den) < 1e-4, "%s: update rel err %.3g (|update| %.3g)", m.params[i]->name,
                  sqrt(num / (den > 0 ? den : 1)), sqrt(den));
        free(got);
        free(init);
    }
    float loss = loss0;
    for (int s = 0; s < 10; s++) {
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(dg_plan_get(p, ts.loss, &loss, sizeof loss));
    }
    cr_assert_lt(loss, 0.8f * loss0, "ten steps: loss %g -> %g", (double)loss0, (double)loss);
    ref_free(vals, n);
    free(vals);
    free(x);
    free(ynp);
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
    dg_onnx_free(o);
}
