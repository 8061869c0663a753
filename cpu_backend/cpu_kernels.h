/* cpu_kernels.h: the CPU kernels behind the dispatch switch in
 * cpu_backend.c. Each takes the step (node + resolved buffers). */
#ifndef DG_CPU_KERNELS_H
#define DG_CPU_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/backend.h"
#include "cpu_backend.h"

/* The step's sgemm (the plan's choice, else dg_cpu_set_gemm's), for kernels built on
 * GEMMs: row-major C[m,n] = op(A) op(B) (or C += ... with accumulate),
 * op = transpose where the flag is set, leading dimensions as row strides;
 * ctx is the backend's. */
typedef struct dg_cpu_blas {
    void (*sgemm)(const void *ctx, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                  const float *B, int ldb, float *C, int ldc, bool accumulate);
    const void *ctx;
    bool        serial_in_parallel; /* inside an OpenMP parallel region it runs on the
                                       calling thread alone, safely beside the others */
} dg_cpu_blas;

void dg__cpu_unary(const dg_step *s);          /* neg ... gelu, scalar ops     */
void dg__cpu_binary(const dg_step *s);         /* add sub mul div, broadcasting */
void dg__cpu_unary_backward(const dg_step *s); /* (dy, x|y) -> dx               */
void dg__cpu_broadcast_to(const dg_step *s);
void dg__cpu_permute(const dg_step *s);
/* f32 <-> bf16 or f16 (cpu_cast.c); n bf16 or f16 values (dtype t)
 * widened to float32 into y, exactly; n floats rounded to t (bf16 or f16,
 * to nearest even) into y */
dg_status dg__cpu_cast(const dg_step *s);
void      dg__cpu_widen(dg_dtype t, const void *x, float *y, int64_t n);
void      dg__cpu_narrow(dg_dtype t, const float *x, void *y, int64_t n);
void dg__cpu_reduce(const dg_step *s);         /* sum, mean                     */
void dg__cpu_softmax(const dg_step *s);        /* softmax, log_softmax          */
void dg__cpu_softmax_backward(const dg_step *s);
/* softmax-CE and the embedding refuse a label or id outside its range
 * (DG_ERR_INVALID, naming the first) before they read a row */
dg_status dg__cpu_softmax_ce(const dg_step *s);
dg_status dg__cpu_softmax_ce_backward(const dg_step *s);
void dg__cpu_update(const dg_step *s);         /* sgd, momentum, adam; loss scaling */

/* convolutions: im2col in the step's scratch, then GEMMs, spread over the
 * threads as `impl` says (cpu_conv.c); DG_ERR_INVALID for a step that
 * needs scratch and has none */
dg_status dg__cpu_conv2d(const dg_step *s, const dg_cpu_blas *blas, dg_cpu_conv impl);
dg_status dg__cpu_conv2d_backward_data(const dg_step *s, const dg_cpu_blas *blas, dg_cpu_conv impl);
dg_status dg__cpu_conv2d_backward_weight(const dg_step *s, const dg_cpu_blas *blas, dg_cpu_conv impl);
/* Threads that run a convolution image by image (DG_CPU_CONV_BATCH), or 0
 * for the passes: with DG_CPU_CONV_PASSES, an sgemm that cannot run inside
 * a parallel region (!serial_ok), fewer than two threads or images, or a
 * scratch (layout.h: `chunk` images of columns, and of dyT for the
 * weight's gradient) with room for fewer than two slots (a slot: a
 * block's columns, and a partial dw for the weight's gradient). With
 * fewer images than threads each image counts as threads/n units (output
 * rows, or dx's input channels where there is one group), at most a slot
 * per unit. DEFAULT, as measured on a 16-core host (docs/PERF.md): the
 * forward and dx over the batch once half the threads or more get a unit
 * (at batch 8 on 16 threads 1.4-2x the uncut batch); the weight's
 * gradient only with a unit for every thread and a partial dw [o, R] no
 * larger than an image's columns [R, cols] (with more positions than
 * output channels: else each image's GEMM reads and writes its partial
 * for too little work, 0.24-0.6x the passes on the 4x4 and 7x7 layers). The forward and dx of
 * images under 32 columns run as the passes where these multiply them
 * side by side (cpu_conv.c: each thread would pack all the weights for a
 * GEMM of a few columns). `op`: the node's, one of the three conv ops. */
struct dg_conv_dims;
int dg__cpu_conv_slots(const struct dg_conv_dims *d, bool serial_ok, dg_cpu_conv impl, int threads, dg_op op);
/* DG_CPU_CONV_CHANNELS (cpu_conv.c): whether it runs the weight's
 * gradient: on 2 threads or more, with an sgemm that can run on every
 * thread at once, and 2 input channels or more (else the passes) */
bool dg__cpu_conv_channels_run(const struct dg_conv_dims *d, bool serial_ok, int threads);
/* whether DG_CPU_CONV_DEFAULT splits the weight's gradient by channels on
 * `threads` threads: with 144 columns of dw a thread or more (C*KH*KW /
 * threads: 16 channels of a 3x3 kernel) */
