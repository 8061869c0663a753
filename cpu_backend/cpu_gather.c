/* cpu_gather.c: ops that copy their input through strides: broadcast_to
 * (stride 0 along broadcast axes) and permute (permuted strides). Writes are
 * contiguous, one output row (last axis) at a time. */
#include <stdint.h>

#include "../core/layout.h"
#include "cpu_kernels.h"

/* y[i0,i1,i2,j] = x[i0*st0 + i1*st1 + i2*st2 + j*st3] over the 4-D output o */
static void gather(const float *x, float *y, dg_dims4 o, dg_dims4 st) {
    int64_t rows = o.d[0] * o.d[1] * o.d[2], w = o.d[3];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t i2 = r % o.d[2], i1 = r / o.d[2] % o.d[1], i0 = r / (o.d[2] * o.d[1]);
        const float *px = x + i0 * st.d[0] + i1 * st.d[1] + i2 * st.d[2];
        for (int64_t j = 0; j < w; j++) y[r * w + j] = px[j * st.d[3]];
    }
}

void dg__cpu_broadcast_to(const dg_step *s) {
    const dg_node *nd = s->node;
    gather(s->in[0], s->out, dg_dims4_of(nd->shape), dg_bcast_strides(nd->in[0]->shape, nd->shape));
}

void dg__cpu_permute(const dg_step *s) {
    const dg_node *nd = s->node;
    gather(s->in[0], s->out, dg_dims4_of(nd->shape), dg_permute_strides(nd->in[0]->shape, dg_attr_permute_of(nd).perm));
}
