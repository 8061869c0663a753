/* test_data_parallel.c: data parallelism (core/nn/data_parallel.h).
 *
 * Everywhere: dg_grad_ex hands each gradient over once it is complete (an
 * all_reduce placed after a parameter's last contribution, also for a
 * parameter used twice, and before the backward of earlier layers); a step
 * built with all_reduce computes the same bits as one without on a single
 * replica; bad groups and bad replica counts are refused with a message.
 * With two or more GPUs: the all_reduce node averages what each replica
 * holds; the replicas' parameters stay identical step after step and equal
 * a single-GPU step of the same global batch within float tolerance, also
 * as GPU ranks (dg_gpu_join_ranks: two threads standing in for processes). */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "core/nn/data_parallel.h"
#include "core/nn/mlp.h"
#include "gpu_util.h"
#include "test_util.h"
#include "train_util.h"

/* an MLP step on its own graph, with or without the all-reduces */
static void mlp_step(train_graph *t, int batch, bool all_reduce) {
    static const dg_mlp_cfg cfg = {{12, 16, 8, 4}, 4};
    *t = (train_graph){.g = dg_graph_new()};
    cr_assert_not_null(t->g);
    ASSERT_OK(dg_mlp_new(t->g, &cfg, 7, &t->model));
    dg_optim o = dg_optim_default(DG_OPTIM_MOMENTUM, 0.05f);
    ASSERT_OK(dg_train_step_build_ex(t->g, &t->model, batch, &o, all_reduce, &t->step));
}

Test(grad_ready, each_gradient_is_all_reduced_once_complete_and_early) {
    train_graph t;
    mlp_step(&t, 8, true);
    const dg_model *m = &t.model;
    int first_w_grad_producer = -1;
    for (int i = 0; i < m->n_params; i++) {
        const dg_node *gr = t.step.grads[i];
        /* no contribution came after the hand-over: the gradient the
         * update reads is the all_reduce itself */
        cr_assert_eq(gr->op, DG_OP_ALL_REDUCE, "grads[%d] is %s", i, dg_op_name(gr->op));
        if (i == 0) first_w_grad_producer = gr->in[0]->id;
    }
    /* the last layer's gradients are exchanged before the first layer's
     * weight gradient is computed: the exchange can overlap the backward */
    const dg_node *last_w = t.step.grads[m->n_params - 2];
    cr_assert_lt(last_w->id, first_w_grad_producer, "last layer's all_reduce %d, first layer's dW producer %d",
                 last_w->id, first_w_grad_producer);
    train_graph_free(&t);
}

static dg_node *count_ready(dg_graph *g, int i, dg_node *grad, void *arg) {
    (void)i;
    ((int *)arg)[i]++;
    return dg_all_reduce(g, grad);
}

/* w used twice (x w + x w, w^T w ...) and a parameter not used at all */
Test(grad_ready, a_parameter_used_twice_is_handed_over_after_both_uses) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(3, 4));
    dg_node *w = dg_param(g, "w", DG_SHAPE(4, 4), (dg_init){DG_INIT_UNIFORM, -0.5f, 0.5f, 1});
    dg_node *unused = dg_param(g, "unused", DG_SHAPE(2), (dg_init){DG_INIT_UNIFORM, -0.5f, 0.5f, 2});
    dg_node *h = dg_matmul(g, x, w, false, false);
    dg_node *y = dg_matmul(g, h, w, false, true);
    dg_node *loss = dg_sum(g, dg_mul(g, y, y), 3u, false); /* axes 0 and 1: one element */
    dg_node *wrt[3] = {w, unused, x}, *grads[3];
    int calls[3] = {0};
    ASSERT_OK(dg_grad_ex(g, loss, wrt, 3, grads, count_ready, calls));
    cr_assert_eq(calls[0], 1, "w handed over %d times", calls[0]);
    cr_assert_eq(calls[1], 0, "the unused parameter's zero gradient handed over %d times", calls[1]);
    cr_assert_eq(calls[2], 1);
    cr_assert_eq(grads[0]->op, DG_OP_ALL_REDUCE, "w's gradient is %s", dg_op_name(grads[0]->op));
    /* both contributions (through h and through y's second operand) are
     * summed below the hand-over */
    cr_assert_eq(grads[0]->in[0]->op, DG_OP_ADD, "w's gradient before the hand-over is %s",
                 dg_op_name(grads[0]->in[0]->op));
    cr_assert_eq(grads[1]->op, DG_OP_LEAF);
    dg_graph_free(g);
}

