/* gpu_collective.cu: data parallelism's all_reduce over NCCL, and the
 * groups of backends it runs in (dg_backend_group).
 *
 * NCCL is loaded when a group is first made (dlopen of libnccl.so.2), not
 * linked: the library is 200+ MB, most runs never need it, and a machine
 * without it keeps every other part of the backend. Only nccl.h is needed
 * at build time (the CUDA toolkit ships it; DG_HAVE_NCCL).
 *
 * Each all_reduce runs on the backend's second stream, the comm stream,
 * so that the backward of earlier layers (on the compute stream) runs
 * while the gradient travels: the compute stream's state is forked to the
 * comm stream by an event before the NCCL call, and an event recorded
 * after it is what later work waits on. A later step waits only when it
 * touches the all-reduce's memory: it reads the output, or writes the
 * input or the output (the plan may hand a dead gradient's arena bytes to
 * a later node while NCCL still reads them). Before a download, a sync or
 * the end of a plan run (and of a CUDA-graph capture, which must join
 * every stream it forked) the compute stream waits for all of them.
 *
 * Buckets (core/comm_bucket.h, the CPU's rule too): an all-reduce is not
 * issued at once but queued; the queue is issued as one bucket when the
 * next would take it past the backend's all_reduce_bucket_bytes
 * (dg_gpu_opts), when a step touches a queued tensor's memory, or at a
 * join. A bucket of several tensors is packed by
 * one kernel into the group's bucket buffer, averaged by one NCCL call and
 * unpacked by one kernel, all on the comm stream: many small gradients (a
 * transformer's biases and norms) then pay NCCL's per-call latency once.
 * A tensor of the bucket size or more goes alone, unpacked. Every replica
 * runs the same steps on the same arena layout, so every one cuts the same
 * buckets and NCCL sees the same calls in the same order. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.cuh"
#include "../core/comm_bucket.h"

#ifdef DG_HAVE_NCCL
#include <nccl.h>

/* the NCCL entry points, resolved from the loaded library */
typedef struct nccl_api {
    ncclResult_t (*comm_init_all)(ncclComm_t *, int, const int *);
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                               cudaStream_t);
    const char *(*error_string)(ncclResult_t);
    ncclResult_t (*get_version)(int *);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
} nccl_api;

static nccl_api nccl;
static bool     nccl_loaded;

static dg_status load_nccl(void) {
    if (nccl_loaded) return DG_OK;
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: NCCL cannot be loaded (%s): several GPUs need libnccl.so.2 on "
                        "the library path", err ? err : "libnccl.so.2");
    }
    nccl.comm_init_all = (ncclResult_t(*)(ncclComm_t *, int, const int *))dlsym(lib, "ncclCommInitAll");
    nccl.get_unique_id = (ncclResult_t(*)(ncclUniqueId *))dlsym(lib, "ncclGetUniqueId");
    nccl.comm_init_rank = (ncclResult_t(*)(ncclComm_t *, int, ncclUniqueId, int))dlsym(lib, "ncclCommInitRank");
    nccl.comm_destroy = (ncclResult_t(*)(ncclComm_t))dlsym(lib, "ncclCommDestroy");
    nccl.all_reduce = (ncclResult_t(*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                       cudaStream_t))dlsym(lib, "ncclAllReduce");
    nccl.error_string = (const char *(*)(ncclResult_t))dlsym(lib, "ncclGetErrorString");
    nccl.get_version = (ncclResult_t(*)(int *))dlsym(lib, "ncclGetVersion");
    nccl.group_start = (ncclResult_t(*)(void))dlsym(lib, "ncclGroupStart");
    nccl.group_end = (ncclResult_t(*)(void))dlsym(lib, "ncclGroupEnd");
    if (!nccl.comm_init_all || !nccl.get_unique_id || !nccl.comm_init_rank || !nccl.comm_destroy || !nccl.all_reduce || !nccl.error_string || !nccl.get_version ||
        !nccl.group_start || !nccl.group_end) {
        dlclose(lib);
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: libnccl.so.2 lacks an entry point duograd calls");
    }
    int v = 0;
    if (nccl.get_version(&v) != ncclSuccess || v < 21000) { /* ncclAvg: NCCL 2.10 */
        dlclose(lib);
        return dg__fail(DG_ERR_UNSUPPORTED, "gpu: libnccl.so.2 is version %d; the all-reduce's average needs 2.10 "
                        "or later", v);
    }
    nccl_loaded = true; /* kept loaded for the process: communicators may outlive any one group */
    return DG_OK;
}

