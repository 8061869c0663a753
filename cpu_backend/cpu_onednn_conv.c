/* cpu_onednn_conv.c: the CPU backend's oneDNN convolutions, a primitive
 * per (direction, geometry, dtype, layout, threads) in a table of the
 * backend that grows on demand (cpu_onednn_conv.h).
 *
 * A run, in the step's scratch laid out as
 *   [widened a, b, out (f32; 16-bit without a kernel only)]
 *   [blocked copies of a, b, out (blocked only, each where oneDNN's
 *    format differs from ours)]
 *   [scratchpad: oneDNN's own working memory, the larger of the
 *    convolution's and its reorders' (dnnl_scratchpad_mode_user)],
 * each part 64-byte aligned: inputs widened, inputs reordered, the
 * convolution, the output reordered back, the output rounded. Nothing is
 * allocated per run. Threads as cpu_onednn.c says: the backend applies its
 * count before it prepares or runs one. */
#include "cpu_onednn_conv.h"
#include "cpu_onednn_engine.h"

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../core/status_internal.h"
#include "cpu_kernels.h"

/* one of the primitive's three operands (a, b: the node's inputs; out) */
typedef struct operand {
    int              arg;     /* DNNL_ARG_* of the convolution           */
    int64_t          numel;   /* elements, where widened                 */
    dnnl_memory_t    user;    /* ours: NCHW/OIHW, the dtype run          */
    dnnl_memory_t    inner;   /* oneDNN's format, NULL when ours         */
    dnnl_primitive_t reorder; /* user -> inner (inputs), inner -> user (out) */
    size_t           wide_off, inner_off; /* in the scratch               */
} operand;

typedef struct entry {
    dg_onednn_conv   key;
    bool             widened;
    dnnl_primitive_t prim;
    operand          io[3];
    dnnl_memory_t    pad;     /* the scratchpad, NULL when none          */
    size_t           pad_off, scratch;
    char             impl[64];
} entry;

struct dg_onednn_convs {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    entry       **table;      /* pointers: an entry's impl stays put as it grows */
    int           n, cap;
    long          created, runs;
};

static dg_status conv_fail(dnnl_status_t st, const char *what, const dg_onednn_conv *k) {
    return dg__fail(st == dnnl_out_of_memory ? DG_ERR_OOM : st == dnnl_unimplemented ? DG_ERR_UNSUPPORTED
                                                                                      : DG_ERR_BACKEND,
                    "oneDNN: %s of %s (%s, x [%lld,%lld,%lld,%lld], y [%lld,%lld,%lld,%lld], kernel %lldx%lld, stride "
                    "%lldx%lld, pad %lldx%lld, dilation %lldx%lld, groups %lld): %s",
                    what, dg_op_name(k->op), dg_dtype_name(k->dtype), (long long)k->n, (long long)k->c,
                    (long long)k->h, (long long)k->w, (long long)k->n, (long long)k->o, (long long)k->oh,
                    (long long)k->ow, (long long)k->kh, (long long)k->kw, (long long)k->sh, (long long)k->sw,
                    (long long)k->ph, (long long)k->pw, (long long)k->dh, (long long)k->dw, (long long)k->groups,
                    dnnl_status2str(st));
}

dg_status dg__onednn_convs_new(dg_onednn_convs **out) {
    *out = NULL;
    dg_onednn_convs *o = calloc(1, sizeof *o);
    if (!o) return dg__fail(DG_ERR_OOM, "oneDNN: out of memory for the convolution cache");
    dg_status st = dg__onednn_engine_new(&o->engine, &o->stream);
    if (st != DG_OK) {
        free(o);
        return st;
    }
    *out = o;
    return DG_OK;
}

static void entry_free(entry *e) {
    if (!e) return;
    dnnl_primitive_destroy(e->prim); /* each accepts NULL */
    for (int i = 0; i < 3; i++) {
        dnnl_memory_destroy(e->io[i].user);
        dnnl_memory_destroy(e->io[i].inner);
        dnnl_primitive_destroy(e->io[i].reorder);
    }
    dnnl_memory_destroy(e->pad);
    free(e);
}

