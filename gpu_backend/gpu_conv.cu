/* gpu_conv.cu: conv2d and its backward ops (cpu_conv.c's counterpart) as
 * im2col + cuBLAS GEMMs on the scratch layout of core/layout.h
 * (dg_conv_dims_of), `chunk` images per pass:
 *   conv2d:          col = im2col(x); y_g = w_g col_g per image
 *   backward_data:   col_g = w_g^T dy_g per image; dx = col2im(col)
 *   backward_weight: col = im2col(x), dyT = dy channels first;
 *                    dw_g (+)= dyT_g col_g^T, one GEMM per group and chunk
 * with w_g [og, cg*kh*kw] the rows of group g's output channels. A `direct`
 * convolution (1x1, stride 1, no padding) takes x or dx as its own columns.
 * Row-major GEMMs through column-major cuBLAS swap their operands, as in
 * gpu_gemm.cu. col2im gathers (each dx element sums its taps): no atomics,
 * so results are deterministic. dg__gpu_conv is the family's entry: cuDNN
 * where the step's kernels are its (gpu_cudnn.cu, bf16 and f16 natively),
 * else these kernels or the implicit ones (gpu_conv_implicit.cu), and for a
 * bf16 or f16 node the same on float32 copies of its inputs, rounded back. */
#include <limits.h>

#include "gpu_common.cuh"

#define BLOCK 256

/* col[r][j*cols + p] = the tap r = (ci, ki, kj) of output position p of
 * image n0 + j, 0 in the padding; r < rows, j < nimg, p < cols */
__global__ void k_im2col(const float *__restrict__ x, float *__restrict__ col, dg_conv_dims d, long long n0,
                         long long nimg) {
    long long ld = d.chunk * d.cols;
    GRID_STRIDE(i, d.rows * nimg * d.cols) {
        long long p = i % d.cols, t = i / d.cols;
        long long j = t % nimg, r = t / nimg;
        long long kj = r % d.kw, ki = r / d.kw % d.kh, ci = r / (d.kw * d.kh);
        long long iy = p / d.ow * d.sh - d.ph + ki * d.dh, ix = p % d.ow * d.sw - d.pw + kj * d.dw;
        bool inside = iy >= 0 && iy < d.h && ix >= 0 && ix < d.w;
        col[r * ld + j * d.cols + p] = inside ? x[(((n0 + j) * d.c + ci) * d.h + iy) * d.w + ix] : 0.0f;
    }
}

/* dx of images n0.. (nimg of them) = the sum, for each element, of the
 * column entries im2col would have copied from it; overwrites dx */
__global__ void k_col2im(const float *__restrict__ col, float *__restrict__ dx, dg_conv_dims d, long long n0,
                         long long nimg) {
    long long ld = d.chunk * d.cols, plane = d.h * d.w;
    float *dx0 = dx + n0 * d.c * plane;
    GRID_STRIDE(i, nimg * d.c * plane) {
        long long ix = i % d.w, iy = i / d.w % d.h, ci = i / plane % d.c, j = i / (plane * d.c);
        float acc = 0.0f;
        for (long long ki = 0; ki < d.kh; ki++) {
            long long oy = window_at<long long>(iy, ki, d.sh, d.ph, d.dh, d.oh);
            if (oy < 0) continue;
            for (long long kj = 0; kj < d.kw; kj++) {
                long long ox = window_at<long long>(ix, kj, d.sw, d.pw, d.dw, d.ow);
                if (ox >= 0) acc += col[((ci * d.kh + ki) * d.kw + kj) * ld + j * d.cols + oy * d.ow + ox];
            }
        }
        dx0[i] = acc;
    }
}

/* dyT[o][j*cols + p] = dy[n0 + j][o][p]: the chunk's dy with the channel
 * axis first, so backward_weight sums over images and positions in one GEMM */
__global__ void k_channels_first(const float *__restrict__ dy, float *__restrict__ dyT, dg_conv_dims d, long long n0,
                                 long long nimg) {
    long long ld = d.chunk * d.cols;
    GRID_STRIDE(i, d.o * nimg * d.cols) {
        long long p = i % d.cols, t = i / d.cols;
        long long j = t % nimg, o = t / nimg;
        dyT[o * ld + j * d.cols + p] = dy[((n0 + j) * d.o + o) * d.cols + p];
    }
}