#define DG_NCCL_CHECK(expr)                                                                            \
    do {                                                                                               \
        ncclResult_t r_ = (expr);                                                                      \
        if (r_ != ncclSuccess)                                                                         \
            return dg__fail(DG_ERR_BACKEND, "gpu: %s failed: %s at %s:%d", #expr, nccl.error_string(r_), \
                            __FILE__, __LINE__);                                                       \
    } while (0)
#endif /* DG_HAVE_NCCL */

/* an all-reduce in flight on the comm stream: its memory, and the event
 * recorded after it */
typedef struct in_flight {
    const char *in, *out;
    size_t      bytes;
    cudaEvent_t done;
} in_flight;

struct gpu_comm {
#ifdef DG_HAVE_NCCL
    ncclComm_t nccl;
#endif
    int          ranks, rank;
    cudaStream_t stream;
    cudaEvent_t  fork;      /* the compute stream's state, handed to the comm stream */
    in_flight   *flight;    /* [n_flight] in flight; events [0, n_events) made */
    int          n_flight, n_events, cap;
    float       *bucket;        /* device [queue.cap / 4]: a bucket's tensors packed */
    dg_bucket    queue;         /* the all-reduces queued for the next bucket */
};

/* dst[j][0, count[j]) = src[j][0, count[j]) for j < n: blockIdx.y picks the
 * tensor, the x blocks stride over it */
typedef struct copy_list {
    const float *src[DG_BUCKET_MAX_MEMBERS];
    float       *dst[DG_BUCKET_MAX_MEMBERS];
    long long    count[DG_BUCKET_MAX_MEMBERS];
} copy_list;