void dg__onednn_convs_free(dg_onednn_convs *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) entry_free(o->table[i]);
    free(o->table);
    dnnl_stream_destroy(o->stream);
    dnnl_engine_destroy(o->engine);
    free(o);
}

static bool same_conv(const dg_onednn_conv *x, const dg_onednn_conv *y) {
    return x->op == y->op && x->dtype == y->dtype && x->blocked == y->blocked && x->threads == y->threads &&
           x->n == y->n && x->c == y->c && x->h == y->h && x->w == y->w && x->o == y->o && x->oh == y->oh &&
           x->ow == y->ow && x->kh == y->kh && x->kw == y->kw && x->sh == y->sh && x->sw == y->sw &&
           x->ph == y->ph && x->pw == y->pw && x->dh == y->dh && x->dw == y->dw && x->groups == y->groups;
}

static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

/* The three descriptors in our layout (plain) or oneDNN's choice (any):
 * x [n,c,h,w] nchw, y [n,o,oh,ow] nchw, w oihw or, grouped, goihw
 * [g, o/g, c/g, kh, kw] (the same bytes as our [o, c/g, kh, kw]). */
static void conv_mds(const dg_onednn_conv *k, dnnl_data_type_t t, bool any, dnnl_memory_desc_t *x,
                     dnnl_memory_desc_t *w, dnnl_memory_desc_t *y) {
    dnnl_dims_t xd = {k->n, k->c, k->h, k->w}, yd = {k->n, k->o, k->oh, k->ow};
    dnnl_memory_desc_init_by_tag(x, 4, xd, t, any ? dnnl_format_tag_any : dnnl_nchw);
    dnnl_memory_desc_init_by_tag(y, 4, yd, t, any ? dnnl_format_tag_any : dnnl_nchw);
    if (k->groups > 1) {
        dnnl_dims_t wd = {k->groups, k->o / k->groups, k->c / k->groups, k->kh, k->kw};
        dnnl_memory_desc_init_by_tag(w, 5, wd, t, any ? dnnl_format_tag_any : dnnl_goihw);
    } else {
        dnnl_dims_t wd = {k->o, k->c, k->kh, k->kw};
        dnnl_memory_desc_init_by_tag(w, 4, wd, t, any ? dnnl_format_tag_any : dnnl_oihw);
    }
}

/* k's convolution descriptors: forward training (the hint of the backward
 * ones) and, for a backward op, its own. oneDNN counts dilation from 0
 * (ours - 1) and takes the right/bottom padding that makes the output's
 * size come out exactly: (oh - 1) sh + (kh - 1) dh + 1 - h - ph, which is
 * ph or less where the graph's division dropped a remainder. */
static dnnl_status_t conv_descs(const dg_onednn_conv *k, const dnnl_memory_desc_t *x, const dnnl_memory_desc_t *w,
                                const dnnl_memory_desc_t *y, dnnl_convolution_desc_t *fwd,
                                dnnl_convolution_desc_t *bwd) {
    dnnl_dims_t strides = {k->sh, k->sw}, dil = {k->dh - 1, k->dw - 1}, pl = {k->ph, k->pw};
    dnnl_dims_t pr = {(k->oh - 1) * k->sh + (k->kh - 1) * k->dh + 1 - k->h - k->ph,
                      (k->ow - 1) * k->sw + (k->kw - 1) * k->dw + 1 - k->w - k->pw};
    dnnl_status_t st = dnnl_dilated_convolution_forward_desc_init(fwd, dnnl_forward_training, dnnl_convolution_direct,
                                                                  x, w, NULL, y, strides, dil, pl, pr);
    if (st != dnnl_success) return st;
    switch (k->op) {
    case DG_OP_CONV2D_BACKWARD_DATA:
        return dnnl_dilated_convolution_backward_data_desc_init(bwd, dnnl_convolution_direct, x, w, y, strides, dil,
                                                                pl, pr);
    case DG_OP_CONV2D_BACKWARD_WEIGHT:
        return dnnl_dilated_convolution_backward_weights_desc_init(bwd, dnnl_convolution_direct, x, w, NULL, y,
                                                                   strides, dil, pl, pr);
    default: return dnnl_success;
    }
}

