/* gpu_elementwise.cu: unary ops, broadcasting binary ops and their
 * backward ops (cpu_elementwise.c's counterpart). Each reads and writes
 * every byte once: grid-stride loops, float4 accesses where the element
 * count allows (the plan aligns every buffer to 256 bytes), and broadcasting
 * by stride arithmetic instead of materialised copies. bf16 and f16
 * storage: the same op functions in float32 between a widening load and a
 * round-to-nearest-even store (the *_lp kernels, templated on each
 * operand's storage type), four elements a thread (8-byte vectors of
 * 16-bit values) where the shapes allow, one at a time elsewhere. */
#include "../core/layout.h"
#include "../core/scalar_math.h"
#include "gpu_common.cuh"
#include "gpu_lowp.cuh"

#define BLOCK 256

template <int OP> __device__ __forceinline__ float unary_f(float v, float c) {
    switch (OP) {
    case DG_OP_NEG:        return -v;
    case DG_OP_ADD_SCALAR: return v + c;
    case DG_OP_MUL_SCALAR: return v * c;
    case DG_OP_POW_SCALAR: return powf(v, c);
    case DG_OP_EXP:        return expf(v);
    case DG_OP_LOG:        return logf(v);
    case DG_OP_SQRT:       return sqrtf(v);
    case DG_OP_ABS:        return fabsf(v);
    case DG_OP_RELU:       return v > 0.0f ? v : 0.0f;
    case DG_OP_LEAKY_RELU: return v > 0.0f ? v : c * v;
    case DG_OP_SIGMOID:    return dg_sigmoidf(v);
    case DG_OP_TANH:       return tanhf(v);
    case DG_OP_GELU:       return dg_geluf(v);
    case DG_OP_ERF:        return erff(v);
    /* backward ops: v = x or y of the forward op, g = dy */
    }
    return 0.0f;
}

template <int OP> __device__ __forceinline__ float backward_f(float g, float v, float c) {
    switch (OP) {
    case DG_OP_RELU_BACKWARD:       return v > 0.0f ? g : 0.0f;
    case DG_OP_LEAKY_RELU_BACKWARD: return v > 0.0f ? g : c * g;
    case DG_OP_ABS_BACKWARD:        return v > 0.0f ? g : (v < 0.0f ? -g : 0.0f);
    case DG_OP_SIGMOID_BACKWARD:    return g * v * (1.0f - v);
    case DG_OP_TANH_BACKWARD:       return g * (1.0f - v * v);
    case DG_OP_GELU_BACKWARD:       return g * dg_gelu_gradf(v);
    }
    return 0.0f;
}

template <int OP> __device__ __forceinline__ float binary_f(float a, float b) {
    switch (OP) {
    case DG_OP_ADD: return a + b;
    case DG_OP_SUB: return a - b;
    case DG_OP_MUL: return a * b;
    case DG_OP_DIV: return a / b;
    }
    return 0.0f;
}

/* y = f(x); n4 float4 groups, then the tail */
template <int OP> __global__ void k_unary(const float *__restrict__ x, float *__restrict__ y, long long n, float c) {
    long long n4 = n / 4, stride = (long long)gridDim.x * blockDim.x;
    const float4 *x4 = (const float4 *)x;
    float4 *y4 = (float4 *)y;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x4[i];
        y4[i] = make_float4(unary_f<OP>(v.x, c), unary_f<OP>(v.y, c), unary_f<OP>(v.z, c), unary_f<OP>(v.w, c));
    }
    for (long long i = 4 * n4 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = unary_f<OP>(x[i], c);
}

template <int OP>
__global__ void k_backward(const float *__restrict__ dy, const float *__restrict__ v, float *__restrict__ dx,
                           long long n, float c) {
    long long n4 = n / 4, stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 g = ((const float4 *)dy)[i], x = ((const float4 *)v)[i];
        ((float4 *)dx)[i] = make_float4(backward_f<OP>(g.x, x.x, c), backward_f<OP>(g.y, x.y, c),
                                        backward_f<OP>(g.z, x.z, c), backward_f<OP>(g.w, x.w, c));
    }
    for (long long i = 4 * n4 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        dx[i] = backward_f<OP>(dy[i], v[i], c);
}