__global__ void k_copy_list(copy_list l) {
    int j = blockIdx.y;
    const float *src = l.src[j];
    float *dst = l.dst[j];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < l.count[j];
         i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

#ifdef DG_HAVE_NCCL
static dg_status copy_list_launch(const copy_list *l, int n, size_t most, cudaStream_t stream) {
    size_t blocks = (most + 1023) / 1024; /* 256 threads, about 4 floats each */
    dim3 grid((unsigned)(blocks < 1 ? 1 : blocks > 256 ? 256 : blocks), (unsigned)n);
    k_copy_list<<<grid, 256, 0, stream>>>(*l);
    DG_CUDA_CHECK(cudaGetLastError());
    return DG_OK;
}
#endif

int dg_gpu_group_size(const dg_backend *be) { return gpu_of(be)->comm ? gpu_of(be)->comm->ranks : 1; }

/* the compute stream waits for in-flight all-reduce k, which is then done */
static dg_status join_one(gpu_ctx *c, int k) {
    gpu_comm *m = c->comm;
    DG_CUDA_CHECK(cudaStreamWaitEvent(c->stream, m->flight[k].done, 0));
    in_flight t = m->flight[k]; /* keep its event for reuse at the end of the made ones */
    m->flight[k] = m->flight[--m->n_flight];
    m->flight[m->n_flight] = t;
    return DG_OK;
}

static dg_status flush(gpu_ctx *c);

dg_status dg__gpu_comm_before(gpu_ctx *c, const dg_step *s) {
    gpu_comm *m = c->comm;
    if (!m) return DG_OK;
    if (dg__bucket_raced(&m->queue, s)) { /* a queued tensor it touches: the bucket goes now */
        dg_status st = flush(c);
        if (st != DG_OK) return st;
    }
    for (int k = m->n_flight - 1; k >= 0; k--)
        if (dg__step_races(s, m->flight[k].in, m->flight[k].out, m->flight[k].bytes)) {
            dg_status st = join_one(c, k);
            if (st != DG_OK) return st;
        }
    return DG_OK;
}

dg_status dg__gpu_comm_join(gpu_ctx *c) {
    dg_status st = c->comm ? flush(c) : DG_OK;
    if (st != DG_OK) return st;
    while (c->comm && c->comm->n_flight) {
        dg_status st = join_one(c, c->comm->n_flight - 1);
        if (st != DG_OK) return st;
    }
    return DG_OK;
}

/* room for one more in flight, its event made; host memory and events
 * grow only while the first run finds more all-reduces than before */
static dg_status reserve(gpu_comm *m) {
    if (m->n_flight == m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        in_flight *f = (in_flight *)realloc(m->flight, (size_t)cap * sizeof *f);
        if (!f) return dg__fail(DG_ERR_OOM, "gpu: out of host memory for the all-reduces in flight");
        m->flight = f;
        m->cap = cap;
    }
    if (m->n_flight == m->n_events) {
        DG_CUDA_CHECK(cudaEventCreateWithFlags(&m->flight[m->n_events].done, cudaEventDisableTiming));
        m->n_events++;
    }
    return DG_OK;
}

/* The queued all-reduces, issued on the comm stream once the compute
 * stream's work so far is done: one alone in place, several packed into
 * the bucket buffer, averaged there by one call and unpacked. Each becomes
 * an all-reduce in flight, its event recorded after the unpacking. */
static dg_status flush(gpu_ctx *c) {
    gpu_comm *m = c->comm;
    int n = m->queue.n;
    if (!n) return DG_OK;
    dg__bucket_clear(&m->queue); /* its items stay readable below */
#ifdef DG_HAVE_NCCL
    DG_CUDA_CHECK(cudaEventRecord(m->fork, c->stream));
    DG_CUDA_CHECK(cudaStreamWaitEvent(m->stream, m->fork, 0));
    if (n == 1) {
        const dg_bucket_item *q = &m->queue.item[0];
        DG_NCCL_CHECK(nccl.all_reduce(q->in, q->out, q->count, ncclFloat, ncclAvg, m->nccl, m->stream));
    } else {
        copy_list pack, unpack;
        size_t at = 0, most = 0;
        for (int k = 0; k < n; k++) {
            const dg_bucket_item *q = &m->queue.item[k];
            pack.src[k] = q->in;
            pack.dst[k] = m->bucket + at;
            unpack.src[k] = m->bucket + at;
            unpack.dst[k] = q->out;
            pack.count[k] = unpack.count[k] = (long long)q->count;
            at += q->count;
            if (q->count > most) most = q->count;
        }
        dg_status st = copy_list_launch(&pack, n, most, m->stream);
        if (st != DG_OK) return st;
        DG_NCCL_CHECK(nccl.all_reduce(m->bucket, m->bucket, at, ncclFloat, ncclAvg, m->nccl, m->stream));
        if ((st = copy_list_launch(&unpack, n, most, m->stream)) != DG_OK) return st;
    }
    for (int k = 0; k < n; k++) {
        dg_status st = reserve(m);
        if (st != DG_OK) return st;
        in_flight *f = &m->flight[m->n_flight];
        DG_CUDA_CHECK(cudaEventRecord(f->done, m->stream));
        f->in = (const char *)m->queue.item[k].in;
        f->out = (const char *)m->queue.item[k].out;
        f->bytes = m->queue.item[k].count * sizeof(float);
        m->n_flight++;
    }
    return DG_OK;
#else
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: a group without NCCL"); /* dg_backend_group refused it */
#endif
}

dg_status dg__gpu_all_reduce(gpu_ctx *c, const dg_step *s) {
    size_t bytes = dg_node_bytes(s->node);
    gpu_comm *m = c->comm;
    if (!m) { /* one replica: the mean is the tensor itself */
        if (s->out != s->in[0])
            DG_CUDA_CHECK(cudaMemcpyAsync(s->out, s->in[0], bytes, cudaMemcpyDeviceToDevice, c->stream));
        return DG_OK;
    }
    dg_status st = DG_OK;
    if (dg__bucket_full_for(&m->queue, bytes)) st = flush(c); /* this one would not fit: the bucket so far goes first */
    if (st != DG_OK) return st;
    bool full = dg__bucket_add(&m->queue, (const float *)s->in[0], (float *)s->out, (size_t)dg_node_numel(s->node));
    return full ? flush(c) : DG_OK; /* full, or one of the bucket's size alone */
}

void dg__gpu_comm_free(gpu_ctx *c) {
    gpu_comm *m = c->comm;
    if (!m) return;
    if (m->stream) DG_CUDA_NOTE(cudaStreamSynchronize(m->stream));
#ifdef DG_HAVE_NCCL
    if (m->nccl) {
        ncclResult_t r = nccl.comm_destroy(m->nccl);
        if (r != ncclSuccess) dg__fail(DG_ERR_BACKEND, "gpu: ncclCommDestroy failed: %s", nccl.error_string(r));
    }
#endif
    for (int i = 0; i < m->n_events; i++) DG_CUDA_NOTE(cudaEventDestroy(m->flight[i].done));
    if (m->bucket) DG_CUDA_NOTE(cudaFree(m->bucket));
    if (m->fork) DG_CUDA_NOTE(cudaEventDestroy(m->fork));
    if (m->stream) DG_CUDA_NOTE(cudaStreamDestroy(m->stream));
    free(m->flight);
    free(m);
    c->comm = NULL;
}

#ifdef DG_HAVE_NCCL
/* backend i's comm: its stream and fork event on its device, NCCL's
 * communicator of rank i */
static dg_status comm_new(gpu_ctx *c, int rank, int ranks, ncclComm_t nc) {
    gpu_comm *m = (gpu_comm *)calloc(1, sizeof *m);
    if (!m) return dg__fail(DG_ERR_OOM, "gpu: out of host memory for a group");
    m->nccl = nc;
    m->rank = rank;
    m->ranks = ranks;
    c->comm = m;
    long long want = c->opts.all_reduce_bucket_bytes;
    m->queue.cap = want < 0 ? 0 : want == 0 ? (size_t)DG_GPU_BUCKET_BYTES_DEFAULT : (size_t)want;
    DG_GPU_USE_DEVICE(c);
    DG_CUDA_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    DG_CUDA_CHECK(cudaEventCreateWithFlags(&m->fork, cudaEventDisableTiming));
    if (m->queue.cap) DG_CUDA_CHECK(cudaMalloc((void **)&m->bucket, m->queue.cap));
    return DG_OK;
}
#endif

#ifdef DG_HAVE_NCCL
/* before a communicator is made: NVLink SHARP (multicast) stays off unless
 * the environment says otherwise (multicast objects can take shared GPUs
 * out of service); connections are made at init, not at the first
 * collective, which may be inside a CUDA-graph capture where NCCL cannot
 * set them up */
static void nccl_settings(void) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
}