/* k's primitive descriptor for data type t, with the user scratchpad;
 * dnnl_unimplemented where oneDNN has no kernel for t */
static dnnl_status_t conv_pd(dg_onednn_convs *o, const dg_onednn_conv *k, dnnl_data_type_t t,
                             dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd) {
    dnnl_memory_desc_t x, w, y;
    conv_mds(k, t, k->blocked, &x, &w, &y);
    dnnl_convolution_desc_t fwd, bwd;
    dnnl_status_t st = conv_descs(k, &x, &w, &y, &fwd, &bwd);
    if (st != dnnl_success) return st;
    if (k->op == DG_OP_CONV2D) return dnnl_primitive_desc_create(pd, &fwd, attr, o->engine, NULL);
    dnnl_primitive_desc_t hint;
    st = dnnl_primitive_desc_create(&hint, &fwd, NULL, o->engine, NULL);
    if (st != dnnl_success) return st;
    st = dnnl_primitive_desc_create(pd, &bwd, attr, o->engine, hint);
    dnnl_primitive_desc_destroy(hint);
    return st;
}

/* operand i's memory objects and, where oneDNN's format is not ours, its
 * reorder; *pad_bytes grown to the reorder's scratchpad; *off: the next
 * free byte of the blocked copies */
static dnnl_status_t operand_fill(dg_onednn_convs *o, operand *op, const dnnl_memory_desc_t *user,
                                  const dnnl_memory_desc_t *inner, bool input, dnnl_primitive_attr_t attr,
                                  size_t *off, size_t *pad_bytes) {
    dnnl_status_t st = dnnl_memory_create(&op->user, user, o->engine, DNNL_MEMORY_NONE);
    if (st != dnnl_success || dnnl_memory_desc_equal(user, inner)) return st;
    st = dnnl_memory_create(&op->inner, inner, o->engine, DNNL_MEMORY_NONE);
    if (st != dnnl_success) return st;
    op->inner_off = *off;
    *off = align64(*off + dnnl_memory_desc_get_size(inner));
    dnnl_primitive_desc_t rpd;
    st = input ? dnnl_reorder_primitive_desc_create(&rpd, user, o->engine, inner, o->engine, attr)
               : dnnl_reorder_primitive_desc_create(&rpd, inner, o->engine, user, o->engine, attr);
    if (st != dnnl_success) return st;
    size_t pad = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(rpd, dnnl_query_scratchpad_md, 0));
    if (pad > *pad_bytes) *pad_bytes = pad;
    st = dnnl_primitive_create(&op->reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    return st;
}

/* e filled for its key: the primitive of the key's dtype, or (none for it)
 * the float32 one with widened operands */
