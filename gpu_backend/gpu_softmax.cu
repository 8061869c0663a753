/* gpu_softmax.cu: row-wise softmax, log-softmax, softmax cross-entropy and
 * their backward ops (cpu_softmax.c's counterpart). A row is the last axis.
 * A warp owns a row: one pass keeps a running max and a rescaled running
 * sum (online softmax), a second pass writes. Softmax cross-entropy writes
 * one loss per row into the backend's scratch buffer, then one block sums
 * them in a fixed order: deterministic without atomics, and every row's
 * work spread over the whole GPU. It also saves each row's log-sum-exp (its
 * side output), so its backward reads it instead of reducing the row again. */
#include "gpu_common.cuh"

#define WARPS_PER_BLOCK 8

/* combine (max, sum) pairs across the warp */
__device__ __forceinline__ void warp_max_sum(float &m, float &s) {
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mx = fmaxf(m, m2);
        s = (m == -INFINITY ? 0.0f : s * __expf(m - mx)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mx));
        m = mx;
    }
}

/* log-sum-exp of a row, computed by the whole warp */
__device__ __forceinline__ float row_lse(const float *xr, long long c, int lane) {
    float m = -INFINITY, s = 0.0f;
    for (long long j = lane; j < c; j += 32) {
        float v = xr[j];
        if (v > m) { s = s * __expf(m - v) + 1.0f; m = v; }
        else s += __expf(v - m);
    }
    warp_max_sum(m, s);
    return m + logf(s);
}

#define FOR_EACH_ROW(rows)                                                                      \
    int lane = threadIdx.x & 31;                                                                \
    long long warps = (long long)gridDim.x * (blockDim.x / 32);                                 \
    for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; r < (rows); r += warps)

__global__ void k_softmax(const float *__restrict__ x, float *__restrict__ y, long long rows, long long c, bool log_out) {
    FOR_EACH_ROW(rows) {
        const float *xr = x + r * c;
        float lse = row_lse(xr, c, lane);
        for (long long j = lane; j < c; j += 32) y[r * c + j] = log_out ? xr[j] - lse : __expf(xr[j] - lse);
    }
}

__global__ void k_softmax_backward(const float *__restrict__ dy, const float *__restrict__ y, float *__restrict__ dx,
                                   long long rows, long long c, bool log_out) {
    FOR_EACH_ROW(rows) {
        const float *dyr = dy + r * c, *yr = y + r * c;
        float dot = 0.0f;
        for (long long j = lane; j < c; j += 32) dot += log_out ? dyr[j] : dyr[j] * yr[j];
        dot = warp_sum(dot);
        for (long long j = lane; j < c; j += 32)
            dx[r * c + j] = log_out ? dyr[j] - __expf(yr[j]) * dot : yr[j] * (dyr[j] - dot);
    }
}

/* x [rows, c], label [rows]: lse_out[r] = logsumexp(x_r) and
 * row_loss[r] = lse_out[r] - x_r[label_r]; a label outside [0, c) gives a
 * NaN loss (its lse is still written). A warp per row. */
__global__ void k_softmax_ce_rows(const float *__restrict__ x, const int *__restrict__ label,
                                  float *__restrict__ row_loss, float *__restrict__ lse_out, long long rows,
                                  long long c) {
    FOR_EACH_ROW(rows) {
        float lse = row_lse(x + r * c, c, lane);
        int l = label[r];
        if (lane == 0) {
            lse_out[r] = lse;
            row_loss[r] = (l >= 0 && l < c) ? lse - x[r * c + l] : NAN;
        }
    }
}

/* loss[0] = mean of v[0..n): one block, a fixed summation order */
__global__ void k_mean_fixed(const float *__restrict__ v, float *__restrict__ loss, long long n) {
    __shared__ float part[32];
    float acc = 0.0f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) acc += v[i];
    acc = warp_sum(acc);
    int lane = threadIdx.x & 31, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    if (lane == 0) part[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        float t = lane < nwarps ? part[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) loss[0] = t / (float)n;
    }
}