template <int OP>
__global__ void k_binary_same(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ y,
                              long long n) {
    long long n4 = n / 4, stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 p = ((const float4 *)a)[i], q = ((const float4 *)b)[i];
        ((float4 *)y)[i] = make_float4(binary_f<OP>(p.x, q.x), binary_f<OP>(p.y, q.y), binary_f<OP>(p.z, q.z),
                                       binary_f<OP>(p.w, q.w));
    }
    for (long long i = 4 * n4 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = binary_f<OP>(a[i], b[i]);
}

template <int OP>
__global__ void k_binary_bcast(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ y,
                               long long n, dg_dims4 o, dg_dims4 sa, dg_dims4 sb) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = binary_f<OP>(a[strided(i, o, sa)], b[strided(i, o, sb)]);
}

/* Rows of the last axis: the three outer indices (and so each operand's row
 * start) are computed once per row instead of once per element, the inner
 * strides are 0 (broadcast) or 1. A block per row; for rows of >= 128. */
template <int OP>
__global__ void k_binary_rows(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ y,
                              long long rows, dg_dims4 o, dg_dims4 sa, dg_dims4 sb) {
    long long w = o.d[3];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        long long i2 = r % o.d[2], i1 = r / o.d[2] % o.d[1], i0 = r / (o.d[2] * o.d[1]);
        const float *pa = a + i0 * sa.d[0] + i1 * sa.d[1] + i2 * sa.d[2];
        const float *pb = b + i0 * sb.d[0] + i1 * sb.d[1] + i2 * sb.d[2];
        for (long long j = threadIdx.x; j < w; j += blockDim.x)
            y[r * w + j] = binary_f<OP>(pa[j * sa.d[3]], pb[j * sb.d[3]]);
    }
}

/* four elements a thread (ld4/st4: 8 bytes of 16-bit values), then the
 * tail of n % 4 one at a time */
template <int OP, typename T>
__global__ void k_unary_lp(const T *__restrict__ x, T *__restrict__ y, long long n, float c) {
    long long n4 = n / 4, stride = (long long)gridDim.x * blockDim.x;
    for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < n4; u += stride) {
        float4 v = ld4(x + 4 * u, 0);
        st4(y + 4 * u, 0, make_float4(unary_f<OP>(v.x, c), unary_f<OP>(v.y, c), unary_f<OP>(v.z, c),
                                      unary_f<OP>(v.w, c)));
    }
    for (long long i = 4 * n4 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        st(y, i, unary_f<OP>(ld(x, i), c));
}

/* dy, v (the forward's x or y) and dx all bf16 or all f16 (a 16-bit
 * node's gradient is 16-bit): four a thread, then the tail */
template <int OP, typename T>
__global__ void k_backward_lp(const T *__restrict__ dy, const T *__restrict__ v, T *__restrict__ dx, long long n,
                              float c) {
    long long n4 = n / 4, stride = (long long)gridDim.x * blockDim.x;
    for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < n4; u += stride) {
        float4 g = ld4(dy + 4 * u, 0), x = ld4(v + 4 * u, 0);
        st4(dx + 4 * u, 0, make_float4(backward_f<OP>(g.x, x.x, c), backward_f<OP>(g.y, x.y, c),
                                       backward_f<OP>(g.z, x.z, c), backward_f<OP>(g.w, x.w, c)));
    }
    for (long long i = 4 * n4 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        st(dx, i, backward_f<OP>(ld(dy, i), ld(v, i), c));
}

/* broadcasting by strides (for same shapes they are the output's own) */
template <int OP, typename TA, typename TB, typename TY>
__global__ void k_binary_lp(const TA *__restrict__ a, const TB *__restrict__ b, TY *__restrict__ y, long long n,
                            dg_dims4 o, dg_dims4 sa, dg_dims4 sb) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        st(y, i, binary_f<OP>(ld(a, strided(i, o, sa)), ld(b, strided(i, o, sb))));
}

/* The same, four elements a thread (ld4/st4: 8 bytes of 16-bit values, 16
 * of float32), for operands whose last axis is whole (stride 1: a bias row
 * or the output's own) and of a multiple of 4, so every group of four is
 * one aligned vector in each operand. SAME: all three of one shape (no
 * index arithmetic). n4 = n / 4. */
template <int OP, bool SAME, typename TA, typename TB, typename TY>
__global__ void k_binary_lp4(const TA *__restrict__ a, const TB *__restrict__ b, TY *__restrict__ y, long long n4,
                             dg_dims4 o, dg_dims4 sa, dg_dims4 sb) {
    for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < n4; u += (long long)gridDim.x * blockDim.x) {
        long long i = 4 * u;
        float4 p = ld4(a + (SAME ? i : strided(i, o, sa)), 0), q = ld4(b + (SAME ? i : strided(i, o, sb)), 0);
        st4(y + i, 0, make_float4(binary_f<OP>(p.x, q.x), binary_f<OP>(p.y, q.y), binary_f<OP>(p.z, q.z),
                                  binary_f<OP>(p.w, q.w)));
    }
}

