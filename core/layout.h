/* layout.h: index arithmetic and layout decisions shared by the backends
 * (usable from CUDA host code), so both read a node the same way.
 *
 * Every tensor is viewed as 4-D by padding its shape with leading 1s, so one
 * loop nest serves 1-D to 4-D tensors. */
#ifndef DG_LAYOUT_H
#define DG_LAYOUT_H

#include "attrs.h"
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

/* A matmul node as a (batched) GEMM: C[m,n] = op(A) op(B) per batch entry,
 * row-major; lda/ldb are the stored row strides, the batch strides are
 * the matrices' sizes. */
typedef struct dg_gemm_dims {
    int       batch, m, n, k, lda, ldb, ldc;
    bool      ta, tb;
    long long stride_a, stride_b, stride_c;
} dg_gemm_dims;

/* [b,]m,n from the output, k from op(A) */
static inline dg_gemm_dims dg_gemm_dims_of(const dg_node *nd) {
    const dg_node *a = nd->in[0], *b = nd->in[1];
    dg_attr_matmul at = dg_attr_matmul_of(nd);
    int r = nd->shape.ndim - 2;
    dg_gemm_dims g;
    g.batch = r ? (int)nd->shape.d[0] : 1;
    g.m = (int)nd->shape.d[r];
    g.n = (int)nd->shape.d[r + 1];
    g.ta = at.trans_a;
    g.tb = at.trans_b;
    g.k = (int)(g.ta ? a->shape.d[r] : a->shape.d[r + 1]);
    g.lda = (int)a->shape.d[r + 1];
    g.ldb = (int)b->shape.d[r + 1];
    g.ldc = g.n;
    g.stride_a = (long long)g.m * g.k;
    g.stride_b = (long long)g.k * g.n;
    g.stride_c = (long long)g.m * g.n;
    return g;
}

/* How a sum/mean node reduces its input: ROWS when the reduced axes are a
 * suffix (y[r] = sum of row r of x[n_out, n_red]), COLS when a prefix
 * (y[j] = sum over rows of x[n_red, n_out]), GENERAL otherwise. Axes of
 * size 1 do not count. For GENERAL, st are the input's element strides, os
 * the output's extents (1 on reduced axes) and rs the reduced extents (1 on
 * kept axes), all padded to 4-D. */
typedef enum dg_reduce_kind { DG_REDUCE_ROWS, DG_REDUCE_COLS, DG_REDUCE_GENERAL } dg_reduce_kind;

typedef struct dg_reduce_layout {
    dg_reduce_kind kind;
    int64_t        n_out, n_red;
    double         scale;         /* 1, or 1 / n_red for mean */
    dg_dims4       st, os, rs;
} dg_reduce_layout;

static inline dg_reduce_layout dg_reduce_layout_of(const dg_node *nd) {
    const dg_node *in = nd->in[0];
    dg_reduce_layout l;
    int pad = 4 - in->shape.ndim;
    dg_dims4 d = dg_dims4_of(in->shape);
    uint32_t axes = dg_attr_reduce_of(nd).axes;
    bool red[4] = {false, false, false, false};
    for (int i = 0; i < in->shape.ndim; i++) red[pad + i] = axes >> i & 1u;
    l.n_out = dg_node_numel(nd);
    l.n_red = dg_node_numel(in) / l.n_out;
    l.scale = nd->op == DG_OP_MEAN ? 1.0 / (double)l.n_red : 1.0;
    bool suffix = true, prefix = true, seen_red = false, seen_keep = false;
    for (int i = 0; i < 4; i++) {
        if (d.d[i] == 1) continue;
        if (red[i]) { seen_red = true; if (seen_keep) prefix = false; }
        else        { seen_keep = true; if (seen_red) suffix = false; }
    }
    l.kind = suffix ? DG_REDUCE_ROWS : prefix ? DG_REDUCE_COLS : DG_REDUCE_GENERAL;
    int64_t stride = 1;
    for (int i = 3; i >= 0; i--) { l.st.d[i] = stride; stride *= d.d[i]; }
    for (int i = 0; i < 4; i++) { l.os.d[i] = red[i] ? 1 : d.d[i]; l.rs.d[i] = red[i] ? d.d[i] : 1; }
    return l;
}

/* Working memory of one im2col pass is capped near this: a convolution
 * over a larger batch works in chunks of images (dg_conv_dims.chunk). */
#define DG_CONV_SCRATCH_BUDGET ((int64_t)128 << 20)

/* A convolution or pooling node's geometry, read the same way by both
 * backends, whichever of the op's forms the node is:
 *   conv2d (x, w) -> y, conv2d_backward_data (dy, w) -> dx,
 *   conv2d_backward_weight (dy, x) -> dw, max/avg_pool2d (x) -> y,
 *   max_pool2d_backward (dy, argmax) -> dx, avg_pool2d_backward (dy) -> dx.
 * x [n,c,h,w], y [n,o,oh,ow], w [o,cg,kh,kw] (pools: o = c, groups 1).
 *
 * The im2col scratch of the convolutions (dg_step.scratch) holds `chunk`
 * images side by side: col [rows, chunk * cols], rows = c*kh*kw ordered
 * (channel, ki, kj), cols = oh*ow ordered (oy, ox):
 *   col[(ci*kh + ki)*kw + kj][j*cols + oy*ow + ox]
 *     = x[n0 + j][ci][oy*sh - ph + ki*dh][ox*sw - pw + kj*dw]  (0 outside x)
 * Group g's rows are [g*cg*kh*kw, (g+1)*cg*kh*kw), its output channels
 * [g*og, (g+1)*og). conv2d and backward_data need col only (none when
 * `direct`: a 1x1, stride-1, unpadded convolution reads x as its own
 * columns); backward_weight needs col, then dyT [o, chunk*cols], dy of the
 * chunk with the channel axis first, so dw_g += dyT_g col_g^T is one GEMM
 * per chunk and group. */