/* One row-major GEMM C = op(A) op(B) + beta C (m x n, inner k) for every
 * (group, image) pair: its operands advance by per_group and per_image
 * elements. */
struct gemm_walk {
    bool         ta, tb;
    int          m, n, k, lda, ldb, ldc;
    const float *A, *B;
    float       *C;
    float        beta;
};
struct gemm_step { long long a, b, c; };

/* cuBLAS batches over the longer of the two axes and the host loops over
 * the other: a depthwise convolution (groups = channels) is then a few
 * calls per image, not one per channel. */
static dg_status gemm_groups_images(gpu_ctx *c, bool tf32, const gemm_walk &g, gemm_step per_group,
                                    long long groups, gemm_step per_image, long long images) {
    dg_status st = dg__gpu_cublas_math(c, tf32);
    if (st != DG_OK) return st;
    bool batch_groups = groups >= images;
    gemm_step in = batch_groups ? per_group : per_image, out = batch_groups ? per_image : per_group;
    long long batch = batch_groups ? groups : images, loops = batch_groups ? images : groups;
    cublasOperation_t opa = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const float one = 1.0f;
    for (long long i = 0; i < loops; i++) {
        const float *A = g.A + i * out.a, *B = g.B + i * out.b;
        float *C = g.C + i * out.c;
        if (batch == 1)
            DG_CUBLAS_CHECK(dg__cublas.sgemm(c->cublas, opb, opa, g.n, g.m, g.k, &one, B, g.ldb, A, g.lda, &g.beta, C,
                                        g.ldc));
        else
            DG_CUBLAS_CHECK(dg__cublas.sgemm_strided_batched(c->cublas, opb, opa, g.n, g.m, g.k, &one, B, g.ldb, in.b, A,
                                                      g.lda, in.a, &g.beta, C, g.ldc, in.c, (int)batch));
    }
    return DG_OK;
}

/* Every m, n, k and leading dimension above is at most rows (c*kh*kw), o or
 * chunk*cols; a batch is at most groups (an int attribute) or chunk (at
 * most DG_CONV_SCRATCH_BUDGET / 4). */
bool dg__gpu_conv_fits(const dg_node *n) {
    dg_conv_dims d = dg_conv_dims_of(n);
    return d.rows <= INT_MAX && d.o <= INT_MAX && d.chunk * d.cols <= INT_MAX;
}

/* guards for a step made without a plan: supports() declines what does not
 * fit, and a plan always gives a step its scratch */
static dg_status check_step(const dg_step *s) {
    const dg_node *nd = s->node;
    if (!dg__gpu_conv_fits(nd))
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: node '%s' (%s): its GEMM dimensions exceed cuBLAS's int", nd->name,
                        dg_op_name(nd->op));
    if (dg_node_scratch_bytes(nd) && !s->scratch)
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (%s): the step gives no scratch for its %zu bytes of "
                        "im2col columns (a plan made for the implicit kernels reserves none: make it with "
                        "DG_CONV_IM2COL in its options, or after dg_gpu_set_conv(be, DG_GPU_CONV_IM2COL))", nd->name, dg_op_name(nd->op),
                        dg_node_scratch_bytes(nd));
    return DG_OK;
}

/* whether the step runs on the implicit-GEMM kernels: its plan's choice
 * (or the backend's setting for DEFAULT) is them and the node fits them */
static bool implicit(const gpu_ctx *c, const dg_step *s) {
    return dg__gpu_node_conv(c, s->node, s->flags) == DG_GPU_CONV_IMPLICIT && dg__gpu_conv_implicit_fits(s->node);
}

