/* backend.h: the interface every backend implements (cpu_backend/,
 * gpu_backend/), and the core's wrappers around it.
 *
 * One struct of function pointers; the backend's state lives behind ctx.
 * Ops go through the single `compute` entry, which switches on the node's
 * op, so adding an op never changes this struct. The struct only grows at
 * its end; optional entries may be NULL. */
#ifndef DG_BACKEND_H
#define DG_BACKEND_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One node ready to run: its output and input buffers resolved by the plan
 * (device pointers on a device backend). */
typedef struct dg_step {
    const dg_node *node;
    void          *out;
    const void    *in[DG_MAX_INPUTS];
} dg_step;

typedef struct dg_backend dg_backend;

typedef struct dg_backend_i {
    const char *(*name)(const dg_backend *be);
    void        (*free)(dg_backend *be);
    dg_status   (*alloc)(dg_backend *be, size_t bytes, void **out);
    void        (*release)(dg_backend *be, void *ptr);
    dg_status   (*upload)(dg_backend *be, void *dst, const void *src, size_t bytes);
    dg_status   (*download)(dg_backend *be, void *dst, const void *src, size_t bytes);
    dg_status   (*sync)(dg_backend *be);                         /* NULL: synchronous  */
    bool        (*supports)(const dg_backend *be, dg_op op);
    dg_status   (*compute)(dg_backend *be, const dg_step *s);    /* switch (op)        */
    /* Runs a whole plan's steps; *cache is the plan's slot for backend state
     * such as a captured CUDA graph. NULL: the core calls compute in order. */
    dg_status   (*run_steps)(dg_backend *be, const dg_step *steps, int n, void **cache);
    void        (*cache_free)(dg_backend *be, void *cache);
    /* dst row i = src row idx[i], i < n; rows of row_bytes; idx lives in
     * backend memory (assembles a shuffled batch from a resident data set) */
    dg_status   (*gather_rows)(dg_backend *be, void *dst, const void *src, const int32_t *idx, int n,
                               size_t row_bytes);
} dg_backend_i;

struct dg_backend {
    const dg_backend_i *iface;
    void               *ctx;
    size_t              n_allocs;     /* successful allocations through dg_backend_alloc */
    int                 fail_alloc_in;/* tests: > 0 makes the n-th next allocation fail   */
};

const char *dg_backend_name(const dg_backend *be);
void        dg_backend_free(dg_backend *be);
/* Every allocation of device or arena memory goes through here: it counts
 * calls (a plan that allocates during a run shows up in n_allocs) and can be
 * made to fail on purpose. */
dg_status   dg_backend_alloc(dg_backend *be, size_t bytes, void **out);
void        dg_backend_release(dg_backend *be, void *ptr);
dg_status   dg_backend_upload(dg_backend *be, void *dst, const void *src, size_t bytes);
dg_status   dg_backend_download(dg_backend *be, void *dst, const void *src, size_t bytes);
dg_status   dg_backend_sync(dg_backend *be);
bool        dg_backend_supports(const dg_backend *be, dg_op op);
dg_status   dg_backend_gather_rows(dg_backend *be, void *dst, const void *src, const int32_t *idx, int n,
                                   size_t row_bytes);
size_t      dg_backend_n_allocs(const dg_backend *be);

#ifdef __cplusplus
}
#endif
#endif