/* one replica: the all_reduce is a copy, so the step's bits do not move */
Test(data_parallel, one_replica_all_reduced_step_equals_the_plain_step) {
    blobs b;
    cr_assert_eq(blobs_new(&b, 16, 12, 4, 3), 0);
    train_graph t[2];
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    dg_plan *p[2];
    for (int k = 0; k < 2; k++) {
        mlp_step(&t[k], 16, k == 1);
        if (k == 0) {
            ASSERT_OK(dg_plan_new(&p[0], t[0].g, be, t[0].step.outputs, t[0].step.n_outputs, NULL));
        } else {
            dg_dp *dp;
            ASSERT_OK(dg_dp_new(&dp, &be, 1, t[1].g, t[1].step.outputs, t[1].step.n_outputs, NULL));
            p[1] = dg_dp_plan(dp, 0);
            ASSERT_OK(dg_plan_set(p[1], t[1].step.x, b.x, 16 * 12 * sizeof(float)));
            ASSERT_OK(dg_plan_set(p[1], t[1].step.y, b.y, 16 * sizeof(int32_t)));
            for (int s = 0; s < 3; s++) ASSERT_OK(dg_dp_run(dp));
            float loss;
            ASSERT_OK(dg_dp_mean(dp, t[1].step.loss, &loss));
            cr_assert(isfinite(loss));
            /* compare while the dp owns its plan */
            for (int i = 0; i < t[0].model.n_params; i++) {
                size_t n = (size_t)dg_node_numel(t[0].model.params[i]);
                float a[16 * 16], c[16 * 16];
                cr_assert_leq(n, 16 * 16);
                ASSERT_OK(dg_plan_get(p[0], t[0].model.params[i], a, n * sizeof *a));
                ASSERT_OK(dg_plan_get(p[1], t[1].model.params[i], c, n * sizeof *c));
                cr_assert_eq(memcmp(a, c, n * sizeof *a), 0, "parameter %d differs", i);
            }
            dg_dp_free(dp);
            continue;
        }
        ASSERT_OK(dg_plan_set(p[0], t[0].step.x, b.x, 16 * 12 * sizeof(float)));
        ASSERT_OK(dg_plan_set(p[0], t[0].step.y, b.y, 16 * sizeof(int32_t)));
        for (int s = 0; s < 3; s++) ASSERT_OK(dg_plan_run(p[0]));
    }
    dg_plan_free(p[0]);
    for (int k = 0; k < 2; k++) train_graph_free(&t[k]);
    dg_backend_free(be);
    blobs_free(&b);
}

