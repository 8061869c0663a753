/* gpu_embedding.cu: the embedding lookup and its backward op
 * (cpu_embedding.c's counterpart).
 *   embedding (table [V, D], ids i32 [...]) -> [..., D]: output row p is
 *     table row ids[p], zeros for an id outside [0, V)
 *   embedding_backward (dy [..., D], ids) -> dtable [V, D]: row v is the sum
 *     of dy's rows at the positions whose id is v, added in increasing
 *     position in float, as the CPU adds them (the same bits); zeros for a
 *     row no id names; ids outside [0, V) add nothing
 * dg_plan_set refuses ids outside [0, V) on the host, naming the first
 * (gpu_softmax.cu says why there and not by a device flag); the kernels
 * still never read or write outside the table for one that arrives
 * otherwise.
 * Rows of D % 4 == 0 at 16-byte aligned addresses move as float4.
 *
 * The backward gathers instead of scattering (no float atomics). Where its
 * working lists fit the backend's scratch (and V <= SORT_MAX_V), it first
 * sorts the positions by id, stably, in the scratch:
 *   1. a block per chunk of CH positions counts the chunk's ids (shared
 *      integer atomics: exact), cnt[chunk][v];
 *   2. a thread per id turns its column of cnt into the running count
 *      before each chunk, and one block scans the ids' totals into start[v];
 *   3. a warp per chunk walks its positions in order, ranking equal ids
 *      within each 32 (__match_any_sync) after a shared running count, and
 *      writes position p to sorted[start[v] + cnt[chunk][v] + rank];
 *   4. a thread per (v, column) adds dy's values at sorted[start[v] ..
 *      start[v + 1]) in that order, many loads in flight.
 * Otherwise a block owns VB consecutive vocabulary rows and a tile of TPB
 * columns (one per thread) and scans all the ids, a chunk at a time: each
 * thread takes a contiguous run of a chunk's ids, the block numbers the
 * matches in position order (a prefix sum over the threads' counts) into a
 * shared list, and every thread adds the listed dy rows' values in its
 * column in that order. Either way each element of dtable is written once,
 * its sum formed in position order. */
#include "gpu_common.cuh"

template <typename T> __device__ __forceinline__ T zero_of();
template <> __device__ __forceinline__ float zero_of<float>() { return 0.0f; }
template <> __device__ __forceinline__ float4 zero_of<float4>() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }

/* a += b where on (a select, not a branch, keeps the sums in registers) */
__device__ __forceinline__ void add_if(float &a, float b, bool on) { a = on ? a + b : a; }
__device__ __forceinline__ void add_if(float4 &a, float4 b, bool on) {
    a.x = on ? a.x + b.x : a.x;
    a.y = on ? a.y + b.y : a.y;
    a.z = on ? a.z + b.z : a.z;
    a.w = on ? a.w + b.w : a.w;
}

/* y [n, dt] (dt values of T a row): lanes groups of L threads (a power of
 * two up to 32) a row, grid-stride over the rows */
template <typename T>
__global__ void k_embedding(const T *__restrict__ table, const int *__restrict__ ids, T *__restrict__ y, long long n,
                            long long vocab, long long dt, int L) {
    long long g = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / L;
    long long groups = (long long)gridDim.x * blockDim.x / L;
    int sub = threadIdx.x & (L - 1);
    for (long long p = g; p < n; p += groups) {
        int id = __ldg(ids + p);
        bool ok = id >= 0 && id < vocab;
        const T *src = table + (ok ? (long long)id : 0) * dt;
        T *dst = y + p * dt;
        for (long long j = sub; j < dt; j += L) dst[j] = ok ? __ldg(src + j) : zero_of<T>();
    }
}

static bool aligned16(const void *a, const void *b) { return !(((uintptr_t)a | (uintptr_t)b) & 15); }

/* ---- sorted: positions ordered by id in the scratch ---- */

#define SORT_CHUNK 1024  /* positions a block of steps 1 and 3 takes       */
#define SORT_MAX_V 12288 /* step 1 and 3's shared counters: 48 KiB          */
#define SORT_UNROLL 16   /* loads in flight of a thread of step 4          */

/* 1: cnt[ch * vocab + v] = how many of chunk ch's positions have id v */
__global__ void k_emb_count(const int *__restrict__ ids, int *__restrict__ cnt, long long n, int vocab) {
    extern __shared__ int h[];
    for (int v = threadIdx.x; v < vocab; v += blockDim.x) h[v] = 0;
    __syncthreads();
    long long p0 = (long long)blockIdx.x * SORT_CHUNK;
    for (int k = threadIdx.x; k < SORT_CHUNK && p0 + k < n; k += blockDim.x) {
        int id = __ldg(ids + p0 + k);
        if (id >= 0 && id < vocab) atomicAdd(&h[id], 1); /* integers: exact in any order */
    }
    __syncthreads();
    for (int v = threadIdx.x; v < vocab; v += blockDim.x) cnt[(long long)blockIdx.x * vocab + v] = h[v];
}

