/* plan_predict.h: a plan's memory, without the memory. The graph is
 * planned by dg_plan_new itself (the same liveness, placement and
 * alignment as a real plan) on a backend that hands out addresses but no
 * bytes and runs nothing, so a sweep learns what a plan would take before
 * it asks a device for it: the attention and transformer sweeps write
 * rows that cannot fit as `oom` or `skipped` with the bytes in the note. */
#ifndef DG_BENCH_PLAN_PREDICT_H
#define DG_BENCH_PLAN_PREDICT_H

#include "core/plan.h"

/* *out: dg_plan_stats of a plan of outputs on g (no backend memory is
 * touched; host memory: one buffer of the largest persistent leaf, as
 * dg_plan_new's leaf initialisation needs). */
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
