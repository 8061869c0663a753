/* plan.c: liveness, first-fit arena placement, leaf storage and the run loop. */
#include "plan.h"

#include "backend_impl.h"
#include "graph_internal.h"
#include "layout.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define DG_ALIGN 256u /* cuBLAS and vector loads like aligned buffers */

struct dg_plan {
    dg_graph       *g;
    dg_backend     *be;
    int             graph_size;   /* nodes that existed when the plan was made */
    void          **data;         /* [graph_size] storage of each node, or NULL */
    bool           *owned_leaf;   /* [graph_size] leaf storage owned by this plan */
    dg_step        *steps;
    int             n_steps;
    dg_plan_buffer *bufs;
    int             n_bufs;
    void           *persist, *arena;
    dg_plan_stats   stats;
    dg_plan_opts    opts;
    void           *cache;        /* backend's per-plan state (CUDA graph) */
};

static size_t align_up(size_t x) { return (x + DG_ALIGN - 1) & ~(size_t)(DG_ALIGN - 1); }

static const dg_node *storage_root(const dg_node *n) {
    while (n->view_of) n = n->view_of;
    return n;
}

dg_status dg_init_fill(dg_init init, float *host, int64_t n) {
    if (n < 0 || (n > 0 && !host))
        return dg__fail(DG_ERR_INVALID, "dg_init_fill: %s", n < 0 ? "negative count" : "NULL host buffer");
    if ((unsigned)init.kind > DG_INIT_DATA)
        return dg__fail(DG_ERR_INVALID, "dg_init_fill: unknown init kind %d", (int)init.kind);
    if (init.kind == DG_INIT_DATA && n > 0 && !init.seed)
        return dg__fail(DG_ERR_INVALID, "dg_init_fill: DG_INIT_DATA without data");
    dg_rng r = dg_rng_new(init.seed);
    for (int64_t i = 0; i < n; i++) {
        switch (init.kind) {
        case DG_INIT_FILL:    host[i] = init.a; break;
        case DG_INIT_UNIFORM: host[i] = (float)(init.a + (init.b - init.a) * dg_rng_uniform(&r)); break;
        case DG_INIT_NORMAL:  host[i] = (float)(init.a + init.b * dg_rng_normal(&r)); break;
        case DG_INIT_DATA:    host[i] = ((const float *)(uintptr_t)init.seed)[i]; break;
        }
    }
    return DG_OK;
}

/* (Re)initialises every persistent leaf the plan owns from its init spec. */
static dg_status init_leaves(dg_plan *p) {
    size_t max_bytes = 0;
    for (int id = 0; id < p->graph_size; id++)
        if (p->owned_leaf[id]) {
            size_t b = dg_node_bytes(dg_graph_node(p->g, id));
            if (b > max_bytes) max_bytes = b;
        }
    if (max_bytes == 0) return DG_OK;
    float *host = malloc(max_bytes);
    if (!host) return dg__fail(DG_ERR_OOM, "plan: out of host memory (%zu bytes) initialising leaves", max_bytes);
    dg_status st = DG_OK;
    for (int id = 0; id < p->graph_size && st == DG_OK; id++) {
        if (!p->owned_leaf[id]) continue;
        const dg_node *n = dg_graph_node(p->g, id);
        /* inputs start as zeros so a forgotten dg_plan_set reads defined data */
        dg_init init = n->leaf == DG_LEAF_INPUT ? (dg_init){DG_INIT_FILL, 0, 0, 0} : n->init;
        st = dg_init_fill(init, host, dg_node_numel(n));
        if (st == DG_OK) st = dg_backend_upload(p->be, p->data[id], host, dg_node_bytes(n));
    }
    free(host);
    return st;
}

/* First fit: the lowest offset where `bytes` fits between the live buffers
 * (kept sorted by offset in live[0..n_live)). */
static size_t first_fit(const dg_plan_buffer *const *live, int n_live, size_t bytes) {
    size_t at = 0;
    for (int i = 0; i < n_live; i++) {
        if (live[i]->offset >= at + bytes) break;
        size_t end = align_up(live[i]->offset + live[i]->bytes);
        if (end > at) at = end;
    }
    return at;
}