/* 2a: cnt[ch][v] -> the count of v in the chunks before ch; total[v] */
__global__ void k_emb_chunk_prefix(int *__restrict__ cnt, int *__restrict__ total, int vocab, int chunks) {
    GRID_STRIDE(v, vocab) {
        int run = 0;
#pragma unroll 4
        for (int ch = 0; ch < chunks; ch++) {
            int t = cnt[(long long)ch * vocab + v];
            cnt[(long long)ch * vocab + v] = run;
            run += t;
        }
        total[v] = run;
    }
}

/* 2b: start[v] = sum of total[v' < v], start[vocab] = the sum of all: one
 * block, each thread a run of consecutive ids */
__global__ void k_emb_starts(const int *__restrict__ total, int *__restrict__ start, int vocab) {
    __shared__ int wsum[32];
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5, per = (vocab + blockDim.x - 1) / blockDim.x;
    const int v0 = t * per < vocab ? t * per : vocab, v1 = v0 + per < vocab ? v0 + per : vocab;
    int mine = 0;
    for (int v = v0; v < v1; v++) mine += total[v];
    int incl = mine;
    for (int o = 1; o < 32; o <<= 1) {
        int other = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += other;
    }
    if (lane == 31) wsum[warp] = incl;
    __syncthreads();
    int before = incl - mine, all = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) {
        before += w < warp ? wsum[w] : 0;
        all += wsum[w];
    }
    for (int v = v0; v < v1; v++) {
        start[v] = before;
        before += total[v];
    }
    if (t == 0) start[vocab] = all;
}

/* 3: a warp per chunk places its positions: sorted[start[v] + cnt[ch][v] +
 * (earlier positions of the chunk with id v)] = p */
__global__ void k_emb_place(const int *__restrict__ ids, const int *__restrict__ cnt, const int *__restrict__ start,
                            int *__restrict__ sorted, long long n, int vocab) {
    extern __shared__ int run[];
    const int lane = threadIdx.x;
    const long long ch = blockIdx.x, p0 = ch * SORT_CHUNK;
    for (int v = lane; v < vocab; v += 32) run[v] = start[v] + cnt[ch * vocab + v];
    __syncwarp();
    for (int k = 0; k < SORT_CHUNK && p0 + k < n; k += 32) {
        long long p = p0 + k + lane;
        int id = p < n ? __ldg(ids + p) : -1;
        bool ok = id >= 0 && id < vocab;
        unsigned peers = __match_any_sync(0xffffffffu, ok ? id : -1);
        if (ok) {
            int rank = __popc(peers & ((1u << lane) - 1u));
            sorted[run[id] + rank] = (int)p;
        }
        __syncwarp();
        if (ok && lane == 31 - __clz(peers)) run[id] += __popc(peers);
        __syncwarp();
    }
}

/* 4: dtable[v][col] = sum of dy[p][col] over p = sorted[start[v] ..
 * start[v + 1]), in that order: a thread per (v, col) */
template <typename T>
__global__ void __launch_bounds__(256, 1) /* room for all the loads in flight */
    k_emb_gather(const T *__restrict__ dy, const int *__restrict__ sorted, const int *__restrict__ start,
                 T *__restrict__ dtable, long long vocab, long long dt) {
    GRID_STRIDE(e, vocab * dt) {
        long long v = e / dt, col = e - v * dt;
        int i = start[v], end = start[v + 1];
        T acc = zero_of<T>();
        for (; i + SORT_UNROLL <= end; i += SORT_UNROLL) {
            int q[SORT_UNROLL];
            T a[SORT_UNROLL];
#pragma unroll
            for (int k = 0; k < SORT_UNROLL; k++) q[k] = __ldg(sorted + i + k);
#pragma unroll
            for (int k = 0; k < SORT_UNROLL; k++) a[k] = __ldg(dy + (long long)q[k] * dt + col);
#pragma unroll
            for (int k = 0; k < SORT_UNROLL; k++) add_if(acc, a[k], true);
        }
        for (; i < end; i++) add_if(acc, __ldg(dy + (long long)__ldg(sorted + i) * dt + col), true);
        dtable[e] = acc;
    }
}

/* ints of scratch the sorted path needs, or -1 when it cannot take the node */
static long long sort_scratch_ints(long long n, long long vocab) {
    if (vocab > SORT_MAX_V || n >= (1LL << 31) - SORT_CHUNK) return -1;
    long long chunks = (n + SORT_CHUNK - 1) / SORT_CHUNK;
    return chunks * vocab + (vocab + 1) + vocab + n;
}

