/* gpu_transfer.cu: host <-> device copies and page-locked host memory.
 *
 * The DMA engine reads and writes only page-locked (pinned) host memory.
 * A copy from or to such memory (dg_backend_host_alloc, or any block the
 * runtime knows as pinned) is one cudaMemcpyAsync. Any other (pageable)
 * memory goes through the backend's pinned staging buffer in two halves:
 * while the DMA engine moves one chunk, the host copies the next into the
 * other half, so the host's memcpy and the DMA overlap instead of taking
 * turns; and the memcpy of a chunk is spread over a few OpenMP threads,
 * because one core's copy (about 8-10 GB/s on the H100's host) is far
 * slower than the DMA engine (about 55 GB/s over PCIe 5): docs/PERF.md,
 * "Host-device transfers".
 *
 * Every copy returns when it is done (the host memory may be reused at
 * once), after joining the all-reduce stream: no collective still reads or
 * writes the device memory it touches. */
#include <omp.h>
#include <string.h>

#include "gpu_common.cuh"

/* The staging buffer's two halves of this many bytes each: large enough
 * that a chunk's launch costs under 1% of its copy, small enough to keep the
 * pinned footprint per backend at 16 MiB. */
#define STAGING_HALF_BYTES ((size_t)8 << 20)
/* Chunks of a copy: a quarter of it, so even a 1 MiB copy overlaps its
 * memcpy and DMA, but not below this (per-chunk launch and event costs). */
#define STAGING_MIN_CHUNK ((size_t)256 << 10)

/* Threads of a staging memcpy: one per this many bytes of the chunk, at
 * most STAGING_MAX_THREADS (the host's copy bandwidth is reached with a few
 * cores; more would only take them from the CPU backend's work). */
#define STAGING_BYTES_PER_THREAD ((size_t)256 << 10)
#define STAGING_MAX_THREADS 8

/* memcpy in 64-byte-aligned slices, one per thread */
static void staging_memcpy(void *dst, const void *src, size_t n) {
    size_t want = n / STAGING_BYTES_PER_THREAD, most = (size_t)omp_get_max_threads();
    int threads = (int)(want < most ? want : most);
    if (threads > STAGING_MAX_THREADS) threads = STAGING_MAX_THREADS;
    if (threads <= 1 || omp_in_parallel()) {
        memcpy(dst, src, n);
        return;
    }
    size_t slice = ((n + (size_t)threads - 1) / (size_t)threads + 63) & ~(size_t)63; /* threads * slice >= n */
#pragma omp parallel num_threads(threads)
    {
        size_t lo = (size_t)omp_get_thread_num() * slice, hi = lo + slice < n ? lo + slice : n;
        if (lo < hi) memcpy((char *)dst + lo, (const char *)src + lo, hi - lo);
    }
}

dg_status dg__gpu_staging_init(gpu_ctx *c) {
    c->staging_bytes = 2 * STAGING_HALF_BYTES;
    DG_CUDA_CHECK(cudaMallocHost((void **)&c->staging, c->staging_bytes));
    for (int i = 0; i < 2; i++) DG_CUDA_CHECK(cudaEventCreateWithFlags(&c->staged[i], cudaEventDisableTiming));
    return DG_OK;
}

void dg__gpu_staging_free(gpu_ctx *c) {
    for (int i = 0; i < 2; i++)
        if (c->staged[i]) DG_CUDA_NOTE(cudaEventDestroy(c->staged[i]));
    DG_CUDA_NOTE(cudaFreeHost(c->staging));
}

/* Whether [p, p + bytes) is page-locked host memory the runtime knows (a
 * cudaHostAlloc block of any device, or a registered range): both ends are
 * looked up, so a range that runs past a pinned block counts as pageable. */
static bool pinned(const void *p, size_t bytes) {
    const void *ends[2] = {p, (const char *)p + bytes - 1};
    for (int i = 0; i < 2; i++) {
        cudaPointerAttributes a;
        if (cudaPointerGetAttributes(&a, ends[i]) != cudaSuccess) {
            (void)cudaGetLastError(); /* an unknown pointer is pageable, not an error */
            return false;
        }
        if (a.type != cudaMemoryTypeHost) return false;
    }
    return true;
}

static size_t chunk_of(size_t bytes) {
    size_t q = (bytes / 4 + 4095) & ~(size_t)4095;
    return q < STAGING_MIN_CHUNK ? STAGING_MIN_CHUNK : q > STAGING_HALF_BYTES ? STAGING_HALF_BYTES : q;
}

