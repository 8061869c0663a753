/* cpu_onednn.c: the CPU backend's oneDNN GEMM, a matmul primitive per
 * product shape, kept in a small cache of the backend.
 *
 * Threads: Debian's libdnnl2 is built with DNNL_CPU_RUNTIME=OMP against
 * GCC's libgomp, the OpenMP runtime duograd itself uses. A primitive runs
 * its work in an OpenMP parallel region of omp_get_max_threads() threads
 * of the calling thread, and its brgemm matmul fixes its split of the work
 * for that count when the primitive is created. The backend applies its
 * thread count (omp_set_num_threads, cpu_backend.c apply_threads) before
 * it prepares or runs a product here, so the primitives in a backend's
 * cache are made for, and run with, that backend's count. */
#include "cpu_onednn.h"
#include "cpu_onednn_engine.h"

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/status_internal.h"

/* Creating a primitive costs milliseconds (oneDNN generates its kernel);
 * running a large product is what is timed. A plan's matmuls and the
 * gemm sweep's shape list need a handful of shapes at once: 16 slots,
 * the least recently used one given up for a new shape. */
#define ONEDNN_SLOTS 16

typedef struct slot {
    bool           used;
    bool           implemented; /* false: oneDNN has no kernel for the dtype */
    dg_onednn_gemm key;
    unsigned long  last_use;
    dnnl_primitive_t prim;
    dnnl_memory_t  a, b, c;     /* their data handles set for each product */
} slot;

struct dg_onednn {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    slot          slots[ONEDNN_SLOTS];
    unsigned long clock;
    long          created, runs;
};

static dg_status dnnl_fail(dnnl_status_t st, const char *what, const dg_onednn_gemm *g) {
    return dg__fail(st == dnnl_out_of_memory ? DG_ERR_OOM : DG_ERR_BACKEND,
                    "oneDNN: %s (%s, %d x %d x %d, batch %d, ta %d tb %d): %s", what, dg_dtype_name(g->dtype), g->m,
                    g->n, g->k, g->batch, g->ta, g->tb, dnnl_status2str(st));
}

dg_status dg__onednn_engine_new(dnnl_engine_t *engine, dnnl_stream_t *stream) {
    dnnl_status_t st = dnnl_engine_create(engine, dnnl_cpu, 0);
    if (st == dnnl_success) {
        st = dnnl_stream_create(stream, *engine, dnnl_stream_default_flags);
        if (st != dnnl_success) dnnl_engine_destroy(*engine);
    }
    return st == dnnl_success ? DG_OK : dg__fail(DG_ERR_BACKEND, "oneDNN: no CPU engine: %s", dnnl_status2str(st));
}

dg_status dg__onednn_new(dg_onednn **out) {
    *out = NULL;
    dg_onednn *o = calloc(1, sizeof *o);
    if (!o) return dg__fail(DG_ERR_OOM, "oneDNN: out of memory for the primitive cache");
    dg_status st = dg__onednn_engine_new(&o->engine, &o->stream);
    if (st != DG_OK) {
        free(o);
        return st;
    }
    *out = o;
    return DG_OK;
}

static void slot_clear(slot *s) {
    dnnl_primitive_destroy(s->prim); /* each accepts NULL */
    dnnl_memory_destroy(s->a);
    dnnl_memory_destroy(s->b);
    dnnl_memory_destroy(s->c);
    memset(s, 0, sizeof *s);
}

void dg__onednn_free(dg_onednn *o) {
    if (!o) return;
    for (int i = 0; i < ONEDNN_SLOTS; i++) slot_clear(&o->slots[i]);
    dnnl_stream_destroy(o->stream);
    dnnl_engine_destroy(o->engine);
    free(o);
}

static bool same_gemm(const dg_onednn_gemm *x, const dg_onednn_gemm *y) {
    return x->dtype == y->dtype && x->ta == y->ta && x->tb == y->tb && x->batch == y->batch && x->m == y->m &&
           x->n == y->n && x->k == y->k && x->out == y->out;
}

/* A [batch, rows, cols] operand as oneDNN sees it: logical dims of op(X),
 * element strides of X as stored (transposed: the two inner swapped) */
static void operand_md(dnnl_memory_desc_t *md, dnnl_data_type_t t, int batch, int rows, int cols, bool trans) {
    dnnl_dims_t dims = {batch, rows, cols};
    dnnl_dims_t strides = {(dnnl_dim_t)rows * cols, trans ? 1 : cols, trans ? rows : 1};
    dnnl_memory_desc_init_by_strides(md, 3, dims, t, strides);
}

/* slot s filled with g's primitive and memory objects; s->implemented
 * false where oneDNN has none for g's dtype */