/* Places bufs in the arena. bufs are in step order (by node id). */
static size_t place_buffers(dg_plan_buffer *bufs, int n, bool reuse) {
    size_t peak = 0, next = 0;
    const dg_plan_buffer **live = malloc((size_t)(n ? n : 1) * sizeof *live);
    if (!live) return SIZE_MAX;
    int n_live = 0;
    for (int i = 0; i < n; i++) {
        dg_plan_buffer *b = &bufs[i];
        if (!reuse) {
            b->offset = next;
            next = align_up(next + b->bytes);
        } else {
            int k = 0; /* drop buffers whose last reader ran before this step */
            for (int j = 0; j < n_live; j++)
                if (live[j]->last >= b->first) live[k++] = live[j];
            n_live = k;
            b->offset = first_fit(live, n_live, b->bytes);
            int pos = n_live++;
            while (pos > 0 && live[pos - 1]->offset > b->offset) { live[pos] = live[pos - 1]; pos--; }
            live[pos] = b;
        }
        if (b->offset + b->bytes > peak) peak = b->offset + b->bytes;
    }
    free(live);
    return peak;
}

/* A buffer entering (bytes > 0, at its first step) or leaving (bytes < 0,
 * the step after its last) the set of live buffers. */
typedef struct live_event { int64_t step, bytes; } live_event;

static int live_event_cmp(const void *a, const void *b) {
    const live_event *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes); /* leaving first */
}

/* The most bytes of bufs alive at one step (first <= step <= last): the sum
 * of their sizes, swept over the steps in order. Within a step the buffers
 * leaving are taken before those entering, so every running sum is at most
 * the step's own total and the largest of them is the peak. SIZE_MAX when
 * out of memory. */
static size_t peak_live_bytes(const dg_plan_buffer *bufs, int n) {
    size_t n_ev = n > 0 ? 2 * (size_t)n : 0;
    live_event *ev = malloc((n_ev ? n_ev : 1) * sizeof *ev);
    if (!ev) return SIZE_MAX;
    for (int i = 0; i < n; i++) {
        ev[2 * i] = (live_event){bufs[i].first, (int64_t)bufs[i].bytes};
        ev[2 * i + 1] = (live_event){(int64_t)bufs[i].last + 1, -(int64_t)bufs[i].bytes};
    }
    qsort(ev, n_ev, sizeof *ev, live_event_cmp);
    int64_t live = 0, peak = 0;
    for (size_t i = 0; i < n_ev; i++) {
        live += ev[i].bytes;
        if (live > peak) peak = live;
    }
    free(ev);
    return (size_t)peak;
}

/* An op that writes an input in place (optimizer updates) may only write
 * persistent state: a computed buffer could be shared with a later tensor,
 * an input or a constant would change under its owner. */
static dg_status check_in_place(const dg_graph *g, const bool *needed) {
    for (int id = 0; id < dg_graph_size(g); id++) {
        const dg_node *x = dg_graph_node(g, id);
        unsigned writes = dg_op_info_get(x->op)->writes;
        for (int j = 0; j < x->n_in && needed[id]; j++) {
            if (!(writes >> j & 1u)) continue;
            const dg_node *r = storage_root(x->in[j]);
            if (r->op != DG_OP_LEAF || (r->leaf != DG_LEAF_PARAM && r->leaf != DG_LEAF_STATE))
                return dg__fail(DG_ERR_INVALID, "dg_plan_new: node '%s' (%s) writes its input %d ('%s') in place, "
                                "which is not a parameter or optimizer state", x->name, dg_op_name(x->op), j,
                                r->name);
        }
    }
    return DG_OK;
}

dg_step dg_step_of(const dg_node *x, void *const *data, unsigned flags) {
    const dg_op_info *info = x ? dg_op_info_get(x->op) : NULL;
    if (!info || !data) {
        dg__fail(DG_ERR_INVALID, "dg_step_of: %s", !x ? "NULL node" : !info ? "node of an unknown op" : "NULL data");
        return (dg_step){0};
    }
    unsigned writes = info->writes;
    dg_step s = {.node = x, .out = data[x->id], .flags = flags};
    for (int j = 0; j < x->n_side; j++) s.side[j] = data[x->side[j]->id];
    for (int j = 0; j < x->n_in; j++) {
        s.in[j] = data[x->in[j]->id];
        if (writes >> j & 1u) s.inout[j] = data[x->in[j]->id];
    }
    return s;
}