static char *half_of(gpu_ctx *c, size_t i) { return (char *)c->staging + (i & 1) * STAGING_HALF_BYTES; }

/* pageable host -> device: memcpy chunk i into half i % 2 while the DMA of
 * chunk i - 1 runs from the other half; staged[h] marks the last DMA that
 * read half h */
static dg_status upload_staged(gpu_ctx *c, char *dst, const char *src, size_t bytes) {
    size_t chunk = chunk_of(bytes);
    for (size_t off = 0, i = 0; off < bytes; off += chunk, i++) {
        size_t n = bytes - off < chunk ? bytes - off : chunk;
        DG_CUDA_CHECK(cudaEventSynchronize(c->staged[i & 1])); /* that half is free again */
        staging_memcpy(half_of(c, i), src + off, n);
        DG_CUDA_CHECK(cudaMemcpyAsync(dst + off, half_of(c, i), n, cudaMemcpyHostToDevice, c->stream));
        DG_CUDA_CHECK(cudaEventRecord(c->staged[i & 1], c->stream));
    }
    DG_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return DG_OK;
}

/* device -> pageable host: the DMA of chunk i + 1 into one half runs while
 * the host copies chunk i out of the other */
static dg_status download_staged(gpu_ctx *c, char *dst, const char *src, size_t bytes) {
    size_t chunk = chunk_of(bytes), n_chunks = (bytes + chunk - 1) / chunk;
    for (size_t i = 0; i <= n_chunks; i++) {
        if (i < n_chunks) { /* queue chunk i; its half was emptied by the memcpy of chunk i - 2 */
            size_t off = i * chunk, n = bytes - off < chunk ? bytes - off : chunk;
            DG_CUDA_CHECK(cudaMemcpyAsync(half_of(c, i), src + off, n, cudaMemcpyDeviceToHost, c->stream));
            DG_CUDA_CHECK(cudaEventRecord(c->staged[i & 1], c->stream));
        }
        if (i > 0) { /* copy out chunk i - 1 once its DMA is done */
            size_t j = i - 1, off = j * chunk, n = bytes - off < chunk ? bytes - off : chunk;
            DG_CUDA_CHECK(cudaEventSynchronize(c->staged[j & 1]));
            staging_memcpy(dst + off, half_of(c, j), n);
        }
    }
    return DG_OK;
}

static dg_status copy_direct(gpu_ctx *c, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    DG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, c->stream));
    DG_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return DG_OK;
}

dg_status dg__gpu_upload(dg_backend *be, void *dst, const void *src, size_t bytes) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    dg_status st = dg__gpu_comm_join(c); /* no all-reduce still reads what this overwrites */
    if (st != DG_OK) return st;
    return pinned(src, bytes) ? copy_direct(c, dst, src, bytes, cudaMemcpyHostToDevice)
                              : upload_staged(c, (char *)dst, (const char *)src, bytes);
}

dg_status dg__gpu_download(dg_backend *be, void *dst, const void *src, size_t bytes) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    dg_status st = dg__gpu_comm_join(c);
    if (st != DG_OK) return st;
    return pinned(dst, bytes) ? copy_direct(c, dst, src, bytes, cudaMemcpyDeviceToHost)
                              : download_staged(c, (char *)dst, (const char *)src, bytes);
}

/* Portable: pinned for every device's context, so one block can feed the
 * replicas of a data-parallel group. */
dg_status dg__gpu_host_alloc(dg_backend *be, size_t bytes, void **out) {
    DG_GPU_USE_DEVICE(gpu_of(be));
    cudaError_t e = cudaHostAlloc(out, bytes, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *out = NULL;
        return dg__fail(DG_ERR_OOM, "gpu: cannot page-lock %zu bytes of host memory (the system's limit on "
                        "pinned memory, or out of host memory)", bytes);
    }
    DG_CUDA_CHECK(e);
    return DG_OK;
}

void dg__gpu_host_free(dg_backend *be, void *ptr) {
    gpu_ctx *c = gpu_of(be);
    DG_CUDA_NOTE(cudaSetDevice(c->device));
    DG_CUDA_NOTE(cudaStreamSynchronize(c->stream)); /* no queued copy still reads it */
    DG_CUDA_NOTE(cudaFreeHost(ptr));
}

dg_status dg_gpu_copy_unstaged(dg_backend *be, void *dst, const void *src, size_t bytes, bool upload) {
    gpu_ctx *c = gpu_of(be);
    DG_GPU_USE_DEVICE(c);
    dg_status st = dg__gpu_comm_join(c);
    if (st != DG_OK) return st;
    return copy_direct(c, dst, src, bytes, upload ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
}