/* One all-reduce of a float over the new group, outside any capture: an
 * NCCL that still connects at its first collective does it here. */
static dg_status warm_up(dg_backend *const *bes, int n) {
    float *one[DG_GPU_MAX_GROUP] = {0};
    dg_status st = DG_OK;
    for (int i = 0; i < n && st == DG_OK; i++) {
        gpu_ctx *c = gpu_of(bes[i]);
        cudaError_t e = cudaSetDevice(c->device);
        if (e == cudaSuccess) e = cudaMalloc((void **)&one[i], sizeof(float));
        if (e == cudaSuccess) e = cudaMemsetAsync(one[i], 0, sizeof(float), c->comm->stream);
        if (e != cudaSuccess) st = dg__cuda_fail(e, "the group's warm-up buffer", __FILE__, __LINE__);
    }
    if (st == DG_OK) st = dg_gpu_all_reduce_raw(bes, n, one, 1);
    for (int i = 0; i < n; i++)
        if (one[i]) {
            DG_CUDA_NOTE(cudaSetDevice(gpu_of(bes[i])->device));
            DG_CUDA_NOTE(cudaFree(one[i]));
        }
    return st;
}
#endif

dg_status dg__gpu_group(dg_backend *const *bes, int n) {
    if (n > DG_GPU_MAX_GROUP)
        return dg__fail(DG_ERR_INVALID, "dg_backend_group: %d backends, at most %d", n, DG_GPU_MAX_GROUP);
    int devices[DG_GPU_MAX_GROUP];
    bool same = true; /* already this group, in this order: nothing to do */
    for (int i = 0; i < n; i++) {
        const gpu_comm *m = gpu_of(bes[i])->comm;
        same = same && m && m->ranks == n && m->rank == i;
    }
    if (same) return DG_OK;
    for (int i = 0; i < n; i++) {
        gpu_ctx *c = gpu_of(bes[i]);
        if (c->comm)
            return dg__fail(DG_ERR_INVALID, "dg_backend_group: backend %d (device %d) is already in another group", i,
                            c->device);
        devices[i] = c->device;
        for (int j = 0; j < i; j++)
            if (devices[j] == devices[i])
                return dg__fail(DG_ERR_INVALID, "dg_backend_group: backends %d and %d are both on device %d: one "
                                "backend per device", j, i, devices[i]);
    }
#ifdef DG_HAVE_NCCL
    dg_status st = load_nccl();
    if (st != DG_OK) return st;
    nccl_settings();
    ncclComm_t comms[DG_GPU_MAX_GROUP] = {0};
    DG_NCCL_CHECK(nccl.comm_init_all(comms, n, devices));
    for (int i = 0; i < n && st == DG_OK; i++) st = comm_new(gpu_of(bes[i]), i, n, comms[i]);
    if (st == DG_OK) st = warm_up(bes, n);
    if (st != DG_OK) {
        for (int i = 0; i < n; i++) {
            if (gpu_of(bes[i])->comm) dg__gpu_comm_free(gpu_of(bes[i])); /* destroys its communicator */
            else if (comms[i]) nccl.comm_destroy(comms[i]);
        }
    }
    return st;
#else
    (void)bes;
    return dg__fail(DG_ERR_UNSUPPORTED, "dg_backend_group: this build has no NCCL (nccl.h was not found at build "
                    "time): one GPU only");
#endif
}

