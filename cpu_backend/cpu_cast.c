/* cpu_cast.c: DG_OP_CAST on the CPU, the float32 copies of bf16 and f16
 * operands that the CPU's low-precision matmul and convolutions multiply,
 * and the rounding of a 16-bit convolution's float32 result. */
#include <omp.h>
#include <stdint.h>

#include "../core/dtype_convert.h"
#include "../core/status_internal.h"
#include "cpu_kernels.h"

void dg__cpu_widen(dg_dtype t, const void *x, float *y, int64_t n) {
    const uint16_t *h = x;
    if (t == DG_BF16) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) y[i] = dg__bf16_to_f32(h[i]);
    } else {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) y[i] = dg__f16_to_f32(h[i]);
    }
}

void dg__cpu_narrow(dg_dtype t, const float *x, void *y, int64_t n) {
    uint16_t *h = y;
    if (t == DG_BF16) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) h[i] = dg__f32_to_bf16(x[i]);
    } else {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) h[i] = dg__f32_to_f16(x[i]);
    }
}

dg_status dg__cpu_cast(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype from = nd->in[0]->dtype, to = nd->dtype;
    int64_t n = dg_node_numel(nd);
    if (from == DG_F32 && (to == DG_BF16 || to == DG_F16)) {
        dg__cpu_narrow(to, s->in[0], s->out, n);
    } else if ((from == DG_BF16 || from == DG_F16) && to == DG_F32) {
        dg__cpu_widen(from, s->in[0], s->out, n);
    } else {
        return dg__fail(DG_ERR_UNSUPPORTED, "cpu: cast %s from %s to %s", nd->name, dg_dtype_name(from),
                        dg_dtype_name(to));
    }
    return DG_OK;
}
