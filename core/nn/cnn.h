/* cnn.h: a small convolutional network for 28x28 grey images (Fashion-MNIST)
 * as a dg_model: two blocks of 3x3 convolution (padding 1, no bias), batch
 * norm, ReLU and 2x2 max pooling, then two linear layers.
 *
 *   x [N,1,28,28] -> conv c1 -> bn -> relu -> pool -> [N,c1,14,14]
 *                 -> conv c2 -> bn -> relu -> pool -> [N,c2,7,7]
 *                 -> flatten [N, c2*49] -> linear hidden -> relu -> linear classes */
#ifndef DG_NN_CNN_H
#define DG_NN_CNN_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_cnn_cfg {
    int height, width;   /* one grey image; both multiples of 4        */
    int c1, c2, hidden, classes;
} dg_cnn_cfg;

/* 28x28, 32 and 64 channels, 128 hidden, 10 classes */
dg_cnn_cfg dg_cnn_default(void);

/* A dg_model_new_fn. Parameters in order: conv1.w, bn1.scale, bn1.shift,
 * conv2.w, bn2.scale, bn2.shift, fc1.w, fc1.b, fc2.w, fc2.b; state:
 * bn1.mean, bn1.var, bn2.mean, bn2.var. DG_ERR_INVALID, with nothing added
 * to g, for NULL arguments, sizes < 1 or images not a multiple of 4. */
dg_status dg_cnn_new(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out);

#ifdef __cplusplus
}
#endif
#endif