static dg_status plan_fail(dg_plan *p, dg_status st) {
    dg_plan_free(p);
    return st;
}

unsigned dg_step_flags(const dg_plan_opts *o) {
    if (!o) return 0u;
    return (o->tf32 ? DG_STEP_TF32 : 0u) | ((unsigned)o->gemm & DG_STEP_IMPL_MASK) << DG_STEP_GEMM_SHIFT |
           ((unsigned)o->conv & DG_STEP_IMPL_MASK) << DG_STEP_CONV_SHIFT;
}

/* The arguments dg_plan_new and dg_plan_estimate share, checked alike. */
static dg_status check_args(const char *fn, const dg_graph *g, const dg_backend *be, bool need_be,
                            dg_node *const *outputs, int n_out, const dg_plan_opts *o) {
    if (!g || (need_be && !be) || !outputs)
        return dg__fail(DG_ERR_INVALID, "%s: NULL %s", fn, !g ? "graph" : !outputs ? "outputs" : "backend");
    if (n_out < 1) return dg__fail(DG_ERR_INVALID, "%s: %d outputs (at least 1)", fn, n_out);
    if (dg_graph_status(g) != DG_OK) return dg__graph_refuse(g, fn);
    if (o->share_leaves && (o->share_leaves->g != g || (be && o->share_leaves->be != be)))
        return dg__fail(DG_ERR_INVALID, "%s: share_leaves must be a plan of the same graph and backend", fn);
    if ((unsigned)o->gemm >= DG_GEMM_COUNT || (unsigned)o->conv >= DG_CONV_COUNT)
        return dg__fail(DG_ERR_INVALID, "%s: unknown %s implementation %d", fn,
                        (unsigned)o->gemm >= DG_GEMM_COUNT ? "GEMM" : "convolution",
                        (unsigned)o->gemm >= DG_GEMM_COUNT ? (int)o->gemm : (int)o->conv);
    /* a choice the backend does not offer: refused before anything is laid out */
    if (be) return dg_backend_step_impl(be, NULL, dg_step_flags(o), NULL, 0);
    return DG_OK;
}

/* The plan without its memory: which nodes the outputs need, their
 * liveness, the leaves this plan owns, the arena's buffers placed, the
 * stats and the step count; every step's op checked against the backend
 * (p->be NULL: none in particular). What dg_plan_new allocates and what
 * dg_plan_estimate reports both come from here. p->g, p->be, p->opts set;
 * the arrays allocated by the caller. */
