/* backend.h: what a user of a backend sees (cpu_backend/, gpu_backend/):
 * memory, copies, running one step, and timing events. The struct behind
 * dg_backend and its function table are for backend writers only
 * (backend_impl.h).
 *
 * A NULL backend, event or buffer (where bytes are to be copied), or a
 * negative count is refused with DG_ERR_INVALID and a message; the calls
 * that return no status then return "none", false or 0 and set the last
 * error where they can. Device pointers themselves cannot be checked:
 * they must come from dg_backend_alloc or a plan. */
#ifndef DG_BACKEND_H
#define DG_BACKEND_H

#include "cost.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One node ready to run: its buffers resolved by the plan (device pointers
 * on a device backend). */
typedef struct dg_step {
    const dg_node *node;
    void          *out;                    /* the node's output                   */
    void          *side[DG_MAX_SIDE];      /* storage of node->side[i]            */
    const void    *in[DG_MAX_INPUTS];
    void          *inout[DG_MAX_INPUTS];   /* in[i] again, writable, where the op's
                                              row marks input i as written in place;
                                              NULL elsewhere                       */
    unsigned       flags;                  /* DG_STEP_*, from the plan's options   */
    void          *scratch;                /* dg_backend_step_scratch_bytes(node) of
                                              working memory for this step only
                                              (NULL when 0, or from dg_step_of)    */
} dg_step;

#define DG_STEP_TF32 1u /* matmul may use TF32 tensor cores */

/* Which implementation a plan asks for its matmuls (and the GEMMs inside a
 * CPU convolution): one of the choices every backend names the same way.
 * DEFAULT: the backend's default (dg_cpu_set_gemm / dg_gpu_set_gemm, at
 * the time a step runs; OpenBLAS and cuBLAS unless set). */
typedef enum dg_gemm_impl {
    DG_GEMM_DEFAULT,
    DG_GEMM_VENDOR, /* the vendor library: OpenBLAS on the CPU (oneDNN for bf16
                       operands on a CPU with AMX, where built with it),
                       cuBLAS on the GPU */
    DG_GEMM_OWN,    /* the project's kernels: the CPU's blocked OpenMP sgemm, the
                       GPU's tiled kernel (its own TF32 tensor-core kernels when
                       the plan allows TF32)                                   */
    DG_GEMM_NAIVE,  /* the reference kernels: a triple loop, a thread per entry */
    DG_GEMM_COUNT,
} dg_gemm_impl;

/* Which implementation a plan asks for its convolutions (conv2d and its
 * two backward ops). DEFAULT: the backend's default (dg_cpu_set_conv /
 * dg_gpu_set_conv, at the time a step runs; unless set, each backend's
 * measured choice per node: DG_CPU_CONV_AUTO, DG_GPU_CONV_AUTO). The others name one
 * strategy, each offered by one backend (cpu_backend.h, gpu_backend.h);
 * a plan that asks a backend for one it does not offer is refused with
 * DG_ERR_UNSUPPORTED. Where a strategy cannot run a node (one image, one
 * thread, 32-bit indexing overflowed, ...) the backend runs its fallback:
 * dg_plan_node_impl says which. */
typedef enum dg_conv_impl {
    DG_CONV_DEFAULT,
    DG_CONV_IM2COL,          /* im2col + GEMMs in passes of images (CPU: DG_CPU_CONV_PASSES;
                                GPU: DG_GPU_CONV_IM2COL, cuBLAS)                       */
    DG_CONV_IM2COL_BATCH,    /* CPU: OpenMP over the batch (DG_CPU_CONV_BATCH)          */
    DG_CONV_SHIFT,           /* CPU: shifted taps, no im2col (DG_CPU_CONV_SHIFT)        */
    DG_CONV_IM2COL_CHANNELS, /* CPU: the weight's gradient by input channels
                                (DG_CPU_CONV_CHANNELS)                                  */
    DG_CONV_IMPLICIT,        /* GPU: the implicit-GEMM kernels (DG_GPU_CONV_IMPLICIT)   */
    DG_CONV_VENDOR,          /* the vendor library: oneDNN on the CPU, cuDNN on the GPU
                                (each where built with it and found at run time)       */
    DG_CONV_OWN,             /* the project's own kernels, no vendor library, chosen as
                                the backend chooses among them: CPU the own rule per
                                node (DG_CPU_CONV_DEFAULT), GPU the implicit GEMM      */
    DG_CONV_COUNT,
} dg_conv_impl;

/* The plan's choices travel in every step's flags beside DG_STEP_TF32
 * (dg_step_flags makes them from a plan's options): 4 bits each. */
#define DG_STEP_GEMM_SHIFT 8
#define DG_STEP_CONV_SHIFT 12
#define DG_STEP_IMPL_MASK  0xFu
#define DG_STEP_GEMM(flags) ((dg_gemm_impl)((unsigned)(flags) >> DG_STEP_GEMM_SHIFT & DG_STEP_IMPL_MASK))
#define DG_STEP_CONV(flags) ((dg_conv_impl)((unsigned)(flags) >> DG_STEP_CONV_SHIFT & DG_STEP_IMPL_MASK))

