/* plan_predict.c: see plan_predict.h. */
#include "runner/plan_predict.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "machine/env.h"

dg_status bench_plan_predict(dg_graph *g, dg_node *const *outputs, int n_out, dg_plan_stats *out) {
    return dg_plan_estimate(g, NULL, outputs, n_out, &(dg_plan_opts){.no_replay = true}, out);
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
