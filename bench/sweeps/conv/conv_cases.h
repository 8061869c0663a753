/* conv_cases.h: the conv sweep's cases, which sweep_conv.c runs and
 * sweep_conv_report.c draws: every distinct layer geometry, the three
 * directions and the implementations. A case is SHAPE:DIRECTION, e.g.
 * "r18c-l2.0-conv1:bwd-weight". */
#ifndef DG_BENCH_CONV_CASES_H
#define DG_BENCH_CONV_CASES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/backend.h"
#include "core/precision.h"
#include "core/status.h"

#define CONV_MAX_SHAPES 40

/* one distinct layer geometry, x [batch, c, h, w] -> [batch, o, oh, ow];
 * groups and dilation are 1 everywhere */
typedef struct conv_shape {
    char        name[32];   /* FAMILY-LAYER: the first layer of the geometry */
    const char *family;     /* r18c (ResNet-18, CIFAR stem), r18i (ImageNet stem), cnn, lenet */
    int         c, h, w, o, kh, kw, stride, pad;
} conv_shape;

typedef struct conv_shape_list { conv_shape s[CONV_MAX_SHAPES]; int n; } conv_shape_list;

/* Every distinct convolution of ResNet-18 with the CIFAR stem (3x32x32),
 * then the ImageNet stem (3x224x224), read from the models' graphs as
 * core/nn builds them; then the small CNN's, then LeNet-5's two. */
dg_status conv_shapes(conv_shape_list *l);

enum { CONV_FWD, CONV_BWD_DATA, CONV_BWD_WEIGHT, CONV_N_DIRS };
extern const char *const conv_dir_name[CONV_N_DIRS]; /* fwd, bwd-data, bwd-weight */

/* SHAPE:DIRECTION into buf (47 characters at most) */
void conv_case_name(const conv_shape *s, int dir, char *buf, size_t n);

/* what a row runs: the convolution implementation its step is run with
 * (dg_conv_impl, as a plan's options name it): on the CPU one of the
 * backend's strategies (cpu_backend.h: in passes, image by image per
 * thread, shifted taps, the weight's gradient by input channels) or
 * oneDNN's, on the GPU the implicit-GEMM kernels, im2col or cuDNN's, with
 * the host-device copies inside the timed region or not; `name` is also
 * what dg_backend_step_impl calls it where it runs as asked. `precs`: the
 * precisions it has rows in (a mask of 1 << dg_precision): the CPU has no
 * TF32, and the copies are timed in fp32 alone. */
typedef struct conv_impl {
    const char  *name;
    bool         gpu, transfer;
    dg_conv_impl conv;
    unsigned     precs;
} conv_impl;
enum {
    CONV_CPU, CONV_CPU_BATCH, CONV_CPU_SHIFT, CONV_CPU_CHANNELS, CONV_CPU_ONEDNN,
    CONV_GPU_IM2COL, CONV_GPU_TRANSFER, CONV_GPU_IMPLICIT, CONV_GPU_CUDNN, CONV_N_IMPLS
};
extern const conv_impl conv_impls[CONV_N_IMPLS]; /* in the order of a shape's rows */

#endif
