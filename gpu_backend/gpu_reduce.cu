/* gpu_reduce.cu: sum and mean over axes. Deterministic (no atomics): the
 * same input gives bit-identical output on every run, so a replayed CUDA
 * graph can be compared exactly with plain runs.
 *   suffix axes (row sums): a warp per row, or a block per row when rows
 *     are long;
 *   prefix axes (column sums, e.g. a bias gradient): a thread per column
 *     walking the rows, coalesced across the warp;
 *   any other mask: a thread per output element. */
#include "../core/layout.h"
#include "gpu_common.cuh"

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void k_rows_warp(const float *__restrict__ x, float *__restrict__ y, long long rows, long long w,
                            float scale) {
    long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    long long warps = (long long)gridDim.x * blockDim.x / 32;
    int lane = threadIdx.x & 31;
    for (long long r = warp; r < rows; r += warps) {
        float acc = 0.0f;
        for (long long j = lane; j < w; j += 32) acc += x[r * w + j];
        acc = warp_sum(acc);
        if (lane == 0) y[r] = acc * scale;
    }
}

__global__ void k_rows_block(const float *__restrict__ x, float *__restrict__ y, long long rows, long long w,
                             float scale) {
    __shared__ float part[32];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * w;
        float acc = 0.0f;
        long long w4 = (((uintptr_t)xr & 15) == 0) ? w / 4 : 0; /* float4 when the row is aligned */
        for (long long j = threadIdx.x; j < w4; j += blockDim.x) {
            float4 v = ((const float4 *)xr)[j];
            acc += (v.x + v.y) + (v.z + v.w);
        }
        for (long long j = 4 * w4 + threadIdx.x; j < w; j += blockDim.x) acc += xr[j];
        acc = warp_sum(acc);
        if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = acc;
        __syncthreads();
        if (threadIdx.x < 32) {
            float v = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
            v = warp_sum(v);
            if (threadIdx.x == 0) y[r] = v * scale;
        }
        __syncthreads();
    }
}

__global__ void k_cols(const float *__restrict__ x, float *__restrict__ y, long long rows, long long w, float scale) {
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < w; j += (long long)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (long long r = 0; r < rows; r++) acc += x[r * w + j];
        y[j] = acc * scale;
    }
}

struct red4 { long long st[4], os[4], rs[4]; };

__global__ void k_general(const float *__restrict__ x, float *__restrict__ y, long long n_out, long long n_red,
                          red4 p, float scale) {
    for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < n_out; o += (long long)gridDim.x * blockDim.x) {
        long long base = 0, t = o;
        for (int i = 3; i >= 0; i--) { base += (t % p.os[i]) * p.st[i]; t /= p.os[i]; }
        float acc = 0.0f;
        for (long long r = 0; r < n_red; r++) {
            long long off = 0, u = r;
            for (int i = 3; i >= 0; i--) { off += (u % p.rs[i]) * p.st[i]; u /= p.rs[i]; }
            acc += x[base + off];
        }
        y[o] = acc * scale;
    }
}

dg_status dg__gpu_reduce(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node, *in = nd->in[0];
    const float *x = (const float *)s->in[0];
    float *y = (float *)s->out;
    int pad = 4 - in->shape.ndim;
    dg_dims4 d = dg_dims4_of(in->shape);
    bool red[4] = {false, false, false, false};
    for (int i = 0; i < in->shape.ndim; i++) red[pad + i] = nd->p.axes >> i & 1u;
    long long n_out = dg_node_numel(nd), n_red = dg_node_numel(in) / n_out;
    float scale = nd->op == DG_OP_MEAN ? (float)(1.0 / (double)n_red) : 1.0f;
    bool suffix = true, prefix = true, seen_red = false, seen_keep = false;
    for (int i = 0; i < 4; i++) { /* axes of size 1 do not matter */
        if (d.d[i] == 1) continue;
        if (red[i]) { seen_red = true; if (seen_keep) prefix = false; }
        else        { seen_keep = true; if (seen_red) suffix = false; }
    }
    if (suffix && n_red >= 1024)
        k_rows_block<<<grid_for(n_out, 1), 1024, 0, c->stream>>>(x, y, n_out, n_red, scale);
    else if (suffix)
        k_rows_warp<<<grid_for(n_out * 32, 256), 256, 0, c->stream>>>(x, y, n_out, n_red, scale);
    else if (prefix)
        k_cols<<<grid_for(n_out, 256), 256, 0, c->stream>>>(x, y, n_red, n_out, scale);
    else {
        red4 p;
        long long stride = 1;
        for (int i = 3; i >= 0; i--) { p.st[i] = stride; stride *= d.d[i]; }
        for (int i = 0; i < 4; i++) { p.os[i] = red[i] ? 1 : d.d[i]; p.rs[i] = red[i] ? d.d[i] : 1; }
        k_general<<<grid_for(n_out, 256), 256, 0, c->stream>>>(x, y, n_out, n_red, p, scale);
    }
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}