dg_status dg_gpu_all_reduce_raw(dg_backend *const *bes, int n, float *const *bufs, size_t count) {
    for (int i = 0; i < n; i++)
        if (!bes || !bes[i] || !gpu_of(bes[i])->comm || gpu_of(bes[i])->comm->ranks != n ||
            gpu_of(bes[i])->comm->rank != i)
            return dg__fail(DG_ERR_INVALID, "dg_gpu_all_reduce_raw: the backends are not one group of %d in order", n);
#ifdef DG_HAVE_NCCL
    DG_NCCL_CHECK(nccl.group_start());
    dg_status st = DG_OK;
    for (int i = 0; i < n && st == DG_OK; i++) {
        gpu_ctx *c = gpu_of(bes[i]);
        cudaError_t e = cudaSetDevice(c->device);
        ncclResult_t r = e == cudaSuccess ? nccl.all_reduce(bufs[i], bufs[i], count, ncclFloat, ncclAvg,
                                                            c->comm->nccl, c->comm->stream)
                                          : ncclSuccess;
        if (e != cudaSuccess) st = dg__cuda_fail(e, "cudaSetDevice", __FILE__, __LINE__);
        else if (r != ncclSuccess) st = dg__fail(DG_ERR_BACKEND, "gpu: ncclAllReduce failed: %s", nccl.error_string(r));
    }
    DG_NCCL_CHECK(nccl.group_end()); /* closes the group whatever happened inside it */
    for (int i = 0; i < n && st == DG_OK; i++) {
        gpu_ctx *c = gpu_of(bes[i]);
        DG_GPU_USE_DEVICE(c);
        DG_CUDA_CHECK(cudaStreamSynchronize(c->comm->stream));
    }
    return st;
#else
    (void)bufs;
    (void)count;
    return DG_ERR_UNSUPPORTED; /* no group can exist */
#endif
}

