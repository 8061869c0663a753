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
    void          *scratch;                /* dg_node_scratch_bytes(node) of working
                                              memory for this step only (NULL when
                                              0, or from dg_step_of)               */
} dg_step;

#define DG_STEP_TF32 1u /* matmul may use TF32 tensor cores */

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
