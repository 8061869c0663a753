/* cpu_cast.c: DG_OP_CAST on the CPU, and the float32 copies of bf16 and
 * f16 operands that the CPU's low-precision matmul multiplies. */
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

dg_status dg__cpu_cast(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dtype from = nd->in[0]->dtype, to = nd->dtype;
    int64_t n = dg_node_numel(nd);
    const float *xf = s->in[0];
    const uint16_t *xh = s->in[0];
    float *yf = s->out;
    uint16_t *yh = s->out;
    if (from == DG_F32 && to == DG_BF16) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) yh[i] = dg__f32_to_bf16(xf[i]);
    } else if (from == DG_F32 && to == DG_F16) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) yh[i] = dg__f32_to_f16(xf[i]);
    } else if ((from == DG_BF16 || from == DG_F16) && to == DG_F32) {
        dg__cpu_widen(from, xh, yf, n);
    } else {
        return dg__fail(DG_ERR_UNSUPPORTED, "cpu: cast %s from %s to %s", nd->name, dg_dtype_name(from),
                        dg_dtype_name(to));
    }
    return DG_OK;
}