static dg_status entry_fill(dg_onednn_convs *o, entry *e) {
    const dg_onednn_conv *k = &e->key;
    dnnl_data_type_t t = k->dtype == DG_BF16 ? dnnl_bf16 : k->dtype == DG_F16 ? dnnl_f16 : dnnl_f32;
    dnnl_primitive_attr_t attr;
    dnnl_status_t st = dnnl_primitive_attr_create(&attr);
    if (st != dnnl_success) return conv_fail(st, "attributes", k);
    st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_primitive_desc_t pd = NULL;
    if (st == dnnl_success) st = conv_pd(o, k, t, attr, &pd);
    if (st == dnnl_unimplemented && t != dnnl_f32) {
        e->widened = true;
        t = dnnl_f32;
        st = conv_pd(o, k, t, attr, &pd);
    }
    if (st != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return conv_fail(st, "primitive descriptor", k);
    }
    /* the operands in the node's order: a, b, out */
    dnnl_memory_desc_t x, w, y;
    conv_mds(k, t, false, &x, &w, &y);
    const dnnl_memory_desc_t *user[3];
    dnnl_query_t q[3];
    int args[3];
    switch (k->op) {
    case DG_OP_CONV2D_BACKWARD_DATA:
        user[0] = &y; user[1] = &w; user[2] = &x;
        q[0] = dnnl_query_diff_dst_md; q[1] = dnnl_query_weights_md; q[2] = dnnl_query_diff_src_md;
        args[0] = DNNL_ARG_DIFF_DST; args[1] = DNNL_ARG_WEIGHTS; args[2] = DNNL_ARG_DIFF_SRC;
        break;
    case DG_OP_CONV2D_BACKWARD_WEIGHT:
        user[0] = &y; user[1] = &x; user[2] = &w;
        q[0] = dnnl_query_diff_dst_md; q[1] = dnnl_query_src_md; q[2] = dnnl_query_diff_weights_md;
        args[0] = DNNL_ARG_DIFF_DST; args[1] = DNNL_ARG_SRC; args[2] = DNNL_ARG_DIFF_WEIGHTS;
        break;
    default:
        user[0] = &x; user[1] = &w; user[2] = &y;
        q[0] = dnnl_query_src_md; q[1] = dnnl_query_weights_md; q[2] = dnnl_query_dst_md;
        args[0] = DNNL_ARG_SRC; args[1] = DNNL_ARG_WEIGHTS; args[2] = DNNL_ARG_DST;
        break;
    }
    size_t off = 0;
    for (int i = 0; i < 3 && e->widened; i++) {
        e->io[i].numel = (int64_t)(dnnl_memory_desc_get_size(user[i]) / sizeof(float));
        e->io[i].wide_off = off;
        off = align64(off + dnnl_memory_desc_get_size(user[i]));
    }
    const dnnl_memory_desc_t *pad_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t pad = dnnl_memory_desc_get_size(pad_md);
    for (int i = 0; i < 3 && st == dnnl_success; i++) {
        e->io[i].arg = args[i];
        st = operand_fill(o, &e->io[i], user[i], dnnl_primitive_desc_query_md(pd, q[i], 0), i < 2, attr, &off, &pad);
    }
    dnnl_primitive_attr_destroy(attr);
    if (st == dnnl_success && pad) {
        dnnl_memory_desc_t pmd;
        dnnl_dims_t pd1 = {(dnnl_dim_t)pad};
        dnnl_memory_desc_init_by_tag(&pmd, 1, pd1, dnnl_u8, dnnl_a);
        st = dnnl_memory_create(&e->pad, &pmd, o->engine, DNNL_MEMORY_NONE);
    }
    e->pad_off = off;
    e->scratch = off + pad;
    const char *impl = NULL;
    if (st == dnnl_success) st = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    if (st == dnnl_success) {
        strncpy(e->impl, impl ? impl : "?", sizeof e->impl - 1);
        st = dnnl_primitive_create(&e->prim, pd);
    }
    dnnl_primitive_desc_destroy(pd);
    return st == dnnl_success ? DG_OK : conv_fail(st, "primitive", k);
}

/* k's entry: found, or made and added to the table */
static dg_status find_entry(dg_onednn_convs *o, const dg_onednn_conv *k, entry **out) {
    for (int i = 0; i < o->n; i++)
        if (same_conv(&o->table[i]->key, k)) {
            *out = o->table[i];
            return DG_OK;
        }
    if (k->dtype != DG_F32 && k->dtype != DG_BF16 && k->dtype != DG_F16)
        return dg__fail(DG_ERR_UNSUPPORTED, "oneDNN: no convolution of %s operands", dg_dtype_name(k->dtype));
    if (k->op != DG_OP_CONV2D && k->op != DG_OP_CONV2D_BACKWARD_DATA && k->op != DG_OP_CONV2D_BACKWARD_WEIGHT)
        return dg__fail(DG_ERR_INVALID, "oneDNN: %s is not a convolution", dg_op_name(k->op));
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 64;
        entry **t = realloc(o->table, (size_t)cap * sizeof *t);
        if (!t) return dg__fail(DG_ERR_OOM, "oneDNN: out of memory growing the convolution cache to %d", cap);
        o->table = t;
        o->cap = cap;
    }
    entry *e = calloc(1, sizeof *e);
    if (!e) return dg__fail(DG_ERR_OOM, "oneDNN: out of memory for a convolution's primitive");
    e->key = *k;
    dg_status st = entry_fill(o, e);
    if (st != DG_OK) {
        entry_free(e);
        return st;
    }
    o->table[o->n++] = e;
    o->created++;
    *out = e;
    return DG_OK;
}