Test(data_parallel, bad_groups_and_replica_counts_are_refused) {
    dg_backend *be[2];
    ASSERT_OK(dg_cpu_backend_new(&be[0], 1));
    ASSERT_OK(dg_cpu_backend_new(&be[1], 1));
    dg_backend *same[2] = {be[0], be[0]};
    cr_assert_eq(dg_backend_group(be, 1), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "2 or more"), "%s", dg_last_error());
    cr_assert_eq(dg_backend_group(same, 2), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "backend 1 is backend 0 again"), "%s", dg_last_error());
    cr_assert_eq(dg_backend_group(be, 2), DG_ERR_UNSUPPORTED);
    cr_assert(strstr(dg_last_error(), "cpu backend has no collectives"), "%s", dg_last_error());

    train_graph plain, reduced;
    mlp_step(&plain, 4, false);
    mlp_step(&reduced, 4, true);
    dg_dp *dp = (dg_dp *)1;
    cr_assert_eq(dg_dp_new(&dp, be, 0, reduced.g, reduced.step.outputs, reduced.step.n_outputs, NULL), DG_ERR_INVALID);
    cr_assert_null(dp);
    cr_assert_eq(dg_dp_new(&dp, be, DG_DP_MAX_REPLICAS + 1, reduced.g, reduced.step.outputs, reduced.step.n_outputs, NULL), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "replicas"), "%s", dg_last_error());
    /* two replicas of a step whose updates read gradients not averaged */
    cr_assert_eq(dg_dp_new(&dp, be, 2, plain.g, plain.step.outputs, plain.step.n_outputs, NULL), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "not all-reduced"), "%s", dg_last_error());
    /* the CPU has no group: a clear refusal, nothing leaked */
    cr_assert_eq(dg_dp_new(&dp, be, 2, reduced.g, reduced.step.outputs, reduced.step.n_outputs, NULL), DG_ERR_UNSUPPORTED);
    cr_assert(strstr(dg_last_error(), "no collectives"), "%s", dg_last_error());
    cr_assert_null(dp);
    train_graph_free(&plain);
    train_graph_free(&reduced);
    dg_backend_free(be[0]);
    dg_backend_free(be[1]);
}

/* The exchange may read an all_reduce's input after the node was queued
 * (another stream, a bucket sent later), so the plan keeps that input's
 * bytes until the result's last reader: no node in between is placed on
 * them. */
Test(data_parallel, an_all_reduce_input_outlives_the_result_readers) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(256));
    dg_node *grad = dg_mul_scalar(g, x, 2.0f);
    dg_node *avg = dg_all_reduce(g, grad);
    dg_node *h = x;
    for (int i = 0; i < 4; i++) h = dg_mul_scalar(g, h, 1.5f); /* buffers of grad's size, made after it died */
    dg_node *out = dg_add(g, avg, h);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &out, 1, NULL));
    int n;
    const dg_plan_buffer *b = dg_plan_buffers(p, &n), *gb = NULL;
    for (int i = 0; i < n; i++)
        if (b[i].node_id == grad->id) gb = &b[i];
    cr_assert_not_null(gb);
    cr_assert_geq(gb->last, out->id, "the all_reduce input's bytes are free after step %d, its result is read at %d",
                  gb->last, out->id);
    for (int i = 0; i < n; i++) {
        if (&b[i] == gb || b[i].last < gb->first || b[i].first > gb->last) continue;
        bool apart = b[i].offset + b[i].bytes <= gb->offset || gb->offset + gb->bytes <= b[i].offset;
        cr_assert(apart, "node %d's buffer overlaps the all_reduce input's while both live", b[i].node_id);
    }
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
}

#ifdef DG_HAVE_CUDA
static void *run_plan(void *p) { return (void *)(intptr_t)dg_plan_run(p); }