static dg_status slot_fill(dg_onednn *o, slot *s, const dg_onednn_gemm *g) {
    dnnl_data_type_t t = g->dtype == DG_BF16 ? dnnl_bf16 : g->dtype == DG_F16 ? dnnl_f16 : dnnl_f32;
    dnnl_memory_desc_t a, b, c;
    operand_md(&a, t, g->batch, g->m, g->k, g->ta);
    operand_md(&b, t, g->batch, g->k, g->n, g->tb);
    operand_md(&c, g->out == DG_BF16 ? dnnl_bf16 : dnnl_f32, g->batch, g->m, g->n, false);
    dnnl_matmul_desc_t desc;
    dnnl_status_t st = dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c);
    if (st != dnnl_success) return dnnl_fail(st, "matmul descriptor", g);
    dnnl_primitive_desc_t pd;
    st = dnnl_primitive_desc_create(&pd, &desc, NULL, o->engine, NULL);
    s->used = true;
    s->key = *g;
    if (st == dnnl_unimplemented) return DG_OK;
    if (st != dnnl_success) return dnnl_fail(st, "matmul primitive descriptor", g);
    st = dnnl_primitive_create(&s->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st == dnnl_success) st = dnnl_memory_create(&s->a, &a, o->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = dnnl_memory_create(&s->b, &b, o->engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = dnnl_memory_create(&s->c, &c, o->engine, DNNL_MEMORY_NONE);
    if (st != dnnl_success) return dnnl_fail(st, "matmul primitive", g);
    s->implemented = true;
    return DG_OK;
}

/* g's slot: found, or made in a free or the least recently used one */
static dg_status find_slot(dg_onednn *o, const dg_onednn_gemm *g, slot **out) {
    slot *victim = &o->slots[0];
    for (int i = 0; i < ONEDNN_SLOTS; i++) {
        slot *s = &o->slots[i];
        if (s->used && same_gemm(&s->key, g)) {
            s->last_use = ++o->clock;
            *out = s;
            return DG_OK;
        }
        if (!s->used ? victim->used : victim->used && s->last_use < victim->last_use) victim = s;
    }
    if (g->dtype != DG_F32 && g->dtype != DG_BF16 && g->dtype != DG_F16)
        return dg__fail(DG_ERR_UNSUPPORTED, "oneDNN: no GEMM of %s operands", dg_dtype_name(g->dtype));
    if (g->out != DG_F32 && (g->out != DG_BF16 || g->dtype != DG_BF16))
        return dg__fail(DG_ERR_UNSUPPORTED, "oneDNN: no GEMM of %s operands with a %s output", dg_dtype_name(g->dtype),
                        dg_dtype_name(g->out));
    slot_clear(victim);
    dg_status st = slot_fill(o, victim, g);
    if (st != DG_OK) {
        slot_clear(victim);
        return st;
    }
    victim->last_use = ++o->clock;
    o->created++;
    *out = victim;
    return DG_OK;
}

dg_status dg__onednn_prepare(dg_onednn *o, const dg_onednn_gemm *g, bool *ok) {
    slot *s;
    dg_status st = find_slot(o, g, &s);
    *ok = st == DG_OK && s->implemented;
    return st;
}

dg_status dg__onednn_gemm(dg_onednn *o, const dg_onednn_gemm *g, const void *A, const void *B, void *C) {
    slot *s;
    dg_status st = find_slot(o, g, &s);
    if (st != DG_OK) return st;
    if (!s->implemented)
        return dg__fail(DG_ERR_UNSUPPORTED, "oneDNN: no matmul of %s operands on this CPU", dg_dtype_name(g->dtype));
    dnnl_status_t ds = dnnl_memory_set_data_handle(s->a, (void *)A);
    if (ds == dnnl_success) ds = dnnl_memory_set_data_handle(s->b, (void *)B);
    if (ds == dnnl_success) ds = dnnl_memory_set_data_handle(s->c, C);
    if (ds != dnnl_success) return dnnl_fail(ds, "operands", g);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, s->a}, {DNNL_ARG_WEIGHTS, s->b}, {DNNL_ARG_DST, s->c}};
    ds = dnnl_primitive_execute(s->prim, o->stream, 3, args);
    if (ds == dnnl_success) ds = dnnl_stream_wait(o->stream);
    o->runs += ds == dnnl_success;
    return ds == dnnl_success ? DG_OK : dnnl_fail(ds, "matmul", g);
}

void dg__onednn_counts(const dg_onednn *o, long *created, long *runs) {
    *created = o ? o->created : 0;
    *runs = o ? o->runs : 0;
}

bool dg__onednn_bf16_pays(void) {
    /* the ISA values are nested bit sets: AMX's holds AVX512-BF16's bits */
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), amx = (unsigned)dnnl_cpu_isa_avx512_core_amx;
    return (isa & amx) == amx;
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41:           return "sse41";
    case dnnl_cpu_isa_avx:             return "avx";
    case dnnl_cpu_isa_avx2:            return "avx2";
    case dnnl_cpu_isa_avx2_vnni:       return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:      return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:     return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_all:             break;
    }
    return "other";
}

const char *dg__onednn_info(char *buf, size_t n) {
    const dnnl_version_t *v = dnnl_version();
    unsigned rt = v->cpu_runtime;
    snprintf(buf, n, "oneDNN %d.%d.%d (CPU runtime: %s; ISA: %s)", v->major, v->minor, v->patch,
             rt == DNNL_RUNTIME_OMP ? "OpenMP" : rt == DNNL_RUNTIME_TBB ? "TBB" : rt == DNNL_RUNTIME_SEQ ? "sequential"
                                                                                                     : "threadpool",
             isa_name(dnnl_get_effective_cpu_isa()));
    return buf;
}