dg_status dg_gpu_ranks_id(unsigned char *id) {
    if (!id) return dg__fail(DG_ERR_INVALID, "dg_gpu_ranks_id: NULL id");
#ifdef DG_HAVE_NCCL
    static_assert(sizeof(ncclUniqueId) == DG_GPU_RANKS_ID_BYTES, "NCCL's unique id is DG_GPU_RANKS_ID_BYTES");
    dg_status st = load_nccl();
    if (st != DG_OK) return st;
    ncclUniqueId u;
    DG_NCCL_CHECK(nccl.get_unique_id(&u));
    memcpy(id, &u, sizeof u);
    return DG_OK;
#else
    return dg__fail(DG_ERR_UNSUPPORTED, "dg_gpu_ranks_id: this build has no NCCL (nccl.h was not found at build "
                    "time): one GPU only");
#endif
}

#ifdef DG_HAVE_NCCL
/* the new communicator's first all-reduce, of one float on the comm
 * stream, outside any capture (as warm_up for a group of one process) */
static dg_status warm_up_rank(gpu_ctx *c) {
    float *one = NULL;
    DG_GPU_USE_DEVICE(c);
    DG_CUDA_CHECK(cudaMalloc((void **)&one, sizeof(float)));
    cudaError_t e = cudaMemsetAsync(one, 0, sizeof(float), c->comm->stream);
    dg_status st = e != cudaSuccess ? dg__cuda_fail(e, "the rank's warm-up buffer", __FILE__, __LINE__) : DG_OK;
    ncclResult_t r = st == DG_OK ? nccl.all_reduce(one, one, 1, ncclFloat, ncclAvg, c->comm->nccl, c->comm->stream)
                                 : ncclSuccess;
    if (r != ncclSuccess) st = dg__fail(DG_ERR_BACKEND, "gpu: ncclAllReduce failed: %s", nccl.error_string(r));
    if (st == DG_OK && (e = cudaStreamSynchronize(c->comm->stream)) != cudaSuccess)
        st = dg__cuda_fail(e, "cudaStreamSynchronize", __FILE__, __LINE__);
    DG_CUDA_NOTE(cudaFree(one));
    return st;
}
#endif

dg_status dg_gpu_join_ranks(dg_backend *be, const unsigned char *id, int rank, int ranks) {
    if (!be || !id) return dg__fail(DG_ERR_INVALID, "dg_gpu_join_ranks: NULL %s", be ? "id" : "backend");
    if (ranks < 2 || rank < 0 || rank >= ranks)
        return dg__fail(DG_ERR_INVALID, "dg_gpu_join_ranks: rank %d of %d (2 or more ranks, 0 to ranks-1)", rank,
                        ranks);
    gpu_ctx *c = gpu_of(be);
    if (c->comm)
        return dg__fail(DG_ERR_INVALID, "dg_gpu_join_ranks: the backend (device %d) is already in a group", c->device);
#ifdef DG_HAVE_NCCL
    dg_status st = load_nccl();
    if (st != DG_OK) return st;
    nccl_settings();
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclComm_t nc = NULL;
    DG_GPU_USE_DEVICE(c);
    DG_NCCL_CHECK(nccl.comm_init_rank(&nc, ranks, u, rank));
    st = comm_new(c, rank, ranks, nc);
    if (st == DG_OK) st = warm_up_rank(c);
    if (st != DG_OK) {
        if (c->comm) dg__gpu_comm_free(c); /* destroys its communicator */
        else nccl.comm_destroy(nc);
    }
    return st;
#else
    return dg__fail(DG_ERR_UNSUPPORTED, "dg_gpu_join_ranks: this build has no NCCL (nccl.h was not found at build "
                    "time): one GPU only");
#endif
}
