#include "backend.h"

const char *dg_backend_name(const dg_backend *be) { return be ? be->iface->name(be) : "none"; }

void dg_backend_free(dg_backend *be) {
    if (be) be->iface->free(be);
}

dg_status dg_backend_alloc(dg_backend *be, size_t bytes, void **out) {
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
    return be->iface->upload(be, dst, src, bytes);
}

dg_status dg_backend_download(dg_backend *be, void *dst, const void *src, size_t bytes) {
    return be->iface->download(be, dst, src, bytes);
}

dg_status dg_backend_sync(dg_backend *be) {
    return be->iface->sync ? be->iface->sync(be) : DG_OK;
}

bool dg_backend_supports(const dg_backend *be, dg_op op) { return be->iface->supports(be, op); }

size_t dg_backend_n_allocs(const dg_backend *be) { return be->n_allocs; }

dg_status dg_backend_gather_rows(dg_backend *be, void *dst, const void *src, const int32_t *idx, int n,
                                 size_t row_bytes) {
    if (!be->iface->gather_rows)
        return dg__fail(DG_ERR_UNSUPPORTED, "%s backend cannot gather rows", dg_backend_name(be));
    return be->iface->gather_rows(be, dst, src, idx, n, row_bytes);
}