template <typename T>
static dg_status embedding_backward_sorted(gpu_ctx *c, const T *dy, const int *ids, T *dtable, long long n,
                                           long long vocab, long long dt) {
    int chunks = (int)((n + SORT_CHUNK - 1) / SORT_CHUNK), v = (int)vocab;
    int *cnt = (int *)c->scratch, *start = cnt + (long long)chunks * vocab, *total = start + vocab + 1,
        *sorted = total + vocab;
    size_t smem = (size_t)vocab * sizeof(int);
    k_emb_count<<<chunks, 256, smem, c->stream>>>(ids, cnt, n, v);
    DG_CUDA_CHECK_LAUNCH();
    k_emb_chunk_prefix<<<grid_for(vocab, 128), 128, 0, c->stream>>>(cnt, total, v, chunks);
    DG_CUDA_CHECK_LAUNCH();
    k_emb_starts<<<1, 1024, 0, c->stream>>>(total, start, v);
    DG_CUDA_CHECK_LAUNCH();
    k_emb_place<<<chunks, 32, smem, c->stream>>>(ids, cnt, start, sorted, n, v);
    DG_CUDA_CHECK_LAUNCH();
    k_emb_gather<T><<<grid_for(vocab * dt, 256), 256, 0, c->stream>>>(dy, sorted, start, dtable, vocab, dt);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* ---- scanned: a block per (rows, columns) scans every id ---- */

#define SCAN_CHUNK 1024 /* ids a block scans at a time */

/* The block's tasks: (group of VB vocabulary rows, tile of TPB columns),
 * grid-stride. For each chunk of ids: thread t counts the matches of its
 * run ids[p0 + t*IPT, p0 + (t+1)*IPT) (IPT = SCAN_CHUNK / TPB), an
 * exclusive prefix sum over the threads gives where its matches go in pos
 * (offset in the chunk << 3 | row in the group), then each thread adds dy's
 * value at every listed position in its column, in list order = position
 * order, four loads in flight. */
template <typename T, int TPB, int VB>
__global__ void __launch_bounds__(TPB)
    k_embedding_backward(const T *__restrict__ dy, const int *__restrict__ ids, T *__restrict__ dtable, long long n,
                         long long vocab, long long dt, long long tiles, bool ids16) {
    constexpr int IPT = SCAN_CHUNK / TPB, WARPS = TPB / 32;
    __shared__ int pos[SCAN_CHUNK];
    __shared__ int wtot[WARPS];
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const long long groups = (vocab + VB - 1) / VB;
    for (long long task = blockIdx.x; task < groups * tiles; task += gridDim.x) {
        const long long v0 = task / tiles * VB, col = task % tiles * TPB + t;
        T acc[VB];
#pragma unroll
        for (int u = 0; u < VB; u++) acc[u] = zero_of<T>();
        for (long long p0 = 0; p0 < n; p0 += SCAN_CHUNK) {
            int mine[IPT];
            long long q0 = p0 + (long long)t * IPT;
            if (ids16 && q0 + IPT <= n) {
#pragma unroll
                for (int k = 0; k < IPT; k += 4) {
                    int4 w = __ldg((const int4 *)(ids + q0 + k));
                    mine[k] = w.x;
                    mine[k + 1] = w.y;
                    mine[k + 2] = w.z;
                    mine[k + 3] = w.w;
                }
            } else {
#pragma unroll
                for (int k = 0; k < IPT; k++) mine[k] = q0 + k < n ? __ldg(ids + q0 + k) : -1;
            }
            int cnt = 0;
#pragma unroll
            for (int k = 0; k < IPT; k++) {
                long long u = (long long)mine[k] - v0;
                mine[k] = (mine[k] >= 0 && u >= 0 && u < VB && v0 + u < vocab) ? (int)u : -1;
                cnt += mine[k] >= 0;
            }
            /* exclusive prefix of cnt over the block's threads */
            int incl = cnt;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                int other = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) incl += other;
            }
            if (lane == 31) wtot[warp] = incl;
            __syncthreads();
            int at = incl - cnt, total = 0;
#pragma unroll
            for (int w = 0; w < WARPS; w++) {
                int c = wtot[w];
                at += w < warp ? c : 0;
                total += c;
            }
            if (cnt) {
#pragma unroll
                for (int k = 0; k < IPT; k++)
                    if (mine[k] >= 0) pos[at++] = (t * IPT + k) << 3 | mine[k];
            }
            __syncthreads();
            if (col < dt) {
                for (int m = 0; m < total; m += 4) {
                    int e[4];
                    T a[4];
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        e[k] = m + k < total ? pos[m + k] : -1;
                        a[k] = e[k] >= 0 ? __ldg(dy + (p0 + (e[k] >> 3)) * dt + col) : zero_of<T>();
                    }
#pragma unroll
                    for (int k = 0; k < 4; k++)
#pragma unroll
                        for (int u = 0; u < VB; u++) add_if(acc[u], a[k], e[k] >= 0 && (e[k] & 7) == u);
                }
            }
            __syncthreads(); /* pos and wtot are rewritten by the next chunk */
        }
        if (col < dt) {
#pragma unroll
            for (int u = 0; u < VB; u++)
                if (v0 + u < vocab) dtable[(v0 + u) * dt + col] = acc[u];
        }
    }
}

