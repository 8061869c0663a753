/* test_models.c: the convolutional models as graphs: ResNet-18's parameter
 * counts against the published figures, the output shapes of both stems,
 * the small CNN's layers, the training step's running-statistics updates,
 * evaluation without batch statistics, refused configurations and inputs;
 * then, through the kernels, a ResNet basic block with a downsampling
 * shortcut forward and backward against float64 on both backends. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/check/ref.h"
#include "core/nn/cnn.h"
#include "core/nn/layers.h"
#include "core/nn/resnet.h"
#include "core/nn/train_step.h"
#include "core/rng.h"
#include "gpu_util.h"
#include "test_util.h"

/* how many nodes of g have op */
static int count_op(const dg_graph *g, dg_op op) {
    int k = 0;
    for (int i = 0; i < dg_graph_size(g); i++) k += dg_graph_node(g, i)->op == op;
    return k;
}

static void build_step(dg_graph *g, dg_model_new_fn make, const void *cfg, int batch, dg_model *m,
                       dg_train_step *ts) {
    ASSERT_OK(make(g, cfg, 1, m));
    dg_optim o = dg_optim_default(DG_OPTIM_MOMENTUM, 0.1f);
    ASSERT_OK(dg_train_step_build(g, m, batch, &o, ts));
}

/* torchvision's resnet18() and resnet18 with a 3x3 stem, no max pool and
 * 10 classes: 11,689,512 and 11,173,962 parameters. Catches a missing or
 * extra layer, a bias on a convolution, a shortcut in the wrong block. */
Test(resnet18, parameter_counts_match_the_published_figures) {
    const struct { dg_resnet_stem stem; int64_t count; const char *name; } cases[] = {
        {DG_RESNET_IMAGENET, 11689512, "resnet18"}, {DG_RESNET_CIFAR, 11173962, "resnet18-cifar"}};
    for (int i = 0; i < 2; i++) {
        dg_graph *g = dg_graph_new();
        dg_model m;
        dg_resnet_cfg cfg = dg_resnet18_default(cases[i].stem);
        ASSERT_OK(dg_resnet18_new(g, &cfg, 1, &m));
        cr_assert_eq(dg_model_param_count(&m), cases[i].count, "%s: %lld parameters", cases[i].name,
                     (long long)dg_model_param_count(&m));
        cr_assert_str_eq(m.name, cases[i].name);
        /* 20 batch norms (stem, 16 in the blocks, 3 shortcuts): mean and var each */
        cr_assert_eq(m.n_state, 40);
        dg_graph_free(g);
    }
}

/* The training step of both stems: logits [N, classes], 20 convolutions
 * (17 3x3 or 7x7, 3 1x1 shortcuts), one max pool for the ImageNet stem
 * only, and one running update per batch norm among the plan's outputs. */
Test(resnet18, training_step_shapes_layers_and_running_updates) {
    for (int stem = 0; stem < 2; stem++) {
        dg_graph *g = dg_graph_new();
        dg_model m;
        dg_train_step ts;
        dg_resnet_cfg cfg = dg_resnet18_default((dg_resnet_stem)stem);
        build_step(g, dg_resnet18_new, &cfg, 2, &m, &ts);
        cr_assert_eq(ts.logits->shape.ndim, 2);
        cr_assert_eq(ts.logits->shape.d[0], 2);
        cr_assert_eq(ts.logits->shape.d[1], cfg.classes);
        cr_assert_eq(count_op(g, DG_OP_CONV2D), 20, "stem %d", stem);
        cr_assert_eq(count_op(g, DG_OP_MAX_POOL2D), stem == DG_RESNET_IMAGENET ? 1 : 0);
        cr_assert_eq(count_op(g, DG_OP_BATCH_NORM), 20);
        cr_assert_eq(count_op(g, DG_OP_BATCH_NORM_RUNNING), 20);
        cr_assert_eq(ts.n_outputs, 1 + m.n_params + 20);
        for (int i = 1 + m.n_params; i < ts.n_outputs; i++)
            cr_assert_eq(ts.outputs[i]->op, DG_OP_BATCH_NORM_RUNNING);
        /* every parameter gets a gradient that is a computed node */
        for (int i = 0; i < m.n_params; i++)
            cr_assert_neq(ts.grads[i]->op, DG_OP_LEAF, "no gradient reached %s", m.params[i]->name);
        dg_graph_free(g);
    }
}

/* the CNN: 288 + 64 + 18432 + 128 + 3136*128 + 128 + 1280 + 10 parameters,
 * logits [N,10], two of each block layer */
Test(cnn, layers_and_parameter_count) {
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_train_step ts;
    dg_cnn_cfg cfg = dg_cnn_default();
    build_step(g, dg_cnn_new, &cfg, 4, &m, &ts);
    cr_assert_eq(dg_model_param_count(&m), 421738);
    cr_assert_eq(m.n_params, 10);
    cr_assert_eq(m.n_state, 4);
    cr_assert_eq(ts.logits->shape.d[0], 4);
    cr_assert_eq(ts.logits->shape.d[1], 10);
    cr_assert_eq(count_op(g, DG_OP_CONV2D), 2);
    cr_assert_eq(count_op(g, DG_OP_MAX_POOL2D), 2);
    cr_assert_eq(count_op(g, DG_OP_BATCH_NORM_RUNNING), 2);
    cr_assert_eq(ts.n_outputs, 1 + 10 + 2);
    dg_graph_free(g);
}