/* (x [n,c,h,w], w [o,cg,kh,kw]) -> y [n,o,oh,ow] */
static dg_status float32_conv2d(gpu_ctx *c, const dg_step *s) {
    if (implicit(c, s)) return dg__gpu_conv2d_implicit(c, s); /* gpu_conv_implicit.cu */
    dg_status st = check_step(s);
    if (st != DG_OK) return st;
    dg_conv_dims d = dg_conv_dims_of(s->node);
    const float *x = (const float *)s->in[0], *w = (const float *)s->in[1];
    float *y = (float *)s->out, *col = (float *)s->scratch;
    bool tf32 = (s->flags & DG_STEP_TF32) != 0;
    long long k = d.cg * d.kh * d.kw, ld = d.chunk * d.cols;
    for (long long n0 = 0; n0 < d.n; n0 += d.chunk) {
        long long nimg = d.n - n0 < d.chunk ? d.n - n0 : d.chunk;
        /* y_g [og, cols] = w_g [og, k] B_g [k, cols], B_g: group g's columns */
        gemm_walk g = {false, false, (int)d.og, (int)d.cols, (int)k, (int)k, 0, (int)d.cols,
                       w, NULL, y + n0 * d.o * d.cols, 0.0f};
        gemm_step per_group = {d.og * k, 0, d.og * d.cols}, per_image = {0, 0, d.o * d.cols};
        if (d.direct) { /* x [c, h*w] of each image is its own columns */
            g.B = x + n0 * d.c * d.cols;
            g.ldb = (int)d.cols;
            per_group.b = d.cg * d.cols;
            per_image.b = d.c * d.cols;
        } else {
            k_im2col<<<grid_for(d.rows * nimg * d.cols, BLOCK), BLOCK, 0, c->stream>>>(x, col, d, n0, nimg);
            DG_CUDA_CHECK_LAUNCH();
            g.B = col;
            g.ldb = (int)ld;
            per_group.b = k * ld;
            per_image.b = d.cols;
        }
        st = gemm_groups_images(c, tf32, g, per_group, d.groups, per_image, nimg);
        if (st != DG_OK) return st;
    }
    return DG_OK;
}

/* (dy [n,o,oh,ow], w [o,cg,kh,kw]) -> dx [n,c,h,w] */
static dg_status float32_conv2d_backward_data(gpu_ctx *c, const dg_step *s) {
    if (implicit(c, s)) return dg__gpu_conv2d_backward_data_implicit(c, s); /* gpu_conv_implicit.cu */
    dg_status st = check_step(s);
    if (st != DG_OK) return st;
    dg_conv_dims d = dg_conv_dims_of(s->node);
    const float *dy = (const float *)s->in[0], *w = (const float *)s->in[1];
    float *dx = (float *)s->out, *col = (float *)s->scratch;
    bool tf32 = (s->flags & DG_STEP_TF32) != 0;
    long long k = d.cg * d.kh * d.kw, ld = d.chunk * d.cols;
    for (long long n0 = 0; n0 < d.n; n0 += d.chunk) {
        long long nimg = d.n - n0 < d.chunk ? d.n - n0 : d.chunk;
        /* C_g [k, cols] = w_g^T [k, og] dy_g [og, cols]; C: the columns, or
         * dx [c, h*w] of each image when direct */
        gemm_walk g = {true, false, (int)k, (int)d.cols, (int)d.og, (int)k, (int)d.cols, 0,
                       w, dy + n0 * d.o * d.cols, NULL, 0.0f};
        gemm_step per_group = {d.og * k, d.og * d.cols, 0}, per_image = {0, d.o * d.cols, 0};
        if (d.direct) {
            g.C = dx + n0 * d.c * d.cols;
            g.ldc = (int)d.cols;
            per_group.c = d.cg * d.cols;
            per_image.c = d.c * d.cols;
        } else {
            g.C = col;
            g.ldc = (int)ld;
            per_group.c = k * ld;
            per_image.c = d.cols;
        }
        st = gemm_groups_images(c, tf32, g, per_group, d.groups, per_image, nimg);
        if (st != DG_OK) return st;
        if (!d.direct) {
            k_col2im<<<grid_for(nimg * d.c * d.h * d.w, BLOCK), BLOCK, 0, c->stream>>>(col, dx, d, n0, nimg);
            DG_CUDA_CHECK_LAUNCH();
        }
    }
    return DG_OK;
}