static dg_status plan_layout(dg_plan *p, dg_node *const *outputs, int n_out, bool *needed, int *last) {
    dg_graph *g = p->g;
    const dg_backend *be = p->be;
    const dg_plan_opts o = p->opts;
    const unsigned flags = dg_step_flags(&o);
    const int n = p->graph_size;
    dg_status st;

    /* needed: everything the outputs depend on (inputs have smaller ids) */
    for (int i = 0; i < n_out; i++) {
        if (!dg__graph_owns(g, outputs[i]))
            return dg__fail(DG_ERR_INVALID, "dg_plan_new: output %d is not a node of this graph", i);
        needed[outputs[i]->id] = true;
    }
    for (int id = n - 1; id >= 0; id--) {
        const dg_node *x = dg_graph_node(g, id);
        for (int j = 0; j < x->n_in && needed[id]; j++) needed[x->in[j]->id] = true;
    }
    /* a step writes all its side outputs, read later or not */
    for (int id = 0; id < n; id++) {
        const dg_node *x = dg_graph_node(g, id);
        for (int j = 0; j < x->n_side && needed[id]; j++) needed[x->side[j]->id] = true;
    }
    if ((st = check_in_place(g, needed)) != DG_OK) return st;

    /* liveness: last step reading each storage root */
    for (int id = 0; id < n; id++) last[id] = id;
    for (int id = 0; id < n; id++) {
        const dg_node *x = dg_graph_node(g, id);
        if (!needed[id]) continue;
        for (int j = 0; j < x->n_in; j++) {
            int r = storage_root(x->in[j])->id;
            if (last[r] < id) last[r] = id;
        }
        int r = storage_root(x)->id;
        if (last[r] < id) last[r] = id;
    }
    for (int i = 0; i < n_out; i++) last[storage_root(outputs[i])->id] = INT32_MAX;
    /* a backend may read an all_reduce's input after the node has been
     * queued (NCCL on another stream, gradients packed into buckets): the
     * input lives as long as the result does, so no later node's buffer
     * lands on it while the exchange may still read it */
    for (int id = 0; id < n; id++) {
        const dg_node *x = dg_graph_node(g, id);
        if (!needed[id] || x->op != DG_OP_ALL_REDUCE) continue;
        int r = storage_root(x->in[0])->id, done = last[storage_root(x)->id];
        if (last[r] < done) last[r] = done;
    }

    /* persistent leaves: shared or in one region of our own */
    size_t persist = 0;
    for (int id = 0; id < n; id++) {
        const dg_node *x = dg_graph_node(g, id);
        if (!needed[id] || x->op != DG_OP_LEAF) continue;
        if (o.share_leaves && id < o.share_leaves->graph_size && o.share_leaves->data[id]) continue;
        p->owned_leaf[id] = true;
        persist = align_up(persist + dg_node_bytes(x));
    }
    /* arena buffers: computed storage roots in step order, each node's side
     * outputs right after it (live from the owner's step, which writes them),
     * then its scratch for the plan's choices */
    for (int id = 0; id < n; id++) {
        const dg_node *x = dg_graph_node(g, id);
        if (!needed[id] || x->op == DG_OP_LEAF || x->op == DG_OP_SIDE_OUTPUT || x->view_of) continue;
        p->bufs[p->n_bufs++] = (dg_plan_buffer){id, 0, dg_node_bytes(x), id, last[id], false};
        for (int j = 0; j < x->n_side; j++) {
            const dg_node *sd = x->side[j];
            p->bufs[p->n_bufs++] = (dg_plan_buffer){sd->id, 0, dg_node_bytes(sd), id, last[sd->id], false};
        }
        /* no backend: the portable kernels' scratch, a 16-bit convolution's
         * float32 copies (layout.h) ahead of its im2col columns */
        size_t scratch = be ? dg_backend_step_scratch_bytes(be, x, flags)
                            : (size_t)dg_conv_widened_of(x).inner * sizeof(float) + dg_node_scratch_bytes(x);
        if (scratch) p->bufs[p->n_bufs++] = (dg_plan_buffer){id, 0, scratch, id, id, true};
    }
    size_t arena = place_buffers(p->bufs, p->n_bufs, !o.no_reuse);
    size_t flat = 0;
    for (int i = 0; i < p->n_bufs; i++) flat = align_up(flat + p->bufs[i].bytes);
    size_t live = peak_live_bytes(p->bufs, p->n_bufs);
    if (arena == SIZE_MAX || live == SIZE_MAX) return dg__fail(DG_ERR_OOM, "dg_plan_new: out of memory");

    /* steps: every computed node but views and side outputs, each one the
     * backend can run */
    int n_steps = 0;
    for (int id = 0; id < n; id++) {
        const dg_node *x = dg_graph_node(g, id);
        if (!needed[id] || x->op == DG_OP_LEAF || x->op == DG_OP_RESHAPE || x->op == DG_OP_SIDE_OUTPUT) continue;
        if (be && !dg_backend_supports(be, x)) {
            char sh[96];
            return dg__fail(DG_ERR_UNSUPPORTED, "%s backend: op %s (node '%s', shape %s) is not supported",
                            dg_backend_name(be), dg_op_name(x->op), x->name, dg_shape_str(x->shape, sh, sizeof sh));
        }
        n_steps++;
    }
    p->stats = (dg_plan_stats){persist, arena, flat, n_steps, p->n_bufs, live};
    return DG_OK;
}