typedef struct dg_backend dg_backend;
/* A point in a backend's stream of work (a CUDA event on the GPU, the
 * monotonic clock on a synchronous backend). */
typedef struct dg_event dg_event;

const char *dg_backend_name(const dg_backend *be);
void        dg_backend_free(dg_backend *be);
/* Every allocation of device or arena memory goes through here: it counts
 * calls (a plan that allocates during a run shows up in the count) and can
 * be made to fail on purpose (both hooks: <duograd/testing.h>). */
dg_status   dg_backend_alloc(dg_backend *be, size_t bytes, void **out);
void        dg_backend_release(dg_backend *be, void *ptr);
dg_status   dg_backend_upload(dg_backend *be, void *dst, const void *src, size_t bytes);
dg_status   dg_backend_download(dg_backend *be, void *dst, const void *src, size_t bytes);
/* Host memory that the backend's upload and download move fastest: page-
 * locked on the GPU (the DMA engine reads it directly, as a data loader's
 * pinned batches), 64-byte aligned ordinary memory on the CPU. Any host
 * memory may be copied; other memory goes through the backend's staging.
 * Page-locked memory is a scarce system resource: allocate it once, for the
 * buffers that move every step. The block stays usable by every backend of
 * the same kind (every device) and must be freed with the backend that made
 * it; dg_backend_host_free(be, NULL) does nothing. */
dg_status   dg_backend_host_alloc(dg_backend *be, size_t bytes, void **out);
void        dg_backend_host_free(dg_backend *be, void *ptr);
dg_status   dg_backend_sync(dg_backend *be);
/* Whether the backend can run this node (its op, shapes, dtypes and
 * attributes); a plan refuses a graph with a node it cannot. */
bool        dg_backend_supports(const dg_backend *be, const dg_node *n);
/* Queues one step (a plan's, see dg_plan_steps): for timing a node alone. */
dg_status   dg_backend_compute(dg_backend *be, const dg_step *s);
/* dst row i = src row idx[i], i < n; rows of row_bytes; idx lives in
 * backend memory (assembles a shuffled batch from a resident data set). */
dg_status   dg_backend_gather_rows(dg_backend *be, void *dst, const void *src, const int32_t *idx, int n,
                                   size_t row_bytes);
/* The working memory (bytes) the backend's step for n needs, which a plan
 * reserves for it: dg_node_scratch_bytes(n) unless the backend's own
 * algorithm needs another amount (the GPU's implicit-GEMM convolutions need
 * no im2col columns). 0 for a NULL backend or node. */
size_t      dg_backend_scratch_bytes(const dg_backend *be, const dg_node *n);
/* The same for a step that carries `flags` (DG_STEP_*: the plan's GEMM and
 * convolution choices), as a plan with those options reserves it. */
size_t      dg_backend_step_scratch_bytes(const dg_backend *be, const dg_node *n, unsigned flags);
/* The implementation the backend runs n's step with under `flags`: a short
 * name into buf ("cpu-openblas", "cpu-im2col-chan", "gpu-implicit",
 * "gpu-cublas-tf32"; an op with one implementation: the backend's name,
 * "cpu" or "gpu"). DG_ERR_UNSUPPORTED where flags ask for a choice the
 * backend does not offer; DG_ERR_INVALID for a NULL backend or buf, n == 0
 * or a name longer than buf holds (it is cut there). node NULL: only
 * whether the backend offers the choices (buf may then be NULL). */
dg_status   dg_backend_step_impl(const dg_backend *be, const dg_node *node, unsigned flags, char *buf, size_t n);
/* Data parallelism: joins n >= 2 backends of one kind, one per device, into
 * a group whose plans' all_reduce nodes average over the group (the same
 * graph planned on each; dg_dp_new does this). For the life of the
 * backends; grouping the same backends again in the same order is a no-op
 * (several dg_dp on one group). DG_ERR_INVALID: fewer than 2, NULL or repeated backends, mixed
 * kinds, two on one device, one already grouped; DG_ERR_UNSUPPORTED: a kind
 * without collectives (the CPU) or a GPU build without NCCL. */
dg_status   dg_backend_group(dg_backend *const *bes, int n);

/* Timing: record two events around queued work, then ask the time between
 * them (waits for the second). Device time on a device backend: host
 * launch gaps between the events are not counted when the device is kept
 * busy. */
dg_status dg_event_new(dg_backend *be, dg_event **out);
void      dg_event_free(dg_event *ev);
dg_status dg_event_record(dg_event *ev);
dg_status dg_event_elapsed(const dg_event *start, const dg_event *stop, double *ms);

#ifdef __cplusplus
}
#endif
#endif
