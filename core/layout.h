/* layout.h: index arithmetic shared by the backends (and usable from CUDA).
 *
 * Every tensor is viewed as 4-D by padding its shape with leading 1s, so one
 * loop nest serves 1-D to 4-D tensors. */
#ifndef DG_LAYOUT_H
#define DG_LAYOUT_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_dims4 { int64_t d[4]; } dg_dims4;

/* The shape padded to 4-D: [3,5] -> [1,1,3,5]. */
static inline dg_dims4 dg_dims4_of(dg_shape s) {
    dg_dims4 r = {{1, 1, 1, 1}};
    for (int i = 0; i < s.ndim; i++) r.d[4 - s.ndim + i] = s.d[i];
    return r;
}

/* Element strides of `in` read as if broadcast to `out` (both 4-D padded):
 * 0 along axes where `in` has size 1 and `out` does not. */
static inline dg_dims4 dg_bcast_strides(dg_shape in, dg_shape out) {
    dg_dims4 di = dg_dims4_of(in), dout = dg_dims4_of(out), st;
    int64_t s = 1;
    for (int i = 3; i >= 0; i--) {
        st.d[i] = (di.d[i] == 1 && dout.d[i] != 1) ? 0 : s;
        s *= di.d[i];
    }
    return st;
}

/* Element strides of a permuted view: output axis i walks input axis perm[i]
 * (both padded to 4-D; the padding axes map to themselves). */
static inline dg_dims4 dg_permute_strides(dg_shape in, const int *perm) {
    dg_dims4 di = dg_dims4_of(in), contig, st = {{0, 0, 0, 0}};
    int64_t s = 1;
    for (int i = 3; i >= 0; i--) { contig.d[i] = s; s *= di.d[i]; }
    int pad = 4 - in.ndim;
    for (int i = 0; i < pad; i++) st.d[i] = contig.d[i];
    for (int i = 0; i < in.ndim; i++) st.d[pad + i] = contig.d[pad + perm[i]];
    return st;
}

#ifdef __cplusplus
}
#endif
#endif
