/* plan.h: memory plan and executor.
 *
 * dg_plan_new fixes, once, where every tensor the outputs need lives:
 * persistent leaves (inputs, parameters, optimizer state, constants) in one
 * region, and every computed tensor at an offset of one arena, reusing the
 * bytes of tensors that are dead (first fit by liveness). dg_plan_run then
 * walks the steps and allocates nothing.
 *
 * Every call checks its arguments: a NULL plan, graph, backend, node or host
 * buffer, a node of another graph or one the plan does not hold, a graph
 * in an error state (its first error is forwarded) are refused with a
 * status and a message. The functions that return a value instead return
 * NULL / zeros for a NULL plan and set the last error. */
#ifndef DG_PLAN_H
#define DG_PLAN_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_plan dg_plan;

/* Per-plan choices; zero-initialised options are the defaults. */
typedef struct dg_plan_opts {
    bool           no_reuse;       /* every computed tensor gets its own bytes */
    const dg_plan *share_leaves;   /* use this plan's leaf storage (same graph,
                                      same backend): e.g. an evaluation plan
                                      that sees the training plan's weights;
                                      it must outlive the new plan            */
    bool           no_replay;      /* run node by node even where the backend
                                      can capture the plan once and replay it
                                      (CUDA graphs)                           */
    bool           tf32;           /* matmuls may use TF32 tensor cores       */
    dg_gemm_impl   gemm;           /* the matmuls' implementation (backend.h);
                                      DEFAULT: the backend's setting          */
    dg_conv_impl   conv;           /* the convolutions' implementation;
                                      DEFAULT: the backend's setting. A
                                      choice the backend does not offer is
                                      refused (DG_ERR_UNSUPPORTED). Plans of
                                      different choices share a backend: each
                                      step runs with its own plan's choice,
                                      and its scratch is reserved for it      */
} dg_plan_opts;

typedef struct dg_plan_stats {
    size_t persistent_bytes;  /* leaves owned by this plan                    */
    size_t arena_bytes;       /* peak of computed tensors, as planned         */
    size_t no_reuse_bytes;    /* the same tensors without any reuse           */
    int    n_steps;           /* kernels run per dg_plan_run                  */
    int    n_buffers;         /* computed tensors and scratch in the arena    */
    size_t live_bytes;        /* the most bytes of arena buffers alive at one
                                 step (dg_plan_buffers' intervals, scratch at
                                 its step): no placement can use less, so
                                 arena_bytes >= live_bytes, and their ratio
                                 is what the packing wastes                  */
} dg_plan_stats;

/* One arena buffer, for inspection (tests): node `node_id` occupies
 * [offset, offset + bytes) from step index `first` to `last` inclusive
 * (indices are node ids; last = INT32_MAX for outputs). A side output's
 * buffer starts at its owner's step, which writes it. A scratch buffer is
 * the working memory of node `node_id`'s step (first = last = node_id). */
typedef struct dg_plan_buffer {
    int    node_id;
    size_t offset, bytes;
    int    first, last;
    bool   scratch;
} dg_plan_buffer;

/* The flags every step of a plan with options o carries (DG_STEP_TF32,
 * the GEMM and convolution choices): for a step made by hand
 * (dg_step_of) that should run as the plan's would. 0 for NULL. */
unsigned  dg_step_flags(const dg_plan_opts *o);

dg_status dg_plan_new(dg_plan **out, dg_graph *g, dg_backend *be, dg_node *const *outputs, int n_out,
                      const dg_plan_opts *opts);
void      dg_plan_free(dg_plan *p);
dg_status dg_plan_run(dg_plan *p);
/* Copies host data into a leaf (bytes must equal the leaf's size; host must
 * not be NULL). Ids that feed an embedding are checked against its table's
 * rows first, labels that feed a softmax cross-entropy against its logits'
 * classes: one outside [0, V) or [0, classes) is DG_ERR_INVALID, naming
 * it, nothing copied. */
dg_status dg_plan_set(dg_plan *p, const dg_node *n, const void *host, size_t bytes);
/* Copies a tensor to the host. Leaves and outputs hold their values after a
 * run; other tensors may have been overwritten by later ones. */
dg_status dg_plan_get(dg_plan *p, const dg_node *n, void *host, size_t bytes);
/* The backend storage of n (device memory on a GPU): for copies into a
 * leaf without the host, e.g. dg_backend_gather_rows. NULL (with the last
 * error set) if not planned. */
void     *dg_plan_data(const dg_plan *p, const dg_node *n);

/* Whether the plan holds storage for n (n is needed by its outputs); false
 * for NULL or a node of another graph. */
bool                  dg_plan_has(const dg_plan *p, const dg_node *n);
dg_plan_stats         dg_plan_stats_get(const dg_plan *p);
/* A dry run of dg_plan_new: *out gets the dg_plan_stats that a plan of the
 * same arguments would report (persistent and arena bytes, peak live
 * bytes, steps, buffers), by the same liveness and placement, without
 * allocating backend memory or initialising leaves (host memory: the
 * layout's bookkeeping only). be: the backend the plan is meant for (its
 * scratch per step, the ops it supports, the choices it offers), or NULL
 * for none in particular: every op supported and the portable algorithms'
 * scratch (dg_node_scratch_bytes, and a bf16 or f16 convolution's float32
 * copies of its inputs and output; a GPU's implicit convolutions need
 * less).
 * Refuses what dg_plan_new refuses, with the same status; *out zeroed
 * then. */
dg_status             dg_plan_estimate(dg_graph *g, const dg_backend *be, dg_node *const *outputs, int n_out,
                                       const dg_plan_opts *opts, dg_plan_stats *out);
/* The implementation n's step runs with in this plan: a short name into
 * buf (dg_backend_step_impl: "cpu-openblas", "cpu-im2col-chan",
 * "gpu-implicit", ...), for the plan's own choices, whatever other plans
 * or the backend's settings say (a DEFAULT choice: the backend's setting
 * now). DG_ERR_INVALID for NULL arguments, a node the plan holds no step
 * for (leaves, views, side outputs, nodes not planned) or a buf too
 * small. */
dg_status             dg_plan_node_impl(const dg_plan *p, const dg_node *n, char *buf, size_t size);
/* Whether the backend holds a captured graph of the plan (a replay plan
 * that has run once): dg_plan_run then only launches it, with no host-side
 * work per node (data parallelism then launches every replica from one
 * thread). */
bool                  dg_plan_captured(const dg_plan *p);
const dg_plan_buffer *dg_plan_buffers(const dg_plan *p, int *n);
const dg_step        *dg_plan_steps(const dg_plan *p, int *n);
/* x's step as its kernel sees it, from the storage of every node by id
 * (data[id]): output, side outputs, inputs, and the inputs x's op writes in
 * place again as writable pointers. The plan makes its steps so; so does a
 * caller that lays out buffers by hand. A zeroed step (node NULL) for a
 * NULL node or data. */
dg_step dg_step_of(const dg_node *x, void *const *data, unsigned flags);
/* Fills `host` (n floats) with init's values: the same seed gives the same
 * numbers everywhere. DG_ERR_INVALID for n < 0, a NULL host with n > 0 or
 * an unknown init kind (which would leave host unwritten). */
dg_status dg_init_fill(dg_init init, float *host, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