/* An evaluation forward (mode NULL) normalises with the running statistics:
 * no batch_norm node, nothing appended; a training forward adds one
 * batch_norm and one update per layer. Catches evaluation silently using
 * batch statistics (accuracy would then depend on the evaluation batch). */
Test(cnn, evaluation_uses_running_statistics) {
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_cnn_cfg cfg = dg_cnn_default();
    ASSERT_OK(dg_cnn_new(g, &cfg, 1, &m));
    dg_node *x = dg_input(g, "x", DG_SHAPE(3, 1, 28, 28));
    cr_assert_not_null(dg_model_forward(g, &m, x, NULL), "%s", dg_last_error());
    cr_assert_eq(count_op(g, DG_OP_BATCH_NORM), 0);
    dg_forward_mode train = {.training = true};
    cr_assert_not_null(dg_model_forward(g, &m, x, &train), "%s", dg_last_error());
    cr_assert_eq(count_op(g, DG_OP_BATCH_NORM), 2);
    cr_assert_eq(train.n_updates, 2);
    cr_assert_eq(train.updates[0]->view_of, m.state[0], "the first update writes bn1's running mean");
    dg_graph_free(g);
}

/* Bad configurations are refused before anything is added to the graph;
 * an input that does not fit fails in the builder that meets it. */
Test(models, bad_configurations_are_refused_with_a_message) {
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_cnn_cfg cnn = dg_cnn_default();
    cnn.height = 30;
    cr_assert_eq(dg_cnn_new(g, &cnn, 1, &m), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "multiples of 4"), "%s", dg_last_error());
    dg_resnet_cfg rc = dg_resnet18_default(DG_RESNET_CIFAR);
    rc.stem = (dg_resnet_stem)7;
    cr_assert_eq(dg_resnet18_new(g, &rc, 1, &m), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "stem 7"), "%s", dg_last_error());
    cr_assert_eq(dg_resnet18_new(NULL, &rc, 1, &m), DG_ERR_INVALID);
    cr_assert_eq(dg_graph_size(g), 0, "a refused model added nodes");
    cr_assert_eq(dg_graph_status(g), DG_OK);

    /* an input of the wrong channel count fails in the stem's convolution,
     * naming the shapes */
    rc = dg_resnet18_default(DG_RESNET_CIFAR);
    ASSERT_OK(dg_resnet18_new(g, &rc, 1, &m));
    dg_node *x = dg_input(g, "x", DG_SHAPE(2, 4, 32, 32));
    cr_assert_null(dg_model_forward(g, &m, x, NULL));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    cr_assert(strstr(dg_last_error(), "conv2d: weight [64,3,3,3]") && strstr(dg_last_error(), "[2,4,32,32]"), "%s",
              dg_last_error());
    dg_graph_free(g);
}

/* A basic block with the downsampling shortcut, in training mode:
 *   x [2,4,6,6] -> conv3x3 s2 (8) -> bn -> relu -> conv3x3 (8) -> bn -+-> relu
 *               -> conv1x1 s2 (8) -> bn ------------------------------+
 * loss = sum(out * r) with random r; gradients of x and the 9 parameters;
 * the running statistics' updates run too. Every value the plan computes
 * (output, loss, gradients, running statistics) against the float64
 * evaluation of the same graph. Tolerance 1e-4 of each tensor's largest
 * value: float32 sums of at most 72 terms, then batch norm's division by a
 * standard deviation near 1. Catches a wrong convolution form, pool or norm
 * kernel, or a wrong gradient wiring, anywhere in the block. */
typedef struct block_graph {
    dg_graph *g;
    dg_model  m;           /* holds the block's parameters and state */
    dg_node  *x, *r, *out, *loss, *grads[1 + DG_MODEL_MAX_PARAMS], *outputs[48];
    int       n_outputs;
} block_graph;

