/* resnet.c: ResNet-18's parameters and forward (resnet.h). Parameters are
 * made in the order the forward consumes them, so the forward walks them
 * with a cursor instead of a table of indices. */
#include "resnet.h"

#include <stdio.h>

#include "../graph_internal.h"
#include "layers.h"

static const int stage_width[4] = {64, 128, 256, 512};

dg_resnet_cfg dg_resnet18_default(dg_resnet_stem stem) {
    return stem == DG_RESNET_CIFAR ? (dg_resnet_cfg){DG_RESNET_CIFAR, 3, 32, 32, 10}
                                   : (dg_resnet_cfg){DG_RESNET_IMAGENET, 3, 224, 224, 1000};
}

/* ---- parameters ---- */

static void conv_bn_params(dg_graph *g, dg_model *m, const char *name, int cin, int cout, int k, uint64_t seed) {
    char n[32];
    dg_bn_layer bn;
    snprintf(n, sizeof n, "%.28s.w", name);
    dg_kaiming_param(g, m, n, DG_SHAPE(cout, cin, k, k), (int64_t)cin * k * k, seed);
    snprintf(n, sizeof n, "%.25s.bn", name);
    dg_bn_layer_new(g, m, n, cout, &bn);
}

/* stage s block b takes cin channels; a block downsamples (stride 2 and a
 * 1x1 shortcut) where it is the first of stages 2-4 */
static bool block_downsamples(int s, int b) { return s > 0 && b == 0; }


/* ---- forward ---- */

typedef struct cursor { const dg_model *m; int param, state; dg_forward_mode *mode; } cursor;

/* the next conv weight and batch norm layer: conv -> bn */
static dg_node *conv_bn(dg_graph *g, cursor *c, dg_node *x, int stride, int pad) {
    dg_node *w = c->m->params[c->param];
    dg_bn_layer bn = {c->m->params[c->param + 1], c->m->params[c->param + 2], c->m->state[c->state],
                      c->m->state[c->state + 1]};
    c->param += 3;
    c->state += 2;
    dg_node *y = dg_model_conv(g, c->mode, x, w, (dg_conv2d_opts){.stride = {stride, stride}, .pad = {pad, pad}});
    return dg_bn_layer_apply(g, &bn, y, c->mode);
}

static dg_node *basic_block(dg_graph *g, cursor *c, dg_node *x, bool downsample) {
    int stride = downsample ? 2 : 1;
    dg_node *y = dg_relu(g, conv_bn(g, c, x, stride, 1));
    y = conv_bn(g, c, y, 1, 1);
    dg_node *shortcut = downsample ? conv_bn(g, c, x, stride, 0) : x;
    return dg_relu(g, dg_add(g, y, shortcut));
}

static dg_node *resnet_forward(dg_graph *g, const dg_model *m, dg_node *x, dg_forward_mode *mode) {
    cursor c = {m, 0, 0, mode};
    /* the stem's kernel says which it is: 7x7 (imagenet) or 3x3 (cifar) */
    bool imagenet = m->params[0] && m->params[0]->shape.d[2] == 7;
    x = dg_relu(g, conv_bn(g, &c, x, imagenet ? 2 : 1, imagenet ? 3 : 1));
    if (imagenet) x = dg_max_pool2d(g, x, (dg_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}});
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < 2; b++) x = basic_block(g, &c, x, block_downsamples(s, b));
    x = dg_global_avg_pool2d(g, x);
    return dg_add(g, dg_model_matmul(g, mode, x, m->params[c.param], false, false), m->params[c.param + 1]);
}

dg_status dg_resnet18_new(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out) {
    const dg_resnet_cfg *c = cfg;
    if (!g || !c || !out) return dg__fail(DG_ERR_INVALID, "resnet18: NULL %s", !g ? "graph" : !c ? "config" : "model");
    if ((unsigned)c->stem > DG_RESNET_CIFAR || c->channels < 1 || c->height < 1 || c->width < 1 || c->classes < 1)
        return dg__fail(DG_ERR_INVALID, "resnet18: stem %d, input %dx%dx%d, %d classes (a known stem, sizes >= 1)",
                        (int)c->stem, c->channels, c->height, c->width, c->classes);
    if (dg_graph_status(g) != DG_OK) return dg__graph_refuse(g, "resnet18");
    bool imagenet = c->stem == DG_RESNET_IMAGENET;
    *out = (dg_model){.name = imagenet ? "resnet18" : "resnet18-cifar",
                      .in_shape = DG_SHAPE(c->channels, c->height, c->width), .classes = c->classes,
                      .forward = resnet_forward};
    uint64_t k = seed * 1000u;
    conv_bn_params(g, out, "stem", c->channels, 64, imagenet ? 7 : 3, k++);
    int cin = 64;
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < 2; b++) {
            char name[32];
            int cout = stage_width[s];
            snprintf(name, sizeof name, "l%d.%d.conv1", s + 1, b);
            conv_bn_params(g, out, name, cin, cout, 3, k++);
            snprintf(name, sizeof name, "l%d.%d.conv2", s + 1, b);
            conv_bn_params(g, out, name, cout, cout, 3, k++);
            if (block_downsamples(s, b)) {
                snprintf(name, sizeof name, "l%d.%d.down", s + 1, b);
                conv_bn_params(g, out, name, cin, cout, 1, k++);
            }
            cin = cout;
        }
    dg_kaiming_param(g, out, "fc.w", DG_SHAPE(512, c->classes), 512, k);
    dg_fill_param(g, out, "fc.b", DG_SHAPE(c->classes), 0.0f);
    return dg_graph_status(g);
}