Test(data_parallel_gpu, all_reduce_node_averages_what_each_replica_holds) {
    enum { n = 2 };
    dg_backend *be[n];
    gpus_open_or_skip(be, n);
    ASSERT_OK(dg_backend_group(be, n));
    cr_assert_eq(dg_gpu_group_size(be[0]), 2);
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(1000, 3));
    dg_node *y = dg_all_reduce(g, dg_mul_scalar(g, x, 2.0f));
    dg_plan *p[2];
    static float in[2][3000], out[3000];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 3000; i++) in[r][i] = (float)(r ? -0.25 * i : i % 7);
        ASSERT_OK(dg_plan_new(&p[r], g, be[r], &y, 1, &(dg_plan_opts){.no_replay = true}));
        ASSERT_OK(dg_plan_set(p[r], x, in[r], sizeof in[r]));
    }
    /* NCCL needs both replicas queued: one thread each, as dg_dp_run does */
    pthread_t other;
    cr_assert_eq(pthread_create(&other, NULL, run_plan, p[1]), 0);
    ASSERT_OK(dg_plan_run(p[0]));
    void *st1;
    cr_assert_eq(pthread_join(other, &st1), 0);
    cr_assert_eq((dg_status)(intptr_t)st1, DG_OK, "replica 1's run");
    for (int r = 0; r < 2; r++) {
        ASSERT_OK(dg_plan_get(p[r], y, out, sizeof out));
        for (int i = 0; i < 3000; i++) {
            float want = (float)((2.0 * in[0][i] + 2.0 * in[1][i]) / 2);
            cr_assert_float_eq(out[i], want, 1e-5f * (1 + fabsf(want)), "replica %d element %d: %g, host %g", r, i,
                               out[i], want);
        }
        dg_plan_free(p[r]);
    }
    dg_graph_free(g);
    for (int r = 0; r < n; r++) dg_backend_free(be[r]);
}

/* two replicas of half the batch each against one GPU with the whole
 * batch; bucket: the backends' all_reduce_bucket_bytes */
static void replicas_against_one_gpu(long long bucket) {
    enum { BATCH = 32, STEPS = 4 };
    enum { n = 2 };
    dg_backend *be[n], *one;
    gpus_open_with_or_skip(be, n, bucket);
    ASSERT_OK(dg_gpu_backend_new(&one, &(dg_gpu_opts){.device = 0}));
    blobs b;
    cr_assert_eq(blobs_new(&b, BATCH, 12, 4, 5), 0);
    train_graph t1, tn;
    mlp_step(&t1, BATCH, false);
    mlp_step(&tn, BATCH / n, true);
    dg_plan *p1;
    ASSERT_OK(dg_plan_new(&p1, t1.g, one, t1.step.outputs, t1.step.n_outputs, NULL));
    ASSERT_OK(dg_plan_set(p1, t1.step.x, b.x, BATCH * 12 * sizeof(float)));
    ASSERT_OK(dg_plan_set(p1, t1.step.y, b.y, BATCH * sizeof(int32_t)));
    dg_dp *dp;
    ASSERT_OK(dg_dp_new(&dp, be, n, tn.g, tn.step.outputs, tn.step.n_outputs, NULL));
    int per = BATCH / n;
    for (int r = 0; r < n; r++) {
        ASSERT_OK(dg_plan_set(dg_dp_plan(dp, r), tn.step.x, b.x + (size_t)r * per * 12, per * 12 * sizeof(float)));
        ASSERT_OK(dg_plan_set(dg_dp_plan(dp, r), tn.step.y, b.y + (size_t)r * per, per * sizeof(int32_t)));
    }
    for (int s = 0; s < STEPS; s++) {
        ASSERT_OK(dg_plan_run(p1));
        ASSERT_OK(dg_dp_run(dp));
        float l1, ln;
        ASSERT_OK(dg_plan_get(p1, t1.step.loss, &l1, sizeof l1));
        ASSERT_OK(dg_dp_mean(dp, tn.step.loss, &ln));
        cr_assert_float_eq(ln, l1, 1e-5f * fabsf(l1), "step %d: mean of the replicas' losses %g, one GPU %g", s, ln, l1);
    }
    for (int i = 0; i < tn.model.n_params; i++) {
        size_t cnt = (size_t)dg_node_numel(tn.model.params[i]);
        float w1[16 * 16], w0[16 * 16], wr[16 * 16];
        ASSERT_OK(dg_plan_get(p1, t1.model.params[i], w1, cnt * sizeof(float)));
        ASSERT_OK(dg_plan_get(dg_dp_plan(dp, 0), tn.model.params[i], w0, cnt * sizeof(float)));
        for (int r = 1; r < n; r++) {
            ASSERT_OK(dg_plan_get(dg_dp_plan(dp, r), tn.model.params[i], wr, cnt * sizeof(float)));
            cr_assert_eq(memcmp(w0, wr, cnt * sizeof(float)), 0, "parameter %d: replica %d differs from replica 0", i, r);
        }
        for (size_t j = 0; j < cnt; j++)
            cr_assert_float_eq(w0[j], w1[j], 1e-5f * (1 + fabsf(w1[j])), "parameter %d element %zu: %g, one GPU %g", i,
                               j, w0[j], w1[j]);
    }
    dg_dp_free(dp);
    dg_plan_free(p1);
    train_graph_free(&t1);
    train_graph_free(&tn);
    blobs_free(&b);
    dg_backend_free(one);
    for (int r = 0; r < n; r++) dg_backend_free(be[r]);
}

