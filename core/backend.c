/* backend.c: the core's wrappers around the backend interface, and timing
 * events (a backend's own, or the monotonic clock). */
#include "backend_impl.h"
#include "clock_internal.h"
#include "status_internal.h"
#include "testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dg_backend *dg__backend_new(const dg_backend_i *iface, void *ctx) {
    if (!iface || iface->version != DG_BACKEND_IFACE_VERSION) {
        dg__fail(DG_ERR_INVALID, "backend interface version %d, the core knows %d", iface ? iface->version : -1,
                 DG_BACKEND_IFACE_VERSION);
        return NULL;
    }
    dg_backend *be = calloc(1, sizeof *be);
    if (!be) {
        dg__fail(DG_ERR_OOM, "out of memory creating a backend");
        return NULL;
    }
    be->iface = iface;
    be->ctx = ctx;
    return be;
}

static dg_status null_arg(const char *fn, const char *what) {
    return dg__fail(DG_ERR_INVALID, "%s: NULL %s", fn, what);
}

/* A copy may name NULL buffers only when it copies nothing (and then does
 * not reach the backend: memcpy forbids NULL even for 0 bytes). */
static dg_status check_copy(const char *fn, const dg_backend *be, const void *dst, const void *src, size_t bytes) {
    if (!be) return null_arg(fn, "backend");
    if (bytes && (!dst || !src)) return null_arg(fn, dst ? "source" : "destination");
    return DG_OK;
}

const char *dg_backend_name(const dg_backend *be) { return be ? be->iface->name(be) : "none"; }

void dg_backend_free(dg_backend *be) {
    if (be) be->iface->free(be);
}

dg_status dg_backend_alloc(dg_backend *be, size_t bytes, void **out) {
    if (!be || !out) return null_arg("dg_backend_alloc", be ? "out" : "backend");
    *out = NULL;
    if (be->fail_alloc_in > 0 && --be->fail_alloc_in == 0)
        return dg__fail(DG_ERR_OOM, "%s: allocation of %zu bytes failed (injected by a test)",
                        dg_backend_name(be), bytes);
    dg_status st = be->iface->alloc(be, bytes ? bytes : 1, out);
    if (st == DG_OK) be->n_allocs++;
    return st;
}

void dg_backend_release(dg_backend *be, void *ptr) {
    if (be && ptr) be->iface->release(be, ptr);
}

dg_status dg_backend_upload(dg_backend *be, void *dst, const void *src, size_t bytes) {
    dg_status st = check_copy("dg_backend_upload", be, dst, src, bytes);
    return st != DG_OK || !bytes ? st : be->iface->upload(be, dst, src, bytes);
}

dg_status dg_backend_download(dg_backend *be, void *dst, const void *src, size_t bytes) {
    dg_status st = check_copy("dg_backend_download", be, dst, src, bytes);
    return st != DG_OK || !bytes ? st : be->iface->download(be, dst, src, bytes);
}

size_t dg_backend_scratch_bytes(const dg_backend *be, const dg_node *n) {
    if (!be || !n) return 0;
    return be->iface->scratch_bytes ? be->iface->scratch_bytes(be, n) : dg_node_scratch_bytes(n);
}

size_t dg_backend_step_scratch_bytes(const dg_backend *be, const dg_node *n, unsigned flags) {
    if (!be || !n) return 0;
    return be->iface->step_scratch_bytes ? be->iface->step_scratch_bytes(be, n, flags) : dg_backend_scratch_bytes(be, n);
}

dg_status dg_backend_step_impl(const dg_backend *be, const dg_node *node, unsigned flags, char *buf, size_t n) {
    if (!be) return null_arg("dg_backend_step_impl", "backend");
    if (node && (!buf || n == 0))
        return dg__fail(DG_ERR_INVALID, "dg_backend_step_impl: %s", buf ? "a buffer of 0 bytes" : "NULL buf");
    if ((unsigned)DG_STEP_GEMM(flags) >= DG_GEMM_COUNT || (unsigned)DG_STEP_CONV(flags) >= DG_CONV_COUNT)
        return dg__fail(DG_ERR_INVALID, "dg_backend_step_impl: flags 0x%x name no GEMM or convolution choice", flags);
    char name[64];
    if (!be->iface->step_impl) {
        if (DG_STEP_GEMM(flags) != DG_GEMM_DEFAULT || DG_STEP_CONV(flags) != DG_CONV_DEFAULT)
            return dg__fail(DG_ERR_UNSUPPORTED, "%s backend: no GEMM or convolution implementation to choose",
                            dg_backend_name(be));
        snprintf(name, sizeof name, "%s", dg_backend_name(be));
    } else {
        dg_status st = be->iface->step_impl(be, node, flags, name, sizeof name);
        if (st != DG_OK || !node) return st;
    }
    if (!node) return DG_OK;
    size_t len = strlen(name);
    snprintf(buf, n, "%s", name);
    return len < n ? DG_OK
                   : dg__fail(DG_ERR_INVALID, "dg_backend_step_impl: '%s' needs %zu bytes, %zu given", name, len + 1, n);
}

dg_status dg_backend_host_alloc(dg_backend *be, size_t bytes, void **out) {
    if (!be || !out) return null_arg("dg_backend_host_alloc", be ? "out" : "backend");
    *out = NULL;
    if (be->iface->host_alloc) return be->iface->host_alloc(be, bytes ? bytes : 1, out);
    size_t rounded = (bytes + 63) & ~(size_t)63; /* aligned_alloc: a multiple of the alignment */
    if (rounded < bytes || !(*out = aligned_alloc(64, rounded ? rounded : 64)))
        return dg__fail(DG_ERR_OOM, "%s: out of host memory allocating %zu bytes", dg_backend_name(be), bytes);
    return DG_OK;
}

