/* resnet.h: ResNet-18 (basic blocks, [2,2,2,2], widths 64-128-256-512) as a
 * dg_model, with either stem:
 *   imagenet: 7x7 stride-2 conv (padding 3) -> bn -> relu -> 3x3 stride-2
 *             max pool (padding 1); 224x224 input gives 56x56 to stage 1;
 *   cifar:    3x3 conv (padding 1) -> bn -> relu; 32x32 input, no pool.
 * A basic block: conv3x3(stride s) -> bn -> relu -> conv3x3 -> bn, plus
 * the shortcut (identity, or a 1x1 stride-s conv -> bn where the shape
 * changes), then relu. Head: global average pool -> linear (with bias).
 * Convolutions have no bias (batch norm follows each). */
#ifndef DG_NN_RESNET_H
#define DG_NN_RESNET_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dg_resnet_stem { DG_RESNET_IMAGENET, DG_RESNET_CIFAR } dg_resnet_stem;

typedef struct dg_resnet_cfg {
    dg_resnet_stem stem;
    int channels, height, width;  /* one input image: 3x224x224 or 3x32x32 */
    int classes;
} dg_resnet_cfg;

/* 3x224x224 and 1000 classes, or 3x32x32 and 10 classes */
dg_resnet_cfg dg_resnet18_default(dg_resnet_stem stem);

/* A dg_model_new_fn: parameters in the order the forward reads them (stem,
 * then each block's conv1, bn1, conv2, bn2 and shortcut conv, bn, then the
 * linear layer); state: each batch norm's running mean and variance.
 * DG_ERR_INVALID, with nothing added to g, for NULL arguments, an unknown
 * stem or sizes < 1; an image too small for the network fails as the
 * builder that cannot fit it (the graph in an error state). */
dg_status dg_resnet18_new(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out);

#ifdef __cplusplus
}
#endif
#endif
