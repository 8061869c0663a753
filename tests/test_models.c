/* test_models.c: the convolutional models as graphs: ResNet-18's parameter
 * counts against the published figures, the output shapes of both stems,
 * the small CNN's layers, the training step's running-statistics updates,
 * evaluation without batch statistics, and refused configurations and
 * inputs. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/nn/cnn.h"
#include "core/nn/resnet.h"
#include "core/nn/train_step.h"
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