/* (dy [n,o,oh,ow], x [n,c,h,w]) -> dw [o,cg,kh,kw] */
static dg_status float32_conv2d_backward_weight(gpu_ctx *c, const dg_step *s) {
    if (implicit(c, s)) return dg__gpu_conv2d_backward_weight_implicit(c, s); /* gpu_conv_implicit.cu */
    dg_status st = check_step(s);
    if (st != DG_OK) return st;
    dg_conv_dims d = dg_conv_dims_of(s->node);
    const float *dy = (const float *)s->in[0], *x = (const float *)s->in[1];
    float *dw = (float *)s->out, *col = (float *)s->scratch;
    long long k = d.cg * d.kh * d.kw, ld = d.chunk * d.cols;
    float *dyT = col + d.rows * ld;
    bool tf32 = (s->flags & DG_STEP_TF32) != 0;
    for (long long n0 = 0; n0 < d.n; n0 += d.chunk) {
        long long nimg = d.n - n0 < d.chunk ? d.n - n0 : d.chunk;
        k_im2col<<<grid_for(d.rows * nimg * d.cols, BLOCK), BLOCK, 0, c->stream>>>(x, col, d, n0, nimg);
        DG_CUDA_CHECK_LAUNCH();
        k_channels_first<<<grid_for(d.o * nimg * d.cols, BLOCK), BLOCK, 0, c->stream>>>(dy, dyT, d, n0, nimg);
        DG_CUDA_CHECK_LAUNCH();
        /* dw_g [og, k] (+)= dyT_g [og, nimg*cols] col_g^T [nimg*cols, k] */
        gemm_walk g = {false, true, (int)d.og, (int)k, (int)(nimg * d.cols), (int)ld, (int)ld, (int)k,
                       dyT, col, dw, n0 ? 1.0f : 0.0f};
        st = gemm_groups_images(c, tf32, g, gemm_step{d.og * ld, k * ld, d.og * k}, d.groups, gemm_step{0, 0, 0}, 1);
        if (st != DG_OK) return st;
    }
    return DG_OK;
}

static dg_status float32_conv(gpu_ctx *c, const dg_step *s) {
    switch (s->node->op) {
    case DG_OP_CONV2D:                 return float32_conv2d(c, s);
    case DG_OP_CONV2D_BACKWARD_DATA:   return float32_conv2d_backward_data(c, s);
    case DG_OP_CONV2D_BACKWARD_WEIGHT: return float32_conv2d_backward_weight(c, s);
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s is not a convolution", dg_op_name(s->node->op));
}

/* A bf16 or f16 convolution on the float32 kernels: both inputs widened
 * into the step's scratch, the kernels into the float32 output there
 * (their own scratch after it), then rounded into the node's output
 * (layout: dg_conv_widened_of). The sums are float32, as in cuDNN's 16-bit
 * convolutions; only the io is 16 bits wide, and no tensor core runs it. */
dg_status dg__gpu_conv(gpu_ctx *c, const dg_step *s) {
    const dg_node *n = s->node;
    int kernels = dg__gpu_node_conv(c, n, s->flags);
    if (kernels == DG_GPU_CONV_CUDNN) return dg__gpu_cudnn_conv(c, s); /* gpu_cudnn.cu */
    if (n->dtype == DG_F32) return float32_conv(c, s);
    if (!s->scratch)
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (%s of %s): the step gives no scratch for its float32 "
                        "copies (a step from dg_step_of: run it through a plan's steps)", n->name,
                        dg_op_name(n->op), dg_dtype_name(n->dtype));
    dg_conv_widened w = dg_conv_widened_of(n);
    float *f = (float *)s->scratch;
    dg_status st = dg__gpu_widen(c, n->in[0]->dtype, s->in[0], f, dg_node_numel(n->in[0]));
    if (st == DG_OK) st = dg__gpu_widen(c, n->in[1]->dtype, s->in[1], f + w.in1, dg_node_numel(n->in[1]));
    if (st != DG_OK) return st;
    dg_step wide = *s;
    wide.in[0] = f;
    wide.in[1] = f + w.in1;
    wide.out = f + w.out;
    wide.scratch = dg__gpu_conv_scratch_bytes(c, n, (dg_gpu_conv)kernels) ? f + w.inner : NULL;
    st = float32_conv(c, &wide);
    return st != DG_OK ? st : dg__gpu_narrow(c, n->dtype, f + w.out, s->out, dg_node_numel(n));
}