/* The step's six gradients (W1 768 bytes, b1 64, W2 512, b2 32, W3 128,
 * b3 16, handed over from the last layer back) in the default bucket: all
 * six packed into one NCCL call */
Test(data_parallel_gpu, replicas_stay_identical_and_equal_one_gpu_of_the_global_batch) { replicas_against_one_gpu(0); }
/* every gradient its own call, no packing */
Test(data_parallel_gpu, unbucketed_replicas_equal_one_gpu) { replicas_against_one_gpu(-1); }
/* buckets of at most 600 bytes: the small gradients packed by twos and
 * threes, W1 (768 bytes, over the size) alone */
Test(data_parallel_gpu, small_buckets_mix_packed_and_lone_gradients) { replicas_against_one_gpu(600); }
/* GPU ranks (dg_gpu_join_ranks), as MPI launches them one process each,
 * here two threads of one process: each joins its backend with the same
 * NCCL id (ncclCommInitRank returns once both have joined) and runs its
 * own plan of the step on its half of the batch, replayed as a captured
 * graph after the first run; the parameters stay identical on both and
 * equal one GPU's on the whole batch. Bugs caught: a join that leaves the
 * all_reduce a copy (the ranks drift apart), an id not shared (the join
 * hangs: ctest's timeout), a communicator that capture cannot replay. */
typedef struct gpu_rank {
    int           rank;
    dg_backend   *be;
    const unsigned char *id;
    train_graph   t;
    const blobs  *b;
    float         w[8][16 * 16]; /* its parameters after the steps (6 of them) */
    dg_status     st;
    char          why[256];
} gpu_rank;

enum { RANKS_BATCH = 32, RANKS_STEPS = 4 };

static void *gpu_rank_main(void *p) {
    gpu_rank *r = p;
    int per = RANKS_BATCH / 2;
    dg_plan *plan = NULL;
    dg_status st = dg_gpu_join_ranks(r->be, r->id, r->rank, 2);
    if (st == DG_OK) st = dg_plan_new(&plan, r->t.g, r->be, r->t.step.outputs, r->t.step.n_outputs, NULL);
    if (st == DG_OK)
        st = dg_plan_set(plan, r->t.step.x, r->b->x + (size_t)r->rank * per * 12, per * 12 * sizeof(float));
    if (st == DG_OK) st = dg_plan_set(plan, r->t.step.y, r->b->y + (size_t)r->rank * per, per * sizeof(int32_t));
    for (int s = 0; s < RANKS_STEPS && st == DG_OK; s++) st = dg_plan_run(plan);
    for (int i = 0; i < r->t.model.n_params && st == DG_OK; i++)
        st = dg_plan_get(plan, r->t.model.params[i], r->w[i], (size_t)dg_node_numel(r->t.model.params[i]) * 4);
    r->st = st;
    if (st != DG_OK) snprintf(r->why, sizeof r->why, "%s", dg_last_error());
    dg_plan_free(plan);
    return NULL;
}