/* A plan's bookkeeping for graph g: the struct and its arrays, no memory of
 * the backend's. NULL when out of host memory (the last error set). */
static dg_plan *plan_alloc(dg_graph *g, dg_backend *be, const dg_plan_opts *o) {
    dg_plan *p = calloc(1, sizeof *p);
    if (!p) {
        dg__fail(DG_ERR_OOM, "dg_plan_new: out of memory");
        return NULL;
    }
    p->g = g;
    p->be = be;
    p->opts = *o;
    int n = p->graph_size = dg_graph_size(g);
    p->data = calloc((size_t)n, sizeof *p->data);
    p->owned_leaf = calloc((size_t)n, sizeof *p->owned_leaf);
    p->steps = calloc((size_t)n, sizeof *p->steps);
    p->bufs = calloc(2 * (size_t)n, sizeof *p->bufs); /* a node, or a node and its scratch */
    if (!p->data || !p->owned_leaf || !p->steps || !p->bufs) {
        dg__fail(DG_ERR_OOM, "dg_plan_new: out of memory for %d nodes", n);
        dg_plan_free(p);
        return NULL;
    }
    return p;
}

dg_status dg_plan_estimate(dg_graph *g, const dg_backend *be, dg_node *const *outputs, int n_out,
                           const dg_plan_opts *opts, dg_plan_stats *out) {
    if (!out) return dg__fail(DG_ERR_INVALID, "dg_plan_estimate: NULL out");
    *out = (dg_plan_stats){0};
    const dg_plan_opts o = opts ? *opts : (dg_plan_opts){0};
    dg_status st = check_args("dg_plan_estimate", g, be, false, outputs, n_out, &o);
    if (st != DG_OK) return st;
    /* the plan's own bookkeeping, with no backend to free memory to: the
     * layout never touches the backend but through its const queries */
    dg_plan *p = plan_alloc(g, NULL, &o);
    if (!p) return DG_ERR_OOM;
    p->be = (dg_backend *)be;
    int n = p->graph_size;
    bool *needed = calloc((size_t)n ? (size_t)n : 1, sizeof *needed);
    int *last = malloc(((size_t)n ? (size_t)n : 1) * sizeof *last);
    st = needed && last ? plan_layout(p, outputs, n_out, needed, last)
                        : dg__fail(DG_ERR_OOM, "dg_plan_estimate: out of memory for %d nodes", n);
    if (st == DG_OK) *out = p->stats;
    free(needed);
    free(last);
    p->be = NULL; /* nothing of the backend's to release */
    dg_plan_free(p);
    return st;
}

