/* plan_predict.c: see plan_predict.h. The dry-run backend is a struct on
 * the stack: it never goes through a backend constructor, and nothing but
 * dg_plan_new and dg_plan_free ever sees it. */
#include "runner/plan_predict.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/backend_impl.h"
#include "machine/env.h"

static const char *dry_name(const dg_backend *be) {
    (void)be;
    return "dry-run";
}
static void dry_free(dg_backend *be) { (void)be; }
/* An address no one dereferences: the plan only adds offsets to it. */
static dg_status dry_alloc(dg_backend *be, size_t bytes, void **out) {
    (void)be;
    (void)bytes;
    *out = (void *)(uintptr_t)4096;
    return DG_OK;
}
static void dry_release(dg_backend *be, void *p) {
    (void)be;
    (void)p;
}
static dg_status dry_copy(dg_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    (void)dst;
    (void)src;
    (void)bytes;
    return DG_OK;
}
static bool dry_supports(const dg_backend *be, const dg_node *n) {
    (void)be;
    (void)n;
    return true;
}
static dg_status dry_compute(dg_backend *be, const dg_step *s) {
    (void)be;
    (void)s;
    return DG_ERR_UNSUPPORTED; /* never called: the plan is never run */
}

static const dg_backend_i dry_iface = {
    .version = DG_BACKEND_IFACE_VERSION,
    .name = dry_name,
    .free = dry_free,
    .alloc = dry_alloc,
    .release = dry_release,
    .upload = dry_copy,
    .download = dry_copy,
    .sync = NULL,
    .supports = dry_supports,
    .compute = dry_compute,
};

dg_status bench_plan_predict(dg_graph *g, dg_node *const *outputs, int n_out, dg_plan_stats *out) {
    dg_backend dry = {.iface = &dry_iface};
    dg_plan *p = NULL;
    *out = (dg_plan_stats){0};
    dg_status st = dg_plan_new(&p, g, &dry, outputs, n_out, &(dg_plan_opts){.no_replay = true});
    if (st == DG_OK) *out = dg_plan_stats_get(p);
    dg_plan_free(p);
    return st;
}

double bench_mem_total(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 0;
}

const char *bench_memory_verdict(const dg_plan_stats *ps, double host_extra, bool gpu, char *why, size_t n) {
    double plan = (double)ps->persistent_bytes + (double)ps->arena_bytes;
    double host = plan + host_extra, avail = bench_mem_available(), total = bench_mem_total();
    const char *limit_s = getenv("DG_BENCH_MEM_LIMIT");
    double limit = limit_s && *limit_s ? strtod(limit_s, NULL) : 0;
    if (limit > 0 && plan > limit) {
        snprintf(why, n, "plan predicted %.4g GB (arena %.4g GB) > DG_BENCH_MEM_LIMIT %.4g GB: not tried", plan / 1e9,
                 (double)ps->arena_bytes / 1e9, limit / 1e9);
        return "oom";
    }
    if (gpu) return NULL;
    if (avail > 0 && host > avail) {
        snprintf(why, n, "needs %.4g GB of host memory (plan %.4g GB predicted), %.4g GB available: not tried",
                 host / 1e9, plan / 1e9, avail / 1e9);
        return "oom";
    }
    if (total > 0 && host > total / 2) {
        snprintf(why, n, "needs %.4g GB of host memory (plan %.4g GB predicted), more than half of the machine's "
                 "%.4g GB: not tried", host / 1e9, plan / 1e9, total / 1e9);
        return "skipped";
    }
    return NULL;
}

void bench_plan_failure(const dg_plan_stats *ps, char *why, size_t n) {
    snprintf(why, n, "%s (plan predicted %.4g GB, arena %.4g GB)", dg_last_error(),
             ((double)ps->persistent_bytes + (double)ps->arena_bytes) / 1e9, (double)ps->arena_bytes / 1e9);
}
