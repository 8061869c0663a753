/* conv_cases.c: the conv sweep's shapes, directions and implementations
 * (conv_cases.h). */
#include "sweeps/conv/conv_cases.h"

#include <stdio.h>
#include <string.h>

#include "core/nn/cnn.h"
#include "core/nn/resnet.h"
#include "core/status.h"

const char *const conv_dir_name[CONV_N_DIRS] = {"fwd", "bwd-data", "bwd-weight"};

#define FP32_ONLY (1u << DG_PREC_FP32)
#define CPU_PRECS (1u << DG_PREC_FP32 | 1u << DG_PREC_BF16 | 1u << DG_PREC_FP16)
#define GPU_PRECS ((1u << DG_PREC_COUNT) - 1)

const conv_impl conv_impls[CONV_N_IMPLS] = {
    /* im2col + OpenBLAS in passes; the same, image per thread; shifted taps,
     * no im2col; the weight's gradient split by input channels; oneDNN */
    [CONV_CPU]          = {"cpu-im2col", false, false, DG_CONV_IM2COL, CPU_PRECS},
    [CONV_CPU_BATCH]    = {"cpu-im2col-batch", false, false, DG_CONV_IM2COL_BATCH, CPU_PRECS},
    [CONV_CPU_SHIFT]    = {"cpu-shift", false, false, DG_CONV_SHIFT, CPU_PRECS},
    [CONV_CPU_CHANNELS] = {"cpu-im2col-chan", false, false, DG_CONV_IM2COL_CHANNELS, CPU_PRECS},
    [CONV_CPU_ONEDNN]   = {"cpu-onednn", false, false, DG_CONV_VENDOR, CPU_PRECS},
    /* im2col + cuBLAS; the same with the copies; the implicit-GEMM kernels; cuDNN */
    [CONV_GPU_IM2COL]   = {"gpu-im2col", true, false, DG_CONV_IM2COL, GPU_PRECS},
    [CONV_GPU_TRANSFER] = {"gpu-im2col", true, true, DG_CONV_IM2COL, FP32_ONLY},
    [CONV_GPU_IMPLICIT] = {"gpu-implicit", true, false, DG_CONV_IMPLICIT, GPU_PRECS},
    [CONV_GPU_CUDNN]    = {"gpu-cudnn", true, false, DG_CONV_VENDOR, GPU_PRECS},
};

void conv_case_name(const conv_shape *s, int dir, char *buf, size_t n) {
    snprintf(buf, n, "%s:%s", s->name, conv_dir_name[dir]);
}

static void add_shape(conv_shape_list *l, const char *family, const char *layer, conv_shape g) {
    for (int i = 0; i < l->n; i++) {
        const conv_shape *e = &l->s[i];
        if (e->c == g.c && e->h == g.h && e->w == g.w && e->o == g.o && e->kh == g.kh && e->kw == g.kw &&
            e->stride == g.stride && e->pad == g.pad)
            return; /* the first layer of a geometry names it */
    }
    if (l->n == CONV_MAX_SHAPES) return;
    g.family = family;
    snprintf(g.name, sizeof g.name, "%s-%.20s", family, layer);
    l->s[l->n++] = g;
}

/* The convolutions of a model's forward on one image: the layer is named
 * after its weight, "l2.0.conv1.w" -> "l2.0-conv1". */
static dg_status add_model(conv_shape_list *l, const char *family, dg_model_new_fn make, const void *cfg) {
    dg_graph *g = dg_graph_new();
    if (!g) return dg_fail(DG_ERR_OOM, "conv sweep: out of memory for the %s graph", family);
    dg_model m;
    dg_shape xs;
    dg_status st = make(g, cfg, 1, &m);
    if (st == DG_OK && dg_model_input_shape(&m, 1, &xs)) dg_model_forward(g, &m, dg_input(g, "x", xs), NULL);
    if (st == DG_OK) st = dg_graph_status(g);
    for (int id = 0; st == DG_OK && id < dg_graph_size(g); id++) {
        const dg_node *y = dg_graph_node(g, id);
        if (y->op != DG_OP_CONV2D) continue;
        dg_conv2d_opts a = dg_node_conv2d_opts(y);
        const dg_shape *w = &y->in[1]->shape; /* [O, C/groups, KH, KW] */
        char layer[32];
        snprintf(layer, sizeof layer, "%s", y->in[1]->name);
        char *dot = strrchr(layer, '.');
        if (dot && !strcmp(dot, ".w")) *dot = '\0';
        if ((dot = strrchr(layer, '.')) != NULL) *dot = '-';
        const dg_shape *x = &y->in[0]->shape;
        add_shape(l, family, layer,
                  (conv_shape){.c = (int)x->d[1], .h = (int)x->d[2], .w = (int)x->d[3], .o = (int)y->shape.d[1],
                               .kh = (int)w->d[2], .kw = (int)w->d[3], .stride = a.stride[0], .pad = a.pad[0]});
    }
    dg_graph_free(g);
    return st;
}

dg_status conv_shapes(conv_shape_list *l) {
    l->n = 0;
    dg_resnet_cfg cifar = dg_resnet18_default(DG_RESNET_CIFAR), imagenet = dg_resnet18_default(DG_RESNET_IMAGENET);
    dg_cnn_cfg cnn = dg_cnn_default();
    dg_status st = add_model(l, "r18c", dg_resnet18_new, &cifar);
    if (st == DG_OK) st = add_model(l, "r18i", dg_resnet18_new, &imagenet);
    if (st == DG_OK) st = add_model(l, "cnn", dg_cnn_new, &cnn);
    /* LeNet-5, which no model of the project builds: 1->6 5x5 padded to
     * keep 28x28, then 6->16 5x5 on the pooled 14x14 */
    add_shape(l, "lenet", "c1",
              (conv_shape){.c = 1, .h = 28, .w = 28, .o = 6, .kh = 5, .kw = 5, .stride = 1, .pad = 2});
    add_shape(l, "lenet", "c2", (conv_shape){.c = 6, .h = 14, .w = 14, .o = 16, .kh = 5, .kw = 5, .stride = 1});
    return st;
}