dg_status dg__onednn_conv_prepare(dg_onednn_convs *o, const dg_onednn_conv *k, dg_onednn_conv_info *info) {
    entry *e;
    dg_status st = find_entry(o, k, &e);
    if (st != DG_OK) return st;
    *info = (dg_onednn_conv_info){e->scratch, e->widened, e->impl};
    return DG_OK;
}

/* op's reorder: ours into oneDNN's format (an input) or back (the output) */
static dnnl_status_t reorder(dg_onednn_convs *o, const entry *e, const operand *op, bool input) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, input ? op->user : op->inner},
                               {DNNL_ARG_TO, input ? op->inner : op->user},
                               {DNNL_ARG_SCRATCHPAD, e->pad}};
    return dnnl_primitive_execute(op->reorder, o->stream, e->pad ? 3 : 2, args);
}

dg_status dg__onednn_conv_run(dg_onednn_convs *o, const dg_onednn_conv *k, const void *a, const void *b, void *out,
                              void *scratch) {
    entry *e;
    dg_status gst = find_entry(o, k, &e);
    if (gst != DG_OK) return gst;
    if (e->scratch && !scratch)
        return dg__fail(DG_ERR_INVALID, "oneDNN: %s needs %zu bytes of scratch, none given", dg_op_name(k->op),
                        e->scratch);
    char *s = scratch;
    void *ptr[3] = {(void *)a, (void *)b, out};
    if (e->widened) {
        dg__cpu_widen(k->dtype, a, (float *)(s + e->io[0].wide_off), e->io[0].numel);
        dg__cpu_widen(k->dtype, b, (float *)(s + e->io[1].wide_off), e->io[1].numel);
        for (int i = 0; i < 3; i++) ptr[i] = s + e->io[i].wide_off;
    }
    dnnl_status_t st = e->pad ? dnnl_memory_set_data_handle(e->pad, s + e->pad_off) : dnnl_success;
    dnnl_exec_arg_t args[4];
    for (int i = 0; i < 3 && st == dnnl_success; i++) {
        operand *op = &e->io[i];
        st = dnnl_memory_set_data_handle(op->user, ptr[i]);
        if (st == dnnl_success && op->inner) st = dnnl_memory_set_data_handle(op->inner, s + op->inner_off);
        if (st == dnnl_success && op->inner && i < 2) st = reorder(o, e, op, true);
        args[i] = (dnnl_exec_arg_t){op->arg, op->inner ? op->inner : op->user};
    }
    args[3] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->pad};
    if (st == dnnl_success) st = dnnl_primitive_execute(e->prim, o->stream, e->pad ? 4 : 3, args);
    if (st == dnnl_success && e->io[2].inner) st = reorder(o, e, &e->io[2], false);
    if (st == dnnl_success) st = dnnl_stream_wait(o->stream);
    if (st != dnnl_success) return conv_fail(st, "run", k);
    if (e->widened) dg__cpu_narrow(k->dtype, (const float *)ptr[2], out, e->io[2].numel);
    o->runs++;
    return DG_OK;
}

void dg__onednn_conv_counts(const dg_onednn_convs *o, long *created, long *runs) {
    *created = o ? o->created : 0;
    *runs = o ? o->runs : 0;
}