/* dx[r, j] = (exp(x[r, j] - lse[r]) - (j == label[r])) * dloss / rows for
 * x, dx [rows, c], label and lse [rows] (lse saved by the forward); a label
 * outside [0, c) puts NaN in dx[r, 0]. A warp per row, one pass. */
__global__ void k_softmax_ce_backward(const float *__restrict__ dloss, const float *__restrict__ x,
                                      const int *__restrict__ label, const float *__restrict__ lse_in,
                                      float *__restrict__ dx, long long rows, long long c) {
    float g = dloss[0] / (float)rows;
    FOR_EACH_ROW(rows) {
        const float *xr = x + r * c;
        float lse = lse_in[r];
        int l = label[r];
        for (long long j = lane; j < c; j += 32)
            dx[r * c + j] = (__expf(xr[j] - lse) - (j == l ? 1.0f : 0.0f)) * g;
        if (lane == 0 && (l < 0 || l >= c)) dx[r * c] = NAN;
    }
}

static long long last_dim(const dg_node *n) { return n->shape.d[n->shape.ndim - 1]; }
static unsigned row_grid(long long rows) { return grid_for(rows, WARPS_PER_BLOCK); }

dg_status dg__gpu_softmax(gpu_ctx *c, const dg_step *s) {
    long long cols = last_dim(s->node), rows = dg_node_numel(s->node) / cols;
    k_softmax<<<row_grid(rows), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(
        (const float *)s->in[0], (float *)s->out, rows, cols, s->node->op == DG_OP_LOG_SOFTMAX);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

dg_status dg__gpu_softmax_backward(gpu_ctx *c, const dg_step *s) {
    long long cols = last_dim(s->node), rows = dg_node_numel(s->node) / cols;
    k_softmax_backward<<<row_grid(rows), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(
        (const float *)s->in[0], (const float *)s->in[1], (float *)s->out, rows, cols,
        s->node->op == DG_OP_LOG_SOFTMAX_BACKWARD);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* the per-row losses go through the scratch, one float a row */
bool dg__gpu_softmax_ce_fits(const gpu_ctx *c, const dg_node *n) {
    const dg_node *logits = n->in[0];
    return dg_node_numel(logits) / last_dim(logits) <= (long long)c->scratch_floats;
}

/* (logits [rows, c], labels i32 [rows]) -> loss [1], side[0]: lse [rows] */
dg_status dg__gpu_softmax_ce(gpu_ctx *c, const dg_step *s) {
    const dg_node *logits = s->node->in[0];
    long long cols = last_dim(logits), rows = dg_node_numel(logits) / cols;
    /* guards for a step made without a plan: supports() declines such a
     * node, and a plan always gives a side output storage */
    if (!dg__gpu_softmax_ce_fits(c, s->node))
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: softmax_cross_entropy over %lld rows exceeds the %zu-row scratch",
                        rows, c->scratch_floats);
    if (!s->side[0])
        return dg__fail(DG_ERR_INVALID, "gpu: node '%s' (softmax_cross_entropy): the step gives no storage for "
                        "its side output (the row log-sum-exp)", s->node->name);
    k_softmax_ce_rows<<<row_grid(rows), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(
        (const float *)s->in[0], (const int *)s->in[1], c->scratch, (float *)s->side[0], rows, cols);
    DG_CUDA_CHECK_LAUNCH();
    k_mean_fixed<<<1, 1024, 0, c->stream>>>(c->scratch, (float *)s->out, rows);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* (dloss [1], logits [rows, c], labels i32 [rows], lse [rows]) -> dx [rows, c] */
dg_status dg__gpu_softmax_ce_backward(gpu_ctx *c, const dg_step *s) {
    long long cols = last_dim(s->node), rows = dg_node_numel(s->node) / cols;
    k_softmax_ce_backward<<<row_grid(rows), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(
        (const float *)s->in[0], (const float *)s->in[1], (const int *)s->in[2], (const float *)s->in[3],
        (float *)s->out, rows, cols);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}
