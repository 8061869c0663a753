/* cpu_all_reduce.h: the CPU backend's all_reduce nodes across processes
 * (dg_cpu_set_all_reduce, dg_cpu_set_all_reduce_overlap), blocking or
 * overlapped with the steps after them. Overlapped, the nodes are cut
 * into buckets by the rule the GPU's NCCL path follows too
 * (core/comm_bucket.h): a bucket is packed into a buffer of its own and
 * its sum started (the caller's start, MPI_Iallreduce in the bench); the
 * steps after it run meanwhile, each first waiting for the buckets whose
 * tensors it touches and letting the others progress (test); the run's
 * end waits for all, unpacking each bucket's mean into its outputs. */
#ifndef DG_CPU_ALL_REDUCE_H
#define DG_CPU_ALL_REDUCE_H

#include <stdbool.h>

#include "../core/backend.h"
#include "cpu_backend.h"

typedef struct cpu_comm cpu_comm;

/* a blocking sum (sum non-NULL) or an overlapped one (async non-NULL),
 * over `processes` processes; bucket_bytes as dg_cpu_set_all_reduce_overlap's */
dg_status dg__cpu_comm_new(cpu_comm **out, dg_cpu_sum_fn sum, void *sum_arg, const dg_cpu_async_sum *async,
                           int processes, long long bucket_bytes);
/* after waiting for whatever is still in flight (its status dropped) */
void      dg__cpu_comm_free(cpu_comm *m);
/* the node's mean over the processes into its output (m NULL: one
 * process, a copy); overlapped and in_run (a plan's run, which joins at
 * its end), only queued */
dg_status dg__cpu_all_reduce(cpu_comm *m, const dg_step *s, bool in_run);
/* before step s of a run: the queued bucket goes if s touches it, the
 * buckets in flight it touches are waited for, the others tested */
dg_status dg__cpu_comm_before(cpu_comm *m, const dg_step *s);
/* every all-reduce of the run done (the end of a run) */
dg_status dg__cpu_comm_join(cpu_comm *m);

#endif