void dg_backend_host_free(dg_backend *be, void *ptr) {
    if (!be || !ptr) return;
    if (be->iface->host_free) be->iface->host_free(be, ptr);
    else free(ptr);
}

dg_status dg_backend_group(dg_backend *const *bes, int n) {
    if (!bes || n < 2) return dg__fail(DG_ERR_INVALID, "dg_backend_group: %d backends: a group needs 2 or more", bes ? n : 0);
    for (int i = 0; i < n; i++) {
        if (!bes[i]) return null_arg("dg_backend_group", "backend");
        if (bes[i]->iface != bes[0]->iface)
            return dg__fail(DG_ERR_INVALID, "dg_backend_group: backend %d is %s, backend 0 %s: one kind per group", i,
                            dg_backend_name(bes[i]), dg_backend_name(bes[0]));
        for (int j = 0; j < i; j++)
            if (bes[j] == bes[i]) return dg__fail(DG_ERR_INVALID, "dg_backend_group: backend %d is backend %d again", i, j);
    }
    if (!bes[0]->iface->group)
        return dg__fail(DG_ERR_UNSUPPORTED, "dg_backend_group: the %s backend has no collectives: data parallelism "
                        "needs GPU backends", dg_backend_name(bes[0]));
    return bes[0]->iface->group(bes, n);
}

dg_status dg_backend_sync(dg_backend *be) {
    if (!be) return null_arg("dg_backend_sync", "backend");
    return be->iface->sync ? be->iface->sync(be) : DG_OK;
}

bool dg_backend_supports(const dg_backend *be, const dg_node *n) {
    if (!be || !n) {
        null_arg("dg_backend_supports", be ? "node" : "backend");
        return false;
    }
    return be->iface->supports(be, n);
}

/* Kernels switch on the step's op and read its buffers without checks. */
dg_status dg_backend_compute(dg_backend *be, const dg_step *s) {
    if (!be || !s || !s->node) return null_arg("dg_backend_compute", !be ? "backend" : !s ? "step" : "step node");
    if (!dg_op_info_get(s->node->op))
        return dg__fail(DG_ERR_INVALID, "dg_backend_compute: node '%s' has unknown op %d", s->node->name,
                        (int)s->node->op);
    return be->iface->compute(be, s);
}

size_t dg_backend_n_allocs(const dg_backend *be) { return be ? be->n_allocs : 0; }

void dg_backend_fail_alloc_after(dg_backend *be, int n) {
    if (be) be->fail_alloc_in = n > 0 ? n : 0;
}

dg_status dg_backend_gather_rows(dg_backend *be, void *dst, const void *src, const int32_t *idx, int n,
                                 size_t row_bytes) {
    if (!be) return null_arg("dg_backend_gather_rows", "backend");
    if (n < 0) return dg__fail(DG_ERR_INVALID, "dg_backend_gather_rows: n is %d, < 0", n);
    if (n > 0 && (!dst || !src || !idx))
        return null_arg("dg_backend_gather_rows", !dst ? "destination" : !src ? "source" : "indices");
    if (!be->iface->gather_rows)
        return dg__fail(DG_ERR_UNSUPPORTED, "%s backend cannot gather rows", dg_backend_name(be));
    return be->iface->gather_rows(be, dst, src, idx, n, row_bytes);
}

/* ---- events ---- */

struct dg_event {
    dg_backend *be;
    void       *dev;   /* the backend's event; NULL: host clock      */
    double      t_ms;  /* host clock at record, when dev is NULL     */
};

static double now_ms(void) { return 1e3 * dg__monotonic_s(); }

static bool has_events(const dg_backend *be) { return be->iface->event_new != NULL; }

dg_status dg_event_new(dg_backend *be, dg_event **out) {
    if (!be || !out) return null_arg("dg_event_new", be ? "out" : "backend");
    *out = NULL;
    dg_event *ev = calloc(1, sizeof *ev);
    if (!ev) return dg__fail(DG_ERR_OOM, "out of memory for an event");
    ev->be = be;
    if (has_events(be)) {
        dg_status st = be->iface->event_new(be, &ev->dev);
        if (st != DG_OK) {
            free(ev);
            return st;
        }
    }
    *out = ev;
    return DG_OK;
}

void dg_event_free(dg_event *ev) {
    if (!ev) return;
    if (ev->dev) ev->be->iface->event_free(ev->be, ev->dev);
    free(ev);
}

dg_status dg_event_record(dg_event *ev) {
    if (!ev) return null_arg("dg_event_record", "event");
    if (ev->dev) return ev->be->iface->event_record(ev->be, ev->dev);
    dg_status st = dg_backend_sync(ev->be);
    ev->t_ms = now_ms();
    return st;
}

dg_status dg_event_elapsed(const dg_event *start, const dg_event *stop, double *ms) {
    if (!start || !stop || !ms) return null_arg("dg_event_elapsed", !start ? "start" : !stop ? "stop" : "ms");
    if (start->be != stop->be) return dg__fail(DG_ERR_INVALID, "dg_event_elapsed: events of two backends");
    if (start->dev) return start->be->iface->event_elapsed(start->be, start->dev, stop->dev, ms);
    *ms = stop->t_ms - start->t_ms;
    return DG_OK;
}