static void block_graph_new(block_graph *b, uint64_t seed) {
    *b = (block_graph){.g = dg_graph_new(), .m = {.name = "block"}};
    dg_graph *g = b->g;
    dg_model *m = &b->m;
    dg_bn_layer bn[3];
    dg_node *w1 = dg_kaiming_param(g, m, "conv1.w", DG_SHAPE(8, 4, 3, 3), 36, seed);
    dg_bn_layer_new(g, m, "bn1", 8, &bn[0]);
    dg_node *w2 = dg_kaiming_param(g, m, "conv2.w", DG_SHAPE(8, 8, 3, 3), 72, seed + 1);
    dg_bn_layer_new(g, m, "bn2", 8, &bn[1]);
    dg_node *wd = dg_kaiming_param(g, m, "down.w", DG_SHAPE(8, 4, 1, 1), 4, seed + 2);
    dg_bn_layer_new(g, m, "down.bn", 8, &bn[2]);
    /* scale and shift away from 1 and 0, so their gradients' roles differ */
    m->params[1]->init = (dg_init){DG_INIT_UNIFORM, 0.5f, 1.5f, seed + 3};
    m->params[2]->init = (dg_init){DG_INIT_UNIFORM, -0.5f, 0.5f, seed + 4};
    b->x = dg_input(g, "x", DG_SHAPE(2, 4, 6, 6));
    b->r = dg_input(g, "r", DG_SHAPE(2, 8, 3, 3));
    dg_forward_mode mode = {.training = true};
    dg_conv2d_opts s2 = {.stride = {2, 2}, .pad = {1, 1}}, s1 = {.pad = {1, 1}};
    dg_node *y = dg_relu(g, dg_bn_layer_apply(g, &bn[0], dg_conv2d(g, b->x, w1, NULL, s2), &mode));
    y = dg_bn_layer_apply(g, &bn[1], dg_conv2d(g, y, w2, NULL, s1), &mode);
    dg_conv2d_opts down = {.stride = {2, 2}};
    dg_node *sc = dg_bn_layer_apply(g, &bn[2], dg_conv2d(g, b->x, wd, NULL, down), &mode);
    b->out = dg_relu(g, dg_add(g, y, sc));
    b->loss = dg_sum(g, dg_mul(g, b->out, b->r), DG_ALL_AXES, false);
    dg_node *wrt[1 + DG_MODEL_MAX_PARAMS] = {b->x};
    for (int i = 0; i < m->n_params; i++) wrt[1 + i] = m->params[i];
    ASSERT_OK(dg_grad(g, b->loss, wrt, 1 + m->n_params, b->grads));
    b->outputs[b->n_outputs++] = b->out;
    b->outputs[b->n_outputs++] = b->loss;
    for (int i = 0; i < 1 + m->n_params; i++) b->outputs[b->n_outputs++] = b->grads[i];
    for (int i = 0; i < mode.n_updates; i++) b->outputs[b->n_outputs++] = mode.updates[i];
    cr_assert_eq(m->n_params, 9);
    cr_assert_eq(mode.n_updates, 3);
}

static void fill_uniform(float *v, int64_t n, uint64_t seed) {
    dg_rng r = dg_rng_new(seed);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(2 * dg_rng_uniform(&r) - 1);
}

static void check_block(bool gpu) {
    uint64_t seed = test_seed();
    dg_backend *be = test_backend_open(gpu);
    block_graph b;
    block_graph_new(&b, seed);
    int n_nodes = dg_graph_size(b.g);
    int64_t nx = dg_node_numel(b.x), nr = dg_node_numel(b.r);
    float *xv = malloc((size_t)nx * 4), *rv = malloc((size_t)nr * 4);
    fill_uniform(xv, nx, seed + 10);
    fill_uniform(rv, nr, seed + 11);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, b.g, be, b.outputs, b.n_outputs, NULL));
    ASSERT_OK(dg_plan_set(p, b.x, xv, (size_t)nx * 4));
    ASSERT_OK(dg_plan_set(p, b.r, rv, (size_t)nr * 4));
    ASSERT_OK(dg_plan_run(p));

    /* the reference: leaves from the same inputs and init specs */
    double **vals = calloc((size_t)n_nodes, sizeof *vals);
    for (int id = 0; id < n_nodes; id++) {
        dg_node *n = dg_graph_node(b.g, id);
        if (n->op != DG_OP_LEAF) continue;
        int64_t k = dg_node_numel(n);
        float *f = malloc((size_t)k * 4);
        if (n == b.x || n == b.r) memcpy(f, n == b.x ? xv : rv, (size_t)k * 4);
        else ASSERT_OK(dg_init_fill(n->init, f, k));
        vals[id] = malloc((size_t)k * sizeof(double));
        for (int64_t i = 0; i < k; i++) vals[id][i] = f[i];
        free(f);
    }
    ASSERT_OK(ref_eval(b.g, n_nodes, vals));
    /* the outputs, then the running statistics the updates wrote */
    dg_node *check[64];
    int n_check = 0;
    for (int i = 0; i < b.n_outputs - 3; i++) check[n_check++] = b.outputs[i];
    for (int i = 0; i < b.m.n_state; i++) check[n_check++] = b.m.state[i];
    for (int i = 0; i < n_check; i++) {
        dg_node *n = check[i];
        int64_t k = dg_node_numel(n);
        float *got = malloc((size_t)k * 4);
        ASSERT_OK(dg_plan_get(p, n, got, (size_t)k * 4));
        cmp_stats cs = cmp_f32(got, vals[n->id], k);
        ASSERT_CLOSE(cs, 1e-4, gpu ? "gpu basic block" : "cpu basic block", n->name, seed);
        free(got);
    }
    ref_free(vals, n_nodes);
    free(vals);
    free(xv);
    free(rv);
    dg_plan_free(p);
    dg_graph_free(b.g);
    dg_backend_free(be);
}

Test(basic_block, cpu_forward_backward_and_running_stats_match_float64) { check_block(false); }
Test(basic_block, gpu_forward_backward_and_running_stats_match_float64) { check_block(true); }
