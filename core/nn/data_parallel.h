/* data_parallel.h: one training step replicated over n backends, one per
 * device. The same graph (a step built by dg_train_step_build_ex with
 * all_reduce) is planned on each backend, the backends are joined into an
 * all-reduce group (NCCL on GPUs), and every replica runs its plan on its
 * own slice of the global batch, on its own host thread. Each gradient is
 * averaged over the replicas by its all_reduce node, placed right after the
 * gradient's last contribution, so the exchange overlaps the rest of the
 * backward (GPU backends pack the queued gradients into buckets, one NCCL
 * call each: dg_gpu_opts.all_reduce_bucket_bytes); every replica then
 * applies the same update to the same
 * parameters (the same seed gave the same initial ones): they stay equal.
 * The mean of the replicas' losses is the global batch's mean loss.
 *
 * Running statistics (batch norm) are each replica's own: they come from
 * its slice of the batch and are not exchanged. */
#ifndef DG_NN_DATA_PARALLEL_H
#define DG_NN_DATA_PARALLEL_H

#include "../plan.h"
#include "train_step.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_DP_MAX_REPLICAS 16

typedef struct dg_dp dg_dp;

/* Plans outputs[0..n_out) of g (a training step's: dg_train_step.outputs,
 * built for the per-replica batch with all_reduce when n >= 2; or any
 * graph with all_reduce nodes) on each of bes[0..n), then groups the
 * backends when n >= 2 (dg_backend_group: fresh backends, one per device).
 * The caller keeps g and the backends alive until dg_dp_free, and sets each
 * replica's inputs on dg_dp_plan(dp, i). DG_ERR_INVALID for NULL
 * arguments, n outside 1..DG_DP_MAX_REPLICAS, or (n >= 2) a parameter
 * update among the outputs whose gradient is not all-reduced; what
 * dg_plan_new and dg_backend_group refuse, with their status. */
dg_status dg_dp_new(dg_dp **out, dg_backend *const *bes, int n, dg_graph *g, dg_node *const *outputs, int n_out,
                    const dg_plan_opts *opts);
int       dg_dp_replicas(const dg_dp *dp);
dg_plan  *dg_dp_plan(const dg_dp *dp, int i);       /* NULL outside 0..n-1 */
/* Queues one step on every replica, as dg_plan_run queues one plan (the
 * devices may still be working when it returns; dg_dp_sync waits). While
 * a replica's plan is not yet a captured graph (its first run, or plans
 * that do not replay), replica 0 is queued from the calling thread and the
 * others from threads of the dp's own, made once (NCCL's host calls need
 * every replica's turn at once); once all are captured, the calling
 * thread launches every replica's graph. The first failing replica's
 * status; the others' runs still complete or fail on their own. */
dg_status dg_dp_run(dg_dp *dp);
/* Waits for every replica's device; the first failing replica's status. */
dg_status dg_dp_sync(dg_dp *dp);
/* The mean over the replicas of one-element node `scalar` after the last
 * run (a step's loss: the global batch's mean loss). */
dg_status dg_dp_mean(dg_dp *dp, const dg_node *scalar, float *mean);
void      dg_dp_free(dg_dp *dp);

#ifdef __cplusplus
}
#endif
#endif
