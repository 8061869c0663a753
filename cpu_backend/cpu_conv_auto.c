/* cpu_conv_auto.c: which convolution DG_CPU_CONV_AUTO runs a node with,
 * oneDNN's or the own strategies' (DEFAULT's rule), from the ResNet-18
 * CIFAR layers measured on a 16-core AMX host and the 2-core AVX512-BF16
 * VM (docs/PERF.md, "The CPU's default convolution per precision and
 * layer"). */
#include "../core/layout.h"
#include "cpu_kernels.h"

/* oneDNN's channel block: its blocked formats (nChw16c) pad a layer's
 * input channels up to it, so a layer of fewer (the stem's 3) pays for 16
 * in dx and dw: 2.4-8x the own's dx on both machines */
#define ONEDNN_CHANNEL_BLOCK 16

bool dg__cpu_conv_auto_onednn(const dg_conv_dims *d, dg_op op, dg_dtype t, bool amx) {
    /* bf16: oneDNN's AMX kernels ran the 3x3 layers at 2-5x the own's
     * float32 time; its AVX512-BF16 ones, at half its float32 rate, lost
     * to the own's float32 kernels on widened copies (0.6x the step's
     * convolutions, the 512ch 4x4 dw 8x) */
    if (t == DG_BF16) return amx;
    /* float32 arithmetic on both sides (f16 is widened by both) */
    if (d->cg < ONEDNN_CHANNEL_BLOCK) return false;
    /* a strided layer runs oneDNN on NCHW (cpu_backend.c, onednn_conv_of):
     * im2col and GEMM as the own, and its weight's gradient the slower
     * (the own 0.48-0.92x on the VM, 8.8 against 9.3 ms summed on the host) */
    if (op == DG_OP_CONV2D_BACKWARD_WEIGHT && (d->sh > 1 || d->sw > 1)) return false;
    return true;
}
