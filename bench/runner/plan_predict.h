/* plan_predict.h: a plan's memory, without the memory. The graph is laid
 * out by the library's dry run (dg_plan_estimate: the same liveness,
 * placement and alignment as dg_plan_new, no backend memory), so a sweep
 * learns what a plan would take before it asks a device for it: the
 * attention and transformer sweeps write rows that cannot fit as `oom` or
 * `skipped` with the bytes in the note. */
#ifndef DG_BENCH_PLAN_PREDICT_H
#define DG_BENCH_PLAN_PREDICT_H

#include "core/plan.h"

/* *out: dg_plan_stats of a plan of outputs on g for no backend in
 * particular (dg_plan_estimate with a NULL backend: the portable
 * algorithms' scratch); no backend memory is touched. */
dg_status bench_plan_predict(dg_graph *g, dg_node *const *outputs, int n_out, dg_plan_stats *out);

/* Bytes of host memory of this machine (physical pages); 0 when unknown. */
double bench_mem_total(void);

/* Whether a row whose plan is predicted as *ps is tried: NULL (try it), or
 * the status of its row, with the reason in why:
 *  - "oom" where DG_BENCH_MEM_LIMIT=BYTES is set (a knob for tests, read
 *    on every call) and the plan (persistent + arena) is above BYTES, on
 *    either backend;
 *  - on the CPU (gpu false), "oom" where the plan and host_extra (the
 *    row's other host buffers) need more than the available host memory,
 *    "skipped" where they need more than half of the machine's.
 * A GPU plan is otherwise tried: the device's allocation that fails is
 * the oom row. */
const char *bench_memory_verdict(const dg_plan_stats *ps, double host_extra, bool gpu, char *why, size_t n);

/* A failed row's note: the last error, and what the plan was predicted
 * to need (*ps), so an oom row says how far it was from fitting. */
void bench_plan_failure(const dg_plan_stats *ps, char *why, size_t n);

#endif