dg_status dg_plan_new(dg_plan **out, dg_graph *g, dg_backend *be, dg_node *const *outputs, int n_out,
                      const dg_plan_opts *opts) {
    if (!out) return dg__fail(DG_ERR_INVALID, "dg_plan_new: NULL out");
    *out = NULL;
    const dg_plan_opts o = opts ? *opts : (dg_plan_opts){0};
    dg_status st = check_args("dg_plan_new", g, be, true, outputs, n_out, &o);
    if (st != DG_OK) return st;

    dg_plan *p = plan_alloc(g, be, &o);
    if (!p) return DG_ERR_OOM;
    int n = p->graph_size;
    bool *needed = calloc((size_t)n ? (size_t)n : 1, sizeof *needed);
    int *last = malloc(((size_t)n ? (size_t)n : 1) * sizeof *last);
    if (!needed || !last) {
        st = dg__fail(DG_ERR_OOM, "dg_plan_new: out of memory for %d nodes", n);
        goto done;
    }
    if ((st = plan_layout(p, outputs, n_out, needed, last)) != DG_OK) goto done;

    size_t persist = p->stats.persistent_bytes, arena = p->stats.arena_bytes;
    if (persist && (st = dg_backend_alloc(be, persist, &p->persist)) != DG_OK) goto done;
    if (arena && (st = dg_backend_alloc(be, arena, &p->arena)) != DG_OK) goto done;

    /* storage of every needed node */
    size_t off = 0;
    for (int id = 0; id < n; id++) {
        if (!p->owned_leaf[id]) continue;
        p->data[id] = (char *)p->persist + off;
        off = align_up(off + dg_node_bytes(dg_graph_node(g, id)));
    }
    for (int i = 0; i < p->n_bufs; i++)
        if (!p->bufs[i].scratch) p->data[p->bufs[i].node_id] = (char *)p->arena + p->bufs[i].offset;
    for (int id = 0; id < n; id++) {
        const dg_node *x = dg_graph_node(g, id);
        if (!needed[id]) continue;
        if (x->op == DG_OP_LEAF && !p->owned_leaf[id]) p->data[id] = o.share_leaves->data[id];
        if (x->view_of) p->data[id] = p->data[storage_root(x)->id];
    }

    /* steps: as plan_layout counted them, with the plan's choices */
    unsigned flags = dg_step_flags(&o);
    for (int id = 0; id < n; id++) {
        const dg_node *x = dg_graph_node(g, id);
        if (!needed[id] || x->op == DG_OP_LEAF || x->op == DG_OP_RESHAPE || x->op == DG_OP_SIDE_OUTPUT) continue;
        p->steps[p->n_steps++] = dg_step_of(x, p->data, flags);
    }
    /* each step's scratch: its buffers follow the steps' order */
    for (int i = 0, k = 0; i < p->n_bufs; i++) {
        if (!p->bufs[i].scratch) continue;
        while (p->steps[k].node->id != p->bufs[i].node_id) k++;
        p->steps[k].scratch = (char *)p->arena + p->bufs[i].offset;
    }
    st = init_leaves(p);

done:
    free(needed);
    free(last);
    if (st != DG_OK) return plan_fail(p, st);
    *out = p;
    return DG_OK;
}

void dg_plan_free(dg_plan *p) {
    if (!p) return;
    if (p->cache && p->be && p->be->iface->cache_free) p->be->iface->cache_free(p->be, p->cache);
    dg_backend_release(p->be, p->arena);
    dg_backend_release(p->be, p->persist);
    free(p->data);
    free(p->owned_leaf);
    free(p->steps);
    free(p->bufs);
    free(p);
}

bool dg_plan_captured(const dg_plan *p) { return p && p->cache && !p->opts.no_replay; }

dg_status dg_plan_run(dg_plan *p) {
    if (!p) return dg__fail(DG_ERR_INVALID, "dg_plan_run: NULL plan");
    if (p->be->iface->run_steps)
        return p->be->iface->run_steps(p->be, p->steps, p->n_steps, !p->opts.no_replay, &p->cache);
    for (int i = 0; i < p->n_steps; i++) {
        dg_status st = dg_backend_compute(p->be, &p->steps[i]);
        if (st != DG_OK) return st;
    }
    return DG_OK;
}

static dg_status check_node(const dg_plan *p, const dg_node *n, const void *host, size_t bytes, const char *what) {
    if (!p || !n || !host)
        return dg__fail(DG_ERR_INVALID, "%s: NULL %s", what, !p ? "plan" : !n ? "node" : "host buffer");
    if (!dg_plan_has(p, n))
        return dg__fail(DG_ERR_INVALID, "%s: node '%s' is not part of this plan", what, n->name);
    if (bytes != dg_node_bytes(n))
        return dg__fail(DG_ERR_INVALID, "%s: node '%s' holds %zu bytes, %zu given", what, n->name,
                        dg_node_bytes(n), bytes);
    return DG_OK;
}

/* Int32 data indexes: ids fed to an embedding must name a row of its
 * table, labels fed to a softmax cross-entropy a class (a column of its
 * logits). Checked here, on the host, on both backends, so no kernel ever
 * reads past a table or a row, and no loss turns NaN without a word; the
 * first value outside its range is named. (The GPU kernels could raise a
 * device flag instead, but reading it back costs a synchronisation each
 * run, where this costs one pass over ints the caller hands in; the CPU
 * kernels check again for data that reaches the plan otherwise.) */