template <int OP>
static void unary_lp(gpu_ctx *c, dg_dtype t, const void *x, void *y, long long n, float k) {
    if (t == DG_BF16)
        k_unary_lp<OP><<<grid_for((n + 3) / 4, BLOCK), BLOCK, 0, c->stream>>>((const __nv_bfloat16 *)x,
                                                                               (__nv_bfloat16 *)y, n, k);
    else
        k_unary_lp<OP><<<grid_for((n + 3) / 4, BLOCK), BLOCK, 0, c->stream>>>((const __half *)x, (__half *)y, n, k);
}

template <int OP, typename T>
static void backward_lp(gpu_ctx *c, const void *dy, const void *v, void *dx, long long n, float k) {
    k_backward_lp<OP><<<grid_for((n + 3) / 4, BLOCK), BLOCK, 0, c->stream>>>((const T *)dy, (const T *)v, (T *)dx,
                                                                              n, k);
}

/* four at a time where every operand's last axis is whole and a multiple
 * of 4 (the bias sums and same-shape sums of a 16-bit step), else one */
template <int OP, typename TA, typename TB, typename TY>
static void binary_lp_t(gpu_ctx *c, const dg_step *s, long long n, dg_dims4 o, dg_dims4 sa, dg_dims4 sb) {
    const TA *a = (const TA *)s->in[0];
    const TB *b = (const TB *)s->in[1];
    TY *y = (TY *)s->out;
    bool same = dg_shape_eq(s->node->in[0]->shape, s->node->shape) && dg_shape_eq(s->node->in[1]->shape, s->node->shape);
    if (o.d[3] % 4 == 0 && sa.d[3] == 1 && sb.d[3] == 1) {
        if (same) k_binary_lp4<OP, true><<<grid_for(n / 4, BLOCK), BLOCK, 0, c->stream>>>(a, b, y, n / 4, o, sa, sb);
        else k_binary_lp4<OP, false><<<grid_for(n / 4, BLOCK), BLOCK, 0, c->stream>>>(a, b, y, n / 4, o, sa, sb);
        return;
    }
    k_binary_lp<OP, TA, TB, TY><<<grid_for(n, BLOCK), BLOCK, 0, c->stream>>>(a, b, y, n, o, sa, sb);
}

/* the pairs graph.c defines: one bf16 or f16 dtype (its output), or f32
 * with bf16 or f16 (an f32 output) */
template <int OP>
static dg_status binary_lp(gpu_ctx *c, const dg_step *s, long long n, dg_dims4 o, dg_dims4 sa, dg_dims4 sb) {
    typedef __nv_bfloat16 bf;
    dg_dtype ta = s->node->in[0]->dtype, tb = s->node->in[1]->dtype;
    if (ta == DG_BF16 && tb == DG_BF16)      binary_lp_t<OP, bf, bf, bf>(c, s, n, o, sa, sb);
    else if (ta == DG_F16 && tb == DG_F16)   binary_lp_t<OP, __half, __half, __half>(c, s, n, o, sa, sb);
    else if (ta == DG_F32 && tb == DG_BF16)  binary_lp_t<OP, float, bf, float>(c, s, n, o, sa, sb);
    else if (ta == DG_BF16 && tb == DG_F32)  binary_lp_t<OP, bf, float, float>(c, s, n, o, sa, sb);
    else if (ta == DG_F32 && tb == DG_F16)   binary_lp_t<OP, float, __half, float>(c, s, n, o, sa, sb);
    else if (ta == DG_F16 && tb == DG_F32)   binary_lp_t<OP, __half, float, float>(c, s, n, o, sa, sb);
    else
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s of %s and %s", s->node->name, dg_dtype_name(ta),
                        dg_dtype_name(tb));
    return DG_OK;
}

#define LAUNCH(kernel, n) kernel<<<grid_for((n + 3) / 4, BLOCK), BLOCK, 0, c->stream>>>

