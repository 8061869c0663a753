/* backend_impl.h: the interface every backend implements. Only backends and
 * the core's wrappers include this; users see backend.h.
 *
 * One struct of function pointers; the backend's state lives behind ctx.
 * Ops go through the single `compute` entry, which switches on the node's
 * op, so adding an op never changes this struct. The struct only grows at
 * its end, and `version` says which of its layouts a backend fills. Entries
 * marked optional may be NULL. */
#ifndef DG_BACKEND_IMPL_H
#define DG_BACKEND_IMPL_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_BACKEND_IFACE_VERSION 6

typedef struct dg_backend_i {
    int          version;   /* DG_BACKEND_IFACE_VERSION the backend was written for */
    const char *(*name)(const dg_backend *be);
    void        (*free)(dg_backend *be);
    dg_status   (*alloc)(dg_backend *be, size_t bytes, void **out);
    void        (*release)(dg_backend *be, void *ptr);
    dg_status   (*upload)(dg_backend *be, void *dst, const void *src, size_t bytes);
    dg_status   (*download)(dg_backend *be, void *dst, const void *src, size_t bytes);
    dg_status   (*sync)(dg_backend *be);                          /* optional: synchronous */
    bool        (*supports)(const dg_backend *be, const dg_node *n);
    dg_status   (*compute)(dg_backend *be, const dg_step *s);     /* switch (op)           */
    /* Runs a plan's steps; *cache is the plan's slot for backend state such
     * as a captured CUDA graph; replay: the plan allows capture and replay.
     * Optional: the core calls compute in order. */
    dg_status   (*run_steps)(dg_backend *be, const dg_step *steps, int n, bool replay, void **cache);
    void        (*cache_free)(dg_backend *be, void *cache);       /* optional */
    dg_status   (*gather_rows)(dg_backend *be, void *dst, const void *src, const int32_t *idx, int n,
                               size_t row_bytes);                  /* optional */
    /* Device events; optional: the core reads the monotonic clock after
     * sync (right for a backend whose compute returns when the work is done). */
    dg_status   (*event_new)(dg_backend *be, void **ev);
    void        (*event_free)(dg_backend *be, void *ev);
    dg_status   (*event_record)(dg_backend *be, void *ev);
    dg_status   (*event_elapsed)(dg_backend *be, void *start, void *stop, double *ms);
    /* Version 3. Joins bes[0..n) (n >= 2, all of this backend's kind) into
     * one all-reduce group (dg_backend_group). Optional: NULL for a kind
     * without collectives. */
    dg_status   (*group)(dg_backend *const *bes, int n);
    /* Version 4. Host memory the backend copies fastest (dg_backend_host_alloc);
     * optional: NULL for a backend whose copies are memcpy (aligned malloc). */
    dg_status   (*host_alloc)(dg_backend *be, size_t bytes, void **out);
    void        (*host_free)(dg_backend *be, void *ptr);
    /* Version 5. The working memory this backend's step for n needs (a plan
     * reserves it beside the step's buffers); optional: NULL means
     * dg_node_scratch_bytes(n), what the portable algorithms need (the im2col
     * columns of a convolution). */
    size_t      (*scratch_bytes)(const dg_backend *be, const dg_node *n);
    /* Version 6. The plan's GEMM and convolution choices travel in each
     * step's flags (DG_STEP_GEMM, DG_STEP_CONV); DEFAULT is the backend's own
     * setting when the step runs.
     * step_scratch_bytes: scratch_bytes for a step carrying flags; optional:
     * NULL means scratch_bytes (the working memory does not depend on the
     * choices).
     * step_impl: the short name of the implementation n's step runs with
     * under flags into buf (size > 0; the core checks the arguments and
     * that the name fits), or DG_ERR_UNSUPPORTED with a message for a choice
     * the backend does not offer; n NULL: only that check. Optional: NULL
     * means DEFAULT is the only choice and every step is named by the
     * backend's name. */
    size_t      (*step_scratch_bytes)(const dg_backend *be, const dg_node *n, unsigned flags);
    dg_status   (*step_impl)(const dg_backend *be, const dg_node *n, unsigned flags, char *buf, size_t size);
} dg_backend_i;

struct dg_backend {
    const dg_backend_i *iface;
    void               *ctx;
    size_t              n_allocs;      /* successful allocations through dg_backend_alloc */
    int                 fail_alloc_in; /* > 0: the n-th next allocation fails              */
};

/* A backend made by the backend's constructor: checks the interface version
 * and fills the common fields. NULL when out of memory or when the iface's
 * version is not one the core knows. */
dg_backend *dg__backend_new(const dg_backend_i *iface, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