static dg_status check_ids(const dg_plan *p, const dg_node *ids, const int32_t *host) {
    for (int i = ids->id + 1; i < dg_graph_size(p->g); i++) {
        const dg_node *e = dg_graph_node(p->g, i);
        bool table = e->op == DG_OP_EMBEDDING;
        if ((!table && e->op != DG_OP_SOFTMAX_CE) || e->in[1] != ids) continue;
        const dg_node *of = e->in[0];
        int64_t bound = table ? of->shape.d[0] : of->shape.d[of->shape.ndim - 1], n = dg_node_numel(ids);
        for (int64_t j = 0; j < n; j++)
            if (host[j] < 0 || host[j] >= bound)
                return dg__fail(DG_ERR_INVALID, "dg_plan_set: %s %ld at position %lld of '%s' is outside [0, %lld), "
                                "the %s of %s '%s'", table ? "id" : "label", (long)host[j], (long long)j, ids->name,
                                (long long)bound, table ? "rows" : "classes",
                                table ? "embedding table" : "softmax_cross_entropy's logits", of->name);
    }
    return DG_OK;
}

dg_status dg_plan_set(dg_plan *p, const dg_node *n, const void *host, size_t bytes) {
    dg_status st = check_node(p, n, host, bytes, "dg_plan_set");
    if (st != DG_OK) return st;
    if (n->op != DG_OP_LEAF) return dg__fail(DG_ERR_INVALID, "dg_plan_set: node '%s' is not a leaf", n->name);
    if (n->dtype == DG_I32 && (st = check_ids(p, n, host)) != DG_OK) return st;
    return dg_backend_upload(p->be, p->data[n->id], host, bytes);
}

dg_status dg_plan_get(dg_plan *p, const dg_node *n, void *host, size_t bytes) {
    dg_status st = check_node(p, n, host, bytes, "dg_plan_get");
    return st != DG_OK ? st : dg_backend_download(p->be, host, p->data[n->id], bytes);
}

bool dg_plan_has(const dg_plan *p, const dg_node *n) {
    return p && dg__graph_owns(p->g, n) && n->id < p->graph_size && p->data[n->id];
}

void *dg_plan_data(const dg_plan *p, const dg_node *n) {
    if (!dg_plan_has(p, n)) {
        dg__fail(DG_ERR_INVALID, "dg_plan_data: %s", !p || !n ? "NULL plan or node" : "the node is not planned");
        return NULL;
    }
    return p->data[n->id];
}

dg_plan_stats dg_plan_stats_get(const dg_plan *p) {
    if (!p) {
        dg__fail(DG_ERR_INVALID, "dg_plan_stats_get: NULL plan");
        return (dg_plan_stats){0};
    }
    return p->stats;
}

const dg_plan_buffer *dg_plan_buffers(const dg_plan *p, int *n) {
    if (!p || !n) {
        dg__fail(DG_ERR_INVALID, "dg_plan_buffers: NULL %s", p ? "count" : "plan");
        if (n) *n = 0;
        return NULL;
    }
    *n = p->n_bufs;
    return p->bufs;
}

const dg_step *dg_plan_steps(const dg_plan *p, int *n) {
    if (!p || !n) {
        dg__fail(DG_ERR_INVALID, "dg_plan_steps: NULL %s", p ? "count" : "plan");
        if (n) *n = 0;
        return NULL;
    }
    *n = p->n_steps;
    return p->steps;
}

dg_status dg_plan_node_impl(const dg_plan *p, const dg_node *n, char *buf, size_t size) {
    if (!p || !n || !buf)
        return dg__fail(DG_ERR_INVALID, "dg_plan_node_impl: NULL %s", !p ? "plan" : !n ? "node" : "buf");
    if (dg__graph_owns(p->g, n))
        for (int i = 0; i < p->n_steps; i++)
            if (p->steps[i].node == n) return dg_backend_step_impl(p->be, n, p->steps[i].flags, buf, size);
    return dg__fail(DG_ERR_INVALID, "dg_plan_node_impl: node '%s' has no step in this plan (a leaf, a view, a side "
                    "output, or not needed by its outputs)", n->name);
}
