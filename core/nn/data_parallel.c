/* data_parallel.c: the replicas' plans, their group, and the threads that
 * queue them together (data_parallel.h): NCCL's collectives need every
 * replica's work queued, which one thread per device gives without
 * ordering constraints between them. */
#include "data_parallel.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_internal.h"
#include "../status_internal.h"

struct dg_dp {
    int           n;
    dg_backend   *be[DG_DP_MAX_REPLICAS];
    dg_plan      *plan[DG_DP_MAX_REPLICAS];
    /* the workers (replicas 1..n-1): a run is generation `gen`; each
     * worker runs once per generation and counts itself into `done` */
    pthread_t       thread[DG_DP_MAX_REPLICAS];
    int             n_threads;
    pthread_mutex_t mu;
    pthread_cond_t  go, finished;
    unsigned long   gen;
    int             done;
    bool            quit, sync_made;
    dg_status       st[DG_DP_MAX_REPLICAS];
    char            why[DG_DP_MAX_REPLICAS][256]; /* a worker's error: dg_last_error is per thread */
};

/* replica i's status, and its message (dg_last_error is per thread) */
static void record(dg_dp *dp, int i, dg_status st) {
    dp->st[i] = st;
    if (st != DG_OK) snprintf(dp->why[i], sizeof dp->why[i], "%s", dg_last_error());
}

static void run_replica(dg_dp *dp, int i) { record(dp, i, dg_plan_run(dp->plan[i])); }

/* the first failing replica's status, with its message */
static dg_status first_failure(const dg_dp *dp) {
    for (int i = 0; i < dp->n; i++)
        if (dp->st[i] != DG_OK) return dg__fail(dp->st[i], "replica %d: %s", i, dp->why[i]);
    return DG_OK;
}

typedef struct worker_arg { dg_dp *dp; int i; } worker_arg;

static void *worker(void *p) {
    dg_dp *dp = ((worker_arg *)p)->dp;
    int i = ((worker_arg *)p)->i;
    free(p);
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&dp->mu);
        while (dp->gen == seen && !dp->quit) pthread_cond_wait(&dp->go, &dp->mu);
        bool quit = dp->quit;
        seen = dp->gen;
        pthread_mutex_unlock(&dp->mu);
        if (quit) return NULL;
        run_replica(dp, i);
        pthread_mutex_lock(&dp->mu);
        dp->done++;
        pthread_cond_signal(&dp->finished);
        pthread_mutex_unlock(&dp->mu);
    }
}

static dg_status start_workers(dg_dp *dp) {
    if (pthread_mutex_init(&dp->mu, NULL) || pthread_cond_init(&dp->go, NULL) || pthread_cond_init(&dp->finished, NULL))
        return dg__fail(DG_ERR_OOM, "data parallel: cannot make the workers' lock");
    dp->sync_made = true;
    for (int i = 1; i < dp->n; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a) return dg__fail(DG_ERR_OOM, "data parallel: out of memory for a worker");
        *a = (worker_arg){dp, i};
        if (pthread_create(&dp->thread[i], NULL, worker, a)) {
            free(a);
            return dg__fail(DG_ERR_OOM, "data parallel: cannot start the thread of replica %d", i);
        }
        dp->n_threads = i;
    }
    return DG_OK;
}

/* whether op is a parameter's update that reads its gradient as input 1 */
static bool updates_with_gradient(dg_op op) {
    switch (op) {
    case DG_OP_SGD_UPDATE: case DG_OP_MOMENTUM_UPDATE: case DG_OP_ADAM_UPDATE: return true;
    case DG_OP_ADAM_STEP: /* the step counter */
    case DG_OP_FOUND_INF: case DG_OP_LOSS_SCALE_UPDATE: /* loss scaling (fp16) */
    case DG_OPS_UNARY: case DG_OPS_BINARY: case DG_OPS_UNARY_BACKWARD: case DG_OPS_CONV: case DG_OPS_POOL:
    case DG_OPS_UNGROUPED: case DG_OP_COUNT:
        break;
    }
    return false;
}