template <typename T>
static dg_status embedding_backward_scanned(gpu_ctx *c, const T *dy, const int *ids, T *dtable, long long n,
                                            long long vocab, long long dt) {
    /* wide tiles and 8 rows a scan while that leaves blocks for every SM
     * twice over; else one row a block, tiles narrowed to 32 columns */
    long long want = 2LL * c->prop.multiProcessorCount;
    int tpb = dt > 64 ? 128 : 32, vb = 8;
    long long tiles = (dt + tpb - 1) / tpb;
    if ((vocab + 7) / 8 * tiles < want) {
        vb = 1;
        if (vocab * tiles < want) {
            tpb = 32;
            tiles = (dt + 31) / 32;
        }
    }
    long long tasks = (vocab + vb - 1) / vb * tiles;
    unsigned grid = (unsigned)(tasks < 65535LL * 16 ? tasks : 65535LL * 16);
    bool ids16 = !((uintptr_t)ids & 15);
    if (tpb == 128 && vb == 8)
        k_embedding_backward<T, 128, 8><<<grid, 128, 0, c->stream>>>(dy, ids, dtable, n, vocab, dt, tiles, ids16);
    else if (tpb == 128)
        k_embedding_backward<T, 128, 1><<<grid, 128, 0, c->stream>>>(dy, ids, dtable, n, vocab, dt, tiles, ids16);
    else if (vb == 8)
        k_embedding_backward<T, 32, 8><<<grid, 32, 0, c->stream>>>(dy, ids, dtable, n, vocab, dt, tiles, ids16);
    else
        k_embedding_backward<T, 32, 1><<<grid, 32, 0, c->stream>>>(dy, ids, dtable, n, vocab, dt, tiles, ids16);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

template <typename T>
static dg_status embedding_backward(gpu_ctx *c, const T *dy, const int *ids, T *dtable, long long n, long long vocab,
                                    long long dt) {
    long long need = sort_scratch_ints(n, vocab);
    if (need >= 0 && c->scratch && need <= (long long)c->scratch_floats)
        return embedding_backward_sorted(c, dy, ids, dtable, n, vocab, dt);
    return embedding_backward_scanned(c, dy, ids, dtable, n, vocab, dt);
}

/* (table [V, D], ids) -> y [..., D] */
dg_status dg__gpu_embedding(gpu_ctx *c, const dg_step *s) {
    const dg_node *table = s->node->in[0];
    long long vocab = table->shape.d[0], d = table->shape.d[1], n = dg_node_numel(s->node->in[1]);
    const float *tb = (const float *)s->in[0];
    const int *ids = (const int *)s->in[1];
    float *y = (float *)s->out;
    bool vec = d % 4 == 0 && aligned16(tb, y);
    long long dt = vec ? d / 4 : d;
    int L = 1;
    while (L < 32 && L < dt) L *= 2;
    unsigned grid = grid_for(n * L, 256);
    if (vec) k_embedding<float4><<<grid, 256, 0, c->stream>>>((const float4 *)tb, ids, (float4 *)y, n, vocab, dt, L);
    else k_embedding<float><<<grid, 256, 0, c->stream>>>(tb, ids, y, n, vocab, dt, L);
    DG_CUDA_CHECK_LAUNCH();
    return DG_OK;
}

/* (dy [..., D], ids) -> dtable [V, D] */
dg_status dg__gpu_embedding_backward(gpu_ctx *c, const dg_step *s) {
    const dg_node *nd = s->node;
    long long vocab = nd->shape.d[0], d = nd->shape.d[1], n = dg_node_numel(nd->in[1]);
    const float *dy = (const float *)s->in[0];
    const int *ids = (const int *)s->in[1];
    float *dt = (float *)s->out;
    if (d % 4 == 0 && aligned16(dy, dt))
        return embedding_backward<float4>(c, (const float4 *)dy, ids, (float4 *)dt, n, vocab, d / 4);
    return embedding_backward<float>(c, dy, ids, dt, n, vocab, d);
}
