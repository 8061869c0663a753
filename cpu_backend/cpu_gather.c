/* cpu_gather.c: ops that copy their input through strides: broadcast_to
 * (stride 0 along broadcast axes) and permute (permuted strides). Writes are
 * contiguous, one output row (last axis) at a time, except for a permute
 * that moves the input's last axis (a transpose), which goes by tiles. A
 * permute copies elements of its dtype's size (4 bytes for f32, 2 for bf16
 * and f16: the values are moved, never converted). */
#include <stdint.h>

#include "../core/attrs.h"
#include "../core/layout.h"
#include "cpu_kernels.h"

/* The same copy when x is contiguous along output axis p < 3 instead of
 * the last one (a transpose): row by row, every element read would be in
 * a cache line of its own. So the plane of axes (p, 3) goes in TILE x TILE
 * tiles, shared out over the threads with the other two axes: a tile
 * reads TILE stretches of TILE elements of x and writes TILE of y, whole
 * cache lines each (x is contiguous along p: st.d[p] is 1). Consecutive
 * tiles step along p, so a thread streams down TILE rows of x at a time.
 * (Measured on a 4096 x 4096 float32 transpose, 2 cores: this ~12 GB/s; a
 * buffered tile, 4x4 SSE transposes, streaming stores and 256 x 256
 * blocks of tiles were no faster; 1024 x 1024: ~27 GB/s.) */
#define TILE 32

/* gather_T: y[i0,i1,i2,j] = x[i0*st0 + i1*st1 + i2*st2 + j*st3] over the
 * 4-D output o; gather_tiled_T: the tiled form above. One pair per element
 * size. */
#define DEFINE_GATHER(T)                                                                                   \
    static void gather_##T(const T *x, T *y, dg_dims4 o, dg_dims4 st) {                                    \
        int64_t rows = o.d[0] * o.d[1] * o.d[2], w = o.d[3];                                               \
        _Pragma("omp parallel for schedule(static)")                                                       \
        for (int64_t r = 0; r < rows; r++) {                                                               \
            int64_t i2 = r % o.d[2], i1 = r / o.d[2] % o.d[1], i0 = r / (o.d[2] * o.d[1]);                 \
            const T *px = x + i0 * st.d[0] + i1 * st.d[1] + i2 * st.d[2];                                  \
            for (int64_t j = 0; j < w; j++) y[r * w + j] = px[j * st.d[3]];                                \
        }                                                                                                  \
    }                                                                                                      \
    static void gather_tiled_##T(const T *x, T *y, dg_dims4 o, dg_dims4 st, int p) {                       \
        dg_dims4 os; /* y's strides */                                                                     \
        int64_t s = 1;                                                                                     \
        for (int a = 3; a >= 0; a--) { os.d[a] = s; s *= o.d[a]; }                                         \
        int q0 = p == 0 ? 1 : 0, q1 = p == 2 ? 1 : 2; /* the outer axes */                                 \
        int64_t rows = o.d[p], cols = o.d[3];                                                              \
        int64_t tr = (rows + TILE - 1) / TILE, tc = (cols + TILE - 1) / TILE;                              \
        int64_t tiles = o.d[q0] * o.d[q1] * tr * tc;                                                       \
        _Pragma("omp parallel for schedule(static)")                                                       \
        for (int64_t t = 0; t < tiles; t++) {                                                              \
            int64_t it = t % tr, jt = t / tr % tc, b = t / (tr * tc);                                      \
            int64_t b1 = b % o.d[q1], b0 = b / o.d[q1];                                                    \
            int64_t i0 = it * TILE, j0 = jt * TILE;                                                        \
            int64_t ni = rows - i0 < TILE ? rows - i0 : TILE, nj = cols - j0 < TILE ? cols - j0 : TILE;    \
            const T *xt = x + b0 * st.d[q0] + b1 * st.d[q1] + i0 + j0 * st.d[3];                           \
            T *yt = y + b0 * os.d[q0] + b1 * os.d[q1] + i0 * os.d[p] + j0;                                 \
            for (int64_t i = 0; i < ni; i++)                                                               \
                for (int64_t j = 0; j < nj; j++) yt[i * os.d[p] + j] = xt[i + j * st.d[3]];               \
        }                                                                                                  \
    }

DEFINE_GATHER(float)
DEFINE_GATHER(uint16_t)

void dg__cpu_broadcast_to(const dg_step *s) {
    const dg_node *nd = s->node;
    gather_float(s->in[0], s->out, dg_dims4_of(nd->shape), dg_bcast_strides(nd->in[0]->shape, nd->shape));
}

/* axis p < 3 along which x is contiguous, if x's last axis is not (a
 * transpose: tiled); -1 where rows of the last axis are contiguous */
static int tiled_axis(dg_dims4 o, dg_dims4 st) {
    if (st.d[3] != 1 && o.d[3] > 1)
        for (int p = 0; p < 3; p++)
            if (st.d[p] == 1 && o.d[p] > 1) return p;
    return -1;
}

void dg__cpu_permute(const dg_step *s) {
    const dg_node *nd = s->node;
    dg_dims4 o = dg_dims4_of(nd->shape);
    dg_dims4 st = dg_permute_strides(nd->in[0]->shape, dg_attr_permute_of(nd).perm);
    int p = tiled_axis(o, st);
    if (nd->dtype == DG_F32) {
        if (p >= 0) gather_tiled_float(s->in[0], s->out, o, st, p);
        else gather_float(s->in[0], s->out, o, st);
    } else { /* bf16, f16: graph.c admits no other dtype */
        if (p >= 0) gather_tiled_uint16_t(s->in[0], s->out, o, st, p);
        else gather_uint16_t(s->in[0], s->out, o, st);
    }
}