dg_status dg_dp_new(dg_dp **out, dg_backend *const *bes, int n, dg_graph *g, dg_node *const *outputs, int n_out,
                    const dg_plan_opts *opts) {
    if (!out) return dg__fail(DG_ERR_INVALID, "dg_dp_new: NULL out");
    *out = NULL;
    if (!bes || !g || !outputs || n_out < 1)
        return dg__fail(DG_ERR_INVALID, "dg_dp_new: %s", !bes ? "NULL backends" : !g ? "NULL graph" : "no outputs");
    if (n < 1 || n > DG_DP_MAX_REPLICAS)
        return dg__fail(DG_ERR_INVALID, "dg_dp_new: %d replicas (1 to %d)", n, DG_DP_MAX_REPLICAS);
    for (int i = 0; i < n_out && n >= 2; i++) {
        /* a parameter's update (input 1 its gradient) fed by a gradient not
         * averaged (nor a constant zero) would let the replicas drift apart */
        const dg_node *u = outputs[i];
        if (!u) return dg__fail(DG_ERR_INVALID, "dg_dp_new: output %d is NULL", i);
        if (!updates_with_gradient(u->op)) continue;
        const dg_node *grad = u->in[1]; /* fp16's loss scale is the update's own input */
        if (grad->op != DG_OP_ALL_REDUCE && grad->op != DG_OP_LEAF)
            return dg__fail(DG_ERR_INVALID, "dg_dp_new: update '%s' takes a gradient that is not all-reduced: build "
                            "the step with dg_train_step_build_ex(..., all_reduce = true)", u->name);
    }
    dg_dp *dp = calloc(1, sizeof *dp);
    if (!dp) return dg__fail(DG_ERR_OOM, "dg_dp_new: out of memory");
    dp->n = n;
    dg_status st = DG_OK;
    for (int i = 0; i < n && st == DG_OK; i++) {
        dp->be[i] = bes[i];
        st = dg_plan_new(&dp->plan[i], g, bes[i], outputs, n_out, opts);
    }
    if (st == DG_OK && n >= 2) st = dg_backend_group(dp->be, n);
    if (st == DG_OK && n >= 2) st = start_workers(dp);
    if (st != DG_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", dg_last_error());
        dg_dp_free(dp);
        return dg__fail(st, "%s", why);
    }
    *out = dp;
    return DG_OK;
}

int dg_dp_replicas(const dg_dp *dp) { return dp ? dp->n : 0; }

dg_plan *dg_dp_plan(const dg_dp *dp, int i) { return dp && i >= 0 && i < dp->n ? dp->plan[i] : NULL; }

/* Every replica's step is a captured graph (run once before): each launch
 * returns at once and NCCL's kernels inside wait for one another on the
 * devices, so the calling thread launches them all. No thread wakes up
 * per step: where other threads hold every core (an OpenMP team spinning
 * after its region), a woken worker could wait a whole scheduler tick. */
static bool launch_all(dg_dp *dp) {
    for (int i = 0; i < dp->n; i++)
        if (!dg_plan_captured(dp->plan[i])) return false;
    for (int i = 0; i < dp->n; i++) run_replica(dp, i);
    return true;
}

dg_status dg_dp_run(dg_dp *dp) {
    if (!dp) return dg__fail(DG_ERR_INVALID, "dg_dp_run: NULL dp");
    if (launch_all(dp)) return first_failure(dp);
    if (dp->n > 1) {
        pthread_mutex_lock(&dp->mu);
        dp->done = 0;
        dp->gen++;
        pthread_cond_broadcast(&dp->go);
        pthread_mutex_unlock(&dp->mu);
    }
    run_replica(dp, 0);
    if (dp->n > 1) {
        pthread_mutex_lock(&dp->mu);
        while (dp->done < dp->n - 1) pthread_cond_wait(&dp->finished, &dp->mu);
        pthread_mutex_unlock(&dp->mu);
    }
    return first_failure(dp);
}

dg_status dg_dp_sync(dg_dp *dp) {
    if (!dp) return dg__fail(DG_ERR_INVALID, "dg_dp_sync: NULL dp");
    for (int i = 0; i < dp->n; i++) record(dp, i, dg_backend_sync(dp->be[i]));
    return first_failure(dp);
}

dg_status dg_dp_mean(dg_dp *dp, const dg_node *scalar, float *mean) {
    if (!dp || !scalar || !mean) return dg__fail(DG_ERR_INVALID, "dg_dp_mean: NULL %s", !dp ? "dp" : !scalar ? "node" : "mean");
    double sum = 0;
    for (int i = 0; i < dp->n; i++) {
        float v;
        dg_status st = dg_plan_get(dp->plan[i], scalar, &v, sizeof v);
        if (st != DG_OK) return st;
        sum += v;
    }
    *mean = (float)(sum / dp->n);
    return DG_OK;
}

void dg_dp_free(dg_dp *dp) {
    if (!dp) return;
    if (dp->sync_made) {
        pthread_mutex_lock(&dp->mu);
        dp->quit = true;
        pthread_cond_broadcast(&dp->go);
        pthread_mutex_unlock(&dp->mu);
        for (int i = 1; i <= dp->n_threads; i++) pthread_join(dp->thread[i], NULL);
        pthread_mutex_destroy(&dp->mu);
        pthread_cond_destroy(&dp->go);
        pthread_cond_destroy(&dp->finished);
    }
    for (int i = 0; i < dp->n; i++) dg_plan_free(dp->plan[i]);
    free(dp);
}