bool dg__cpu_conv_channels_pay(const struct dg_conv_dims *d, int threads);
/* DG_CPU_CONV_SHIFT (cpu_conv_shift.c): whether a convolution has both
 * strides 1, is not `direct` and pads no more than its kernel reaches
 * (dx is then a convolution of dy padded by dh*(KH-1) - ph >= 0); the
 * threads that run op (the forward or dx) shifted, 0 for the weight's
 * gradient, where it does not apply or where the scratch holds fewer than
 * two slots (as dg__cpu_conv_slots: one thread or an sgemm that cannot
 * run on every thread at once also give 0); and the two ops on that many
 * threads. */
bool dg__cpu_conv_shift_applies(const struct dg_conv_dims *d);
/* whether DG_CPU_CONV_DEFAULT runs op shifted on `threads` threads: the
 * forward and dx where the shift applies, both channel counts of a group
 * are 16 or more, the wrap columns (cpu_conv_shift.c) an eighth of the
 * grid or less and each thread's unit at least 256 columns of it */
bool dg__cpu_conv_shift_pays(const struct dg_conv_dims *d, int threads, dg_op op);
int  dg__cpu_conv_shift_slots(const struct dg_conv_dims *d, bool serial_ok, int threads, dg_op op);
dg_status dg__cpu_conv2d_shift(const dg_step *s, const struct dg_conv_dims *d, const dg_cpu_blas *blas, int slots);
dg_status dg__cpu_conv2d_backward_data_shift(const dg_step *s, const struct dg_conv_dims *d, const dg_cpu_blas *blas,
                                             int slots);
/* What a convolution step of op `op` runs as with strategy `impl` (never
 * DEFAULT's own: the rules above resolve it), an sgemm that can (serial_ok)
 * or cannot run on every thread at once, on `threads` threads: the one
 * place the kernels and dg_plan_node_impl learn it from. *slots (may be
 * NULL): the threads of the shifted or image-by-image kernels, 0 else. */
typedef enum dg_cpu_conv_run {
    DG_CPU_CONV_RUN_PASSES,   /* "cpu-im2col"       */
    DG_CPU_CONV_RUN_BATCH,    /* "cpu-im2col-batch" */
    DG_CPU_CONV_RUN_SHIFT,    /* "cpu-shift"        */
    DG_CPU_CONV_RUN_CHANNELS, /* "cpu-im2col-chan"  */
} dg_cpu_conv_run;
dg_cpu_conv_run dg__cpu_conv_strategy(const struct dg_conv_dims *d, dg_op op, dg_cpu_conv impl, bool serial_ok,
                                      int threads, int *slots);
const char     *dg__cpu_conv_run_name(dg_cpu_conv_run run);
/* DG_CPU_CONV_AUTO's rule (cpu_conv_auto.c): whether a convolution step
 * of op `op`, geometry d and input dtype t runs by oneDNN (true) or by
 * the own strategies (DEFAULT's rule), on a CPU whose oneDNN ISA has AMX
 * (`amx`: dnnl_get_effective_cpu_isa(), dg__onednn_bf16_pays) or not.
 * bf16: oneDNN with AMX, the own without; float32 and f16: the own for
 * fewer than 16 input channels a group and for a strided layer's weight
 * gradient, oneDNN else. A rule alone: the backend asks it only where
 * oneDNN is built in. */
bool dg__cpu_conv_auto_onednn(const struct dg_conv_dims *d, dg_op op, dg_dtype t, bool amx);
/* Images per pass of the passes' forward or dx: as many as fit 1 MiB of
 * columns, or, `side_by_side` and an image of fewer than 512 columns,
 * enough for 512 columns multiplied as one GEMM; never more than the
 * batch or the scratch's chunk, at least 1 */
int64_t dg__cpu_conv_pass_images(const struct dg_conv_dims *d, bool side_by_side);
/* the pool family (DG_OPS_POOL): max_pool2d writes y and its argmax side
 * output */
void dg__cpu_pool(const dg_step *s);
void dg__cpu_batch_norm(const dg_step *s);     /* y and the stats side output   */
void dg__cpu_batch_norm_backward(const dg_step *s);
void dg__cpu_batch_norm_backward_scale(const dg_step *s);
void dg__cpu_batch_norm_running(const dg_step *s); /* in place, inout[0] and [1] */

/* attention and language models */
void dg__cpu_layer_norm(const dg_step *s);     /* y and the stats side output   */
void dg__cpu_layer_norm_backward(const dg_step *s);
void dg__cpu_layer_norm_backward_scale(const dg_step *s);
dg_status dg__cpu_embedding(const dg_step *s);
dg_status dg__cpu_embedding_backward(const dg_step *s);
/* DG_OK when every v[i] (i < n) of int32 node `idx` lies in [0, bound),
 * else DG_ERR_INVALID naming the first that does not, its position, and
 * `range`: what the bound counts (node nd's step) */
dg_status dg__cpu_check_index(const dg_node *nd, const dg_node *idx, const int32_t *v, int64_t n, int64_t bound,
                              const char *range);
/* fused attention by tiles (cpu_attention.c); work: the backend's
 * workspace of dg__cpu_attention_work_floats() per OpenMP thread */
size_t dg__cpu_attention_work_floats(void);
void dg__cpu_attention(const dg_step *s, float *work);
void dg__cpu_attention_backward(const dg_step *s, float *work);

#endif