Test(data_parallel_gpu, two_gpu_ranks_stay_identical_and_equal_one_gpu) {
    dg_backend *be[2], *one;
    gpus_open_or_skip(be, 2);
    ASSERT_OK(dg_gpu_backend_new(&one, &(dg_gpu_opts){.device = 0}));
    unsigned char id[DG_GPU_RANKS_ID_BYTES];
    ASSERT_OK(dg_gpu_ranks_id(id));
    blobs b;
    cr_assert_eq(blobs_new(&b, RANKS_BATCH, 12, 4, 5), 0);
    static gpu_rank r[2];
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        r[k] = (gpu_rank){.rank = k, .be = be[k], .id = id, .b = &b};
        mlp_step(&r[k].t, RANKS_BATCH / 2, true);
        cr_assert_eq(pthread_create(&th[k], NULL, gpu_rank_main, &r[k]), 0);
    }
    for (int k = 0; k < 2; k++) cr_assert_eq(pthread_join(th[k], NULL), 0);
    for (int k = 0; k < 2; k++) cr_assert_eq(r[k].st, DG_OK, "rank %d: %s", k, r[k].why);
    cr_assert_eq(dg_gpu_group_size(be[0]), 2);
    /* joined already: refused */
    cr_assert_eq(dg_gpu_join_ranks(be[0], id, 0, 2), DG_ERR_INVALID);
    train_graph t1;
    mlp_step(&t1, RANKS_BATCH, false);
    dg_plan *p1;
    ASSERT_OK(dg_plan_new(&p1, t1.g, one, t1.step.outputs, t1.step.n_outputs, NULL));
    ASSERT_OK(dg_plan_set(p1, t1.step.x, b.x, RANKS_BATCH * 12 * sizeof(float)));
    ASSERT_OK(dg_plan_set(p1, t1.step.y, b.y, RANKS_BATCH * sizeof(int32_t)));
    for (int s = 0; s < RANKS_STEPS; s++) ASSERT_OK(dg_plan_run(p1));
    for (int i = 0; i < t1.model.n_params; i++) {
        size_t cnt = (size_t)dg_node_numel(t1.model.params[i]);
        float w1[16 * 16];
        ASSERT_OK(dg_plan_get(p1, t1.model.params[i], w1, cnt * sizeof(float)));
        cr_assert_eq(memcmp(r[0].w[i], r[1].w[i], cnt * sizeof(float)), 0, "parameter %d: rank 1 differs from rank 0", i);
        for (size_t j = 0; j < cnt; j++)
            cr_assert_float_eq(r[0].w[i][j], w1[j], 1e-5f * (1 + fabsf(w1[j])), "parameter %d element %zu: %g, one GPU %g",
                               i, j, r[0].w[i][j], w1[j]);
    }
    dg_plan_free(p1);
    train_graph_free(&t1);
    for (int k = 0; k < 2; k++) train_graph_free(&r[k].t);
    blobs_free(&b);
    dg_backend_free(one);
    for (int k = 0; k < 2; k++) dg_backend_free(be[k]);
}

Test(data_parallel_gpu, bad_gpu_ranks_are_refused) {
    dg_backend *be = gpu_open_or_skip(NULL);
    unsigned char id[DG_GPU_RANKS_ID_BYTES] = {0};
    cr_assert_eq(dg_gpu_join_ranks(NULL, id, 0, 2), DG_ERR_INVALID);
    cr_assert_eq(dg_gpu_join_ranks(be, NULL, 0, 2), DG_ERR_INVALID);
    cr_assert_eq(dg_gpu_join_ranks(be, id, 2, 2), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "rank 2 of 2"), "%s", dg_last_error());
    cr_assert_eq(dg_gpu_join_ranks(be, id, 0, 1), DG_ERR_INVALID);
    cr_assert_eq(dg_gpu_ranks_id(NULL), DG_ERR_INVALID);
    cr_assert_eq(dg_gpu_group_size(be), 1);
    dg_backend_free(be);
}
#endif