dg_status dg__gpu_unary(gpu_ctx *c, const dg_step *s) {
    const float *x = (const float *)s->in[0];
    float *y = (float *)s->out, k = dg_attr_scalar_or0(s->node); /* 0 for ops without one */
    long long n = dg_node_numel(s->node);
    dg_dtype t = s->node->dtype; /* x's and y's */
    switch (s->node->op) {
#define U(OP)                                              \
    case OP:                                               \
        if (t == DG_F32) LAUNCH(k_unary<OP>, n)(x, y, n, k); \
        else unary_lp<OP>(c, t, s->in[0], s->out, n, k);   \
        break;
    U(DG_OP_NEG) U(DG_OP_ADD_SCALAR) U(DG_OP_MUL_SCALAR) U(DG_OP_POW_SCALAR) U(DG_OP_EXP) U(DG_OP_LOG)
    U(DG_OP_SQRT) U(DG_OP_ABS) U(DG_OP_RELU) U(DG_OP_LEAKY_RELU) U(DG_OP_SIGMOID) U(DG_OP_TANH) U(DG_OP_GELU)
    U(DG_OP_ERF)
#undef U
    case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s is not a unary op", dg_op_name(s->node->op));
    }
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_unary_backward(gpu_ctx *c, const dg_step *s) {
    const float *dy = (const float *)s->in[0], *v = (const float *)s->in[1];
    float *dx = (float *)s->out, k = dg_attr_scalar_or0(s->node); /* leaky_relu: the slope */
    long long n = dg_node_numel(s->node);
    dg_dtype t = s->node->dtype; /* dx's, and dy's and the forward value's (dg_grad makes them one) */
    if (s->node->in[0]->dtype != t || s->node->in[1]->dtype != t)
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s: dy %s, forward value %s, dx %s: one dtype", s->node->name,
                        dg_dtype_name(s->node->in[0]->dtype), dg_dtype_name(s->node->in[1]->dtype),
                        dg_dtype_name(t));
    switch (s->node->op) {
#define B(OP)                                                                \
    case OP:                                                                 \
        if (t == DG_F32) LAUNCH(k_backward<OP>, n)(dy, v, dx, n, k);         \
        else if (t == DG_BF16) backward_lp<OP, __nv_bfloat16>(c, dy, v, dx, n, k); \
        else backward_lp<OP, __half>(c, dy, v, dx, n, k);                    \
        break;
    B(DG_OP_RELU_BACKWARD) B(DG_OP_LEAKY_RELU_BACKWARD) B(DG_OP_ABS_BACKWARD) B(DG_OP_SIGMOID_BACKWARD)
    B(DG_OP_TANH_BACKWARD) B(DG_OP_GELU_BACKWARD)
#undef B
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s is not a backward op", dg_op_name(s->node->op));
    }
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_binary(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    const float *a = (const float *)s->in[0], *b = (const float *)s->in[1];
    float *y = (float *)s->out;
    long long n = dg_node_numel(nd);
    bool same = dg_shape_eq(nd->in[0]->shape, nd->shape) && dg_shape_eq(nd->in[1]->shape, nd->shape);
    dg_dims4 o = dg_dims4_of(nd->shape);
    dg_dims4 sa = dg_bcast_strides(nd->in[0]->shape, nd->shape), sb = dg_bcast_strides(nd->in[1]->shape, nd->shape);
    unsigned grid = grid_for(n, BLOCK);
    bool f32 = nd->dtype == DG_F32 && nd->in[0]->dtype == DG_F32 && nd->in[1]->dtype == DG_F32;
    switch (nd->op) {
#define BIN(OP)                                                                                      \
    case OP:                                                                                         \
        if (!f32) {                                                                                  \
            dg_status st = binary_lp<OP>(c, s, n, o, sa, sb);                                        \
            if (st != DG_OK) return st;                                                              \
        } else if (same) LAUNCH(k_binary_same<OP>, n)(a, b, y, n);                                   \
        else if (o.d[3] >= 128)                                                                      \
            k_binary_rows<OP><<<grid_for(n / o.d[3], 1), BLOCK, 0, c->stream>>>(a, b, y, n / o.d[3], o, sa, sb); \
        else k_binary_bcast<OP><<<grid, BLOCK, 0, c->stream>>>(a, b, y, n, o, sa, sb);               \
        break;
    BIN(DG_OP_ADD) BIN(DG_OP_SUB) BIN(DG_OP_MUL) BIN(DG_OP_DIV)
#undef BIN
    case DG_OPS_UNARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_OPTIM: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s is not a binary op", dg_op_name(nd->op));
    }
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}
