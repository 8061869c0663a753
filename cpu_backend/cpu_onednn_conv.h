/* cpu_onednn_conv.h: oneDNN's convolution primitives as the CPU backend's
 * vendor convolution (DG_CPU_CONV_ONEDNN, the plan choice DG_CONV_VENDOR),
 * compiled only in a build with oneDNN (DG_ONEDNN). conv2d (forward
 * training), conv2d_backward_data and conv2d_backward_weight of NCHW
 * activations and OIHW weights (grouped: [G*O/G, C/G, KH, KW], which is
 * oneDNN's goihw in the same bytes), any stride, padding, dilation and
 * groups. Both inputs and the output of one dtype: f32; bf16 (float32
 * accumulation, oneDNN's AVX512-BF16 or AMX kernels); f16, and bf16 on a
 * CPU without a kernel for it, widened to float32 in the step's scratch,
 * run by the float32 primitive and rounded into the output. */
#ifndef DG_CPU_ONEDNN_CONV_H
#define DG_CPU_ONEDNN_CONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/backend.h"

/* One convolution as a primitive is made for: the node's op and geometry
 * (x [n,c,h,w], y [n,o,oh,ow], a kernel kh x kw; dilations as the graph
 * gives them, 1 = none), its dtype, the layout the primitive reads and
 * writes, and the OpenMP threads it is made for (cpu_onednn.c: the split
 * of the work is fixed when the primitive is created). */
typedef struct dg_onednn_conv {
    dg_op    op;       /* DG_OP_CONV2D, _BACKWARD_DATA or _BACKWARD_WEIGHT */
    dg_dtype dtype;
    bool     blocked;  /* oneDNN's own (blocked) formats, reordered from and
                        * to ours in the scratch; false: it runs on NCHW/OIHW */
    int      threads;
    int64_t  n, c, h, w, o, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, groups;
} dg_onednn_conv;

/* What a convolution's primitive needs and is: the bytes of scratch a run
 * takes (widened operands, blocked copies and oneDNN's scratchpad), whether
 * it widens 16-bit operands for the float32 primitive, and oneDNN's name of
 * the implementation ("brg:avx512_core", "jit_bf16:avx512_core_bf16",
 * "gemm:jit"). */
typedef struct dg_onednn_conv_info {
    size_t      scratch;
    bool        widened;
    const char *impl; /* lives as long as the cache */
} dg_onednn_conv_info;

/* The primitive cache of a backend: its own engine and stream, and a table
 * that grows by one entry for each convolution asked for and never drops
 * one (ResNet-18's training step asks for 32: 11 geometries, each forward
 * and for both its gradients but the stem's dx); it lives as long as the
 * backend. */
typedef struct dg_onednn_convs dg_onednn_convs;

dg_status dg__onednn_convs_new(dg_onednn_convs **out);
void      dg__onednn_convs_free(dg_onednn_convs *o);
/* Finds k's primitive or creates it (with the calling thread's OpenMP
 * thread count, which k->threads must hold), and says what it needs.
 * DG_ERR_UNSUPPORTED for a dtype other than f32, bf16, f16, or a geometry
 * oneDNN refuses; DG_ERR_OOM, DG_ERR_BACKEND. */
dg_status dg__onednn_conv_prepare(dg_onednn_convs *o, const dg_onednn_conv *k, dg_onednn_conv_info *info);
/* Runs k (prepared if not yet): a, b the node's inputs in order (conv2d:
 * x, w; backward_data: dy, w; backward_weight: dy, x), out its output;
 * scratch: info.scratch bytes, 64-byte aligned. */
dg_status dg__onednn_conv_run(dg_onednn_convs *o, const dg_onednn_conv *k, const void *a, const void *b, void *out,
                              void *scratch);
/* primitives created and convolutions run since o was made; o NULL: 0 and 0 */
void      dg__onednn_conv_counts(const dg_onednn_convs *o, long *created, long *runs);

#endif
