/* cnn.c: the small CNN's parameters and forward (cnn.h). */
#include "cnn.h"

#include "../graph_internal.h"
#include "layers.h"

dg_cnn_cfg dg_cnn_default(void) { return (dg_cnn_cfg){28, 28, 32, 64, 128, 10}; }

/* where each layer's tensors sit in the model's params[] and state[] */
enum { CONV1, BN1_SCALE, BN1_SHIFT, CONV2, BN2_SCALE, BN2_SHIFT, FC1_W, FC1_B, FC2_W, FC2_B };

static dg_bn_layer bn_of(const dg_model *m, int scale, int state) {
    return (dg_bn_layer){m->params[scale], m->params[scale + 1], m->state[state], m->state[state + 1]};
}

/* conv 3x3 (padding 1) -> batch norm -> relu -> 2x2 max pool */
static dg_node *block(dg_graph *g, dg_node *x, dg_node *w, dg_bn_layer bn, dg_forward_mode *mode) {
    dg_node *y = dg_model_conv(g, mode, x, w, (dg_conv2d_opts){.pad = {1, 1}});
    y = dg_relu(g, dg_bn_layer_apply(g, &bn, y, mode));
    return dg_max_pool2d(g, y, (dg_pool2d_opts){.kernel = {2, 2}});
}

static dg_node *cnn_forward(dg_graph *g, const dg_model *m, dg_node *x, dg_forward_mode *mode) {
    x = block(g, x, m->params[CONV1], bn_of(m, BN1_SCALE, 0), mode);
    x = block(g, x, m->params[CONV2], bn_of(m, BN2_SCALE, 2), mode);
    x = dg_flatten(g, x);
    x = dg_relu(g, dg_add(g, dg_model_matmul(g, mode, x, m->params[FC1_W], false, false), m->params[FC1_B]));
    return dg_add(g, dg_model_matmul(g, mode, x, m->params[FC2_W], false, false), m->params[FC2_B]);
}

dg_status dg_cnn_new(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out) {
    const dg_cnn_cfg *c = cfg;
    if (!g || !c || !out) return dg__fail(DG_ERR_INVALID, "cnn: NULL %s", !g ? "graph" : !c ? "config" : "model");
    if (c->height < 4 || c->width < 4 || c->height % 4 || c->width % 4 || c->c1 < 1 || c->c2 < 1 || c->hidden < 1 ||
        c->classes < 1)
        return dg__fail(DG_ERR_INVALID, "cnn: images %dx%d (multiples of 4), channels %d, %d, hidden %d, classes %d "
                        "(each >= 1)", c->height, c->width, c->c1, c->c2, c->hidden, c->classes);
    if (dg_graph_status(g) != DG_OK) return dg__graph_refuse(g, "cnn");
    *out = (dg_model){.name = "cnn", .in_shape = DG_SHAPE(1, c->height, c->width), .classes = c->classes,
                      .forward = cnn_forward};
    int64_t flat = (int64_t)c->c2 * (c->height / 4) * (c->width / 4);
    dg_bn_layer bn;
    dg_kaiming_param(g, out, "conv1.w", DG_SHAPE(c->c1, 1, 3, 3), 9, seed * 1000u + 0);
    dg_bn_layer_new(g, out, "bn1", c->c1, &bn);
    dg_kaiming_param(g, out, "conv2.w", DG_SHAPE(c->c2, c->c1, 3, 3), 9 * (int64_t)c->c1, seed * 1000u + 1);
    dg_bn_layer_new(g, out, "bn2", c->c2, &bn);
    dg_kaiming_param(g, out, "fc1.w", DG_SHAPE(flat, c->hidden), flat, seed * 1000u + 2);
    dg_fill_param(g, out, "fc1.b", DG_SHAPE(c->hidden), 0.0f);
    dg_kaiming_param(g, out, "fc2.w", DG_SHAPE(c->hidden, c->classes), c->hidden, seed * 1000u + 3);
    dg_fill_param(g, out, "fc2.b", DG_SHAPE(c->classes), 0.0f);
    return dg_graph_status(g);
}