typedef struct dg_conv_dims {
    int64_t n, c, h, w;      /* x                                     */
    int64_t o, oh, ow;       /* y                                     */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int64_t cg, og;          /* channels of a group in x and in y     */
    int64_t rows, cols;      /* c*kh*kw, oh*ow                         */
    int64_t chunk;           /* images per im2col pass, 1..n           */
    bool    direct;          /* x is its own column matrix (conv2d, backward_data) */
} dg_conv_dims;

static inline dg_conv_dims dg_conv_dims_of(const dg_node *nd) {
    dg_attr_conv a = dg_attr_conv_of(nd);
    dg_shape xs = nd->shape, ys = nd->shape, ws = nd->shape;
    switch (nd->op) {
    case DG_OP_CONV2D:                 xs = nd->in[0]->shape; ws = nd->in[1]->shape; break;
    case DG_OP_CONV2D_BACKWARD_DATA:   ys = nd->in[0]->shape; ws = nd->in[1]->shape; break;
    case DG_OP_CONV2D_BACKWARD_WEIGHT: ys = nd->in[0]->shape; xs = nd->in[1]->shape; break;
    case DG_OPS_POOL: /* a forward reads x, a backward dy */
        if (dg_op_info_get(nd->op)->role == DG_ROLE_FORWARD) xs = nd->in[0]->shape;
        else ys = nd->in[0]->shape;
        break;
    /* no window: the caller passed a node of another family */
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_UNGROUPED:
    case DG_OP_COUNT:
        break;
    }
    dg_conv_dims d;
    d.n = xs.d[0]; d.c = xs.d[1]; d.h = xs.d[2]; d.w = xs.d[3];
    d.o = ys.d[1]; d.oh = ys.d[2]; d.ow = ys.d[3];
    d.kh = a.kernel[0]; d.kw = a.kernel[1];
    d.sh = a.stride[0]; d.sw = a.stride[1];
    d.ph = a.pad[0]; d.pw = a.pad[1];
    d.dh = a.dilation[0]; d.dw = a.dilation[1];
    d.groups = a.groups > 0 ? a.groups : 1;
    bool conv = nd->op == DG_OP_CONV2D || nd->op == DG_OP_CONV2D_BACKWARD_DATA ||
                nd->op == DG_OP_CONV2D_BACKWARD_WEIGHT;
    d.cg = conv ? ws.d[1] : d.c;
    d.og = d.o / d.groups;
    d.rows = d.c * d.kh * d.kw;
    d.cols = d.oh * d.ow;
    d.direct = conv && nd->op != DG_OP_CONV2D_BACKWARD_WEIGHT && d.kh == 1 && d.kw == 1 && d.sh == 1 &&
               d.sw == 1 && d.ph == 0 && d.pw == 0;
    int64_t per_image = 4 * d.cols * (d.rows + (nd->op == DG_OP_CONV2D_BACKWARD_WEIGHT ? d.o : 0));
    d.chunk = per_image > 0 ? DG_CONV_SCRATCH_BUDGET / per_image : 1;
    if (d.chunk < 1) d.chunk = 1;
    if (d.chunk > d.n) d.chunk = d.n;
    return d;
}

/* floats of a convolution node's im2col scratch, as laid out above: 0 when
 * `direct`, else `chunk` images of columns, and of dyT for backward_weight */
static inline int64_t dg_conv_scratch_floats(const dg_conv_dims *d, bool weight) {
    return d->direct ? 0 : d->chunk * d->cols * (d->rows + (weight ? d->o : 0));
}

/* A bf16 or f16 convolution on kernels that compute in float32 (the own
 * CPU strategies, the GPU's im2col and implicit kernels): its two inputs
 * widened and its float32 result, ahead of the kernels' own scratch in the
 * step's scratch, in floats:
 *   [0, in1)      input 0 (x, or dy) widened
 *   [in1, out)    input 1 (w, or x for backward_weight) widened
 *   [out, inner)  the float32 output, rounded into the node's afterwards
 *   [inner, ...)  the float32 kernels' scratch
 * each part on a 64-byte boundary. All zero for a float32 node, and for a
 * node that is no convolution. */
typedef struct dg_conv_widened { int64_t in1, out, inner; } dg_conv_widened;

static inline int64_t dg__floats_on_64_bytes(int64_t n) { return (n + 15) / 16 * 16; }

static inline dg_conv_widened dg_conv_widened_of(const dg_node *nd) {
    dg_conv_widened w = {0, 0, 0};
    bool conv = nd->op == DG_OP_CONV2D || nd->op == DG_OP_CONV2D_BACKWARD_DATA ||
                nd->op == DG_OP_CONV2D_BACKWARD_WEIGHT;
    if (!conv || nd->dtype == DG_F32) return w;
    w.in1 = dg__floats_on_64_bytes(dg_shape_numel(nd->in[0]->shape));
    w.out = w.in1 + dg__floats_on_64_bytes(dg_shape_numel(nd->in[1]->shape));
    w.inner = w.out + dg__floats_on_64_bytes(dg_shape_numel(nd->shape));
    return w;
}

#ifdef __cplusplus
}
#endif
#endif
