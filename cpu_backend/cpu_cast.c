/* cpu_cast.c: DG_OP_CAST on the CPU, the float32 copies of bf16 and f16
 * operands that the CPU's low-precision matmul and convolutions multiply,
 * and the rounding of a 16-bit convolution's float32 result: blocks over
 * the threads, each converted by cpu_convert.h's vector code. */
#include <omp.h>
#include <stdint.h>

#include "../core/status_internal.h"
#include "cpu_convert.h"
#include "cpu_kernels.h"

/* the threads take blocks of CAST_BLOCK values (a multiple of the vector
 * paths' 16, so only the last block has a scalar tail) */
enum { CAST_BLOCK = 4096 };

void dg__cpu_widen(dg_dtype t, const void *x, float *y, int64_t n) {
    const uint16_t *h = x;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += CAST_BLOCK) dg__cvt_widen(t, h + i, y + i, n - i < CAST_BLOCK ? n - i : CAST_BLOCK);
}

void dg__cpu_narrow(dg_dtype t, const float *x, void *y, int64_t n) {
    uint16_t *h = y;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += CAST_BLOCK) dg__cvt_narrow(t, x + i, h + i, n - i < CAST_BLOCK ? n - i : CAST_BLOCK);
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
