/* test_train_ranks.c: data parallelism across processes without MPI: the
 * CPU backend's all_reduce through a caller's sum (dg_cpu_set_all_reduce)
 * and the trainer's rank slices (dg_train_opts.rank, ranks). Two "ranks"
 * here are two threads of one process, each with its backend, whose sum
 * meets the other's at a barrier, as MPI_Allreduce pairs two processes
 * (tests/test_mpi.sh runs the real thing under mpirun).
 *
 * Bugs caught: an all_reduce that does not sum through the function or
 * does not divide by the process count (the node against a host mean); a
 * trainer that feeds every rank the same slice or skips the loss's
 * average (two ranks against one backend on the global batch); the rank
 * arguments the trainer must refuse before anything is made. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <duograd/testing.h>

#include "core/nn/mlp.h"
#include "core/nn/trainer.h"
#include "cpu_backend/cpu_backend.h"
#include "test_util.h"
#include "train_util.h"

/* A sum standing in for another process that holds `other`: buf + other */
static dg_status add_other(float *buf, size_t count, void *arg) {
    const float *other = arg;
    for (size_t i = 0; i < count; i++) buf[i] += other[i];
    return DG_OK;
}

static dg_status refuse_sum(float *buf, size_t count, void *arg) {
    (void)buf, (void)count, (void)arg;
    return dg_fail(DG_ERR_IO, "the other rank is gone");
}

/* y = all_reduce(x) of n floats on be, x given, y read back */
static dg_status run_node(dg_backend *be, const float *x, float *y, int n) {
    dg_graph *g = dg_graph_new();
    dg_node *in = dg_input(g, "x", DG_SHAPE(n)), *out = dg_all_reduce(g, in);
    dg_plan *p = NULL;
    dg_status st = dg_plan_new(&p, g, be, &out, 1, NULL);
    if (st == DG_OK) st = dg_plan_set(p, in, x, (size_t)n * sizeof *x);
    if (st == DG_OK) st = dg_plan_run(p);
    if (st == DG_OK) st = dg_plan_get(p, out, y, (size_t)n * sizeof *y);
    dg_plan_free(p);
    dg_graph_free(g);
    return st;
}

Test(cpu_ranks, the_all_reduce_node_is_the_mean_of_the_processes_values) {
    enum { N = 257 };
    float x[N], other[N], y[N];
    for (int i = 0; i < N; i++) x[i] = 0.25f * i, other[i] = 3.0f - i;
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    ASSERT_OK(run_node(be, x, y, N)); /* alone: a copy */
    cr_assert_arr_eq(y, x, sizeof y);
    ASSERT_OK(dg_cpu_set_all_reduce(be, add_other, other, 2));
    ASSERT_OK(run_node(be, x, y, N));
    for (int i = 0; i < N; i++)
        cr_assert_eq(y[i], (x[i] + other[i]) / 2, "y[%d] = %g, the host's mean %g", i, y[i], (x[i] + other[i]) / 2);
    /* a failing sum fails the step with its message */
    ASSERT_OK(dg_cpu_set_all_reduce(be, refuse_sum, NULL, 2));
    cr_assert_eq(run_node(be, x, y, N), DG_ERR_IO);
    cr_assert(strstr(dg_last_error(), "the other rank is gone"), "%s", dg_last_error());
    /* alone again */
    ASSERT_OK(dg_cpu_set_all_reduce(be, NULL, NULL, 1));
    ASSERT_OK(run_node(be, x, y, N));
    cr_assert_arr_eq(y, x, sizeof y);
    dg_backend_free(be);
}

Test(cpu_ranks, bad_arguments_are_refused) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    cr_assert_eq(dg_cpu_set_all_reduce(NULL, add_other, NULL, 2), DG_ERR_INVALID);
    cr_assert_eq(dg_cpu_set_all_reduce(be, add_other, NULL, 0), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "0 processes"), "%s", dg_last_error());
    cr_assert_eq(dg_cpu_set_all_reduce(be, NULL, NULL, 2), DG_ERR_INVALID);
    dg_backend_free(be);
}

/* two ranks in one process: a barrier pairs their sums */
static struct {
    pthread_barrier_t barrier;
    float            *buf[2];
} pair;

typedef struct rank_arg {
    int           rank;
    dg_backend   *be;
    dg_train_opts o;
    dg_dataset    d;
    dg_epoch_stats s[4];
    int           n;
    dg_status     st;
} rank_arg;

/* each rank publishes its buffer, both add both (in the same order, so
 * the same float sums), and neither writes before both have read */
static dg_status pair_sum(float *buf, size_t count, void *arg) {
    int r = *(const int *)arg;
    pair.buf[r] = buf;
    pthread_barrier_wait(&pair.barrier);
    float *mine = malloc(count * sizeof *mine);
    for (size_t i = 0; mine && i < count; i++) mine[i] = pair.buf[0][i] + pair.buf[1][i];
    pthread_barrier_wait(&pair.barrier);
    if (mine) memcpy(buf, mine, count * sizeof *mine);
    free(mine);
    if (!mine) abort(); /* a rank that left would leave the other at the barrier */
    return DG_OK;
}

static void log_epoch(const dg_epoch_stats *s, void *arg) {
    rank_arg *a = arg;
    if (a->n < 4) a->s[a->n++] = *s;
}

static void *rank_main(void *p) {
    rank_arg *a = p;
    a->st = dg_train(a->be, &a->o, &a->d, &a->d, log_epoch, a, NULL);
    return NULL;
}

static const dg_mlp_cfg blob_mlp = {{16, 32, 4}, 3};

static dg_train_opts blob_opts(int batch) {
    return (dg_train_opts){.model = dg_mlp_new, .model_cfg = &blob_mlp, .optim = dg_optim_default(DG_OPTIM_ADAM, 0.01f),
                           .epochs = 3, .batch = batch, .seed = test_seed(), .loss_every = 1};
}

Test(cpu_ranks, two_ranks_train_as_one_backend_on_the_global_batch) {
    blobs b;
    cr_assert_eq(blobs_new(&b, 512, 16, 4, test_seed()), 0);
    dg_dataset d = {b.n, 1, b.d, b.c, b.x, b.y};
    rank_arg one = {.o = blob_opts(64), .d = d}, r[2];
    ASSERT_OK(dg_cpu_backend_new(&one.be, 1));
    rank_main(&one);
    ASSERT_OK(one.st);
    pthread_barrier_init(&pair.barrier, NULL, 2);
    static const int ids[2] = {0, 1};
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        r[k] = (rank_arg){.rank = k, .o = blob_opts(64), .d = d};
        r[k].o.rank = k;
        r[k].o.ranks = 2;
        ASSERT_OK(dg_cpu_backend_new(&r[k].be, 1));
        ASSERT_OK(dg_cpu_set_all_reduce(r[k].be, pair_sum, (void *)&ids[k], 2));
    }
    for (int k = 0; k < 2; k++) cr_assert_eq(pthread_create(&th[k], NULL, rank_main, &r[k]), 0);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    pthread_barrier_destroy(&pair.barrier);
    for (int k = 0; k < 2; k++) {
        ASSERT_OK(r[k].st);
        cr_assert_eq(r[k].n, one.o.epochs);
        for (int e = 0; e < one.o.epochs; e++) {
            double l1 = one.s[e].train_loss, l2 = r[k].s[e].train_loss;
            cr_log_info("rank %d epoch %d: loss %.7f, one backend %.7f", k, e + 1, l2, l1);
            /* float32 summation order apart (a gradient summed in two halves) */
            cr_assert(fabs(l2 - l1) <= 1e-4 * fabs(l1), "rank %d epoch %d: loss %.9g, one backend %.9g (seed %llu)",
                      k, e + 1, l2, l1, (unsigned long long)one.o.seed);
            /* the same parameters on both ranks: the same accuracy, bit for bit */
            cr_assert_eq(r[k].s[e].test_acc, r[0].s[e].test_acc, "rank %d epoch %d", k, e + 1);
        }
        dg_backend_free(r[k].be);
    }
    dg_backend_free(one.be);
    blobs_free(&b);
}

Test(cpu_ranks, rank_arguments_are_refused_before_anything_is_made) {
    blobs b;
    cr_assert_eq(blobs_new(&b, 64, 16, 4, test_seed()), 0);
    dg_dataset d = {b.n, 1, b.d, b.c, b.x, b.y};
    dg_backend *be[2];
    for (int i = 0; i < 2; i++) ASSERT_OK(dg_cpu_backend_new(&be[i], 1));
    static const struct { int rank, ranks, replicas, batch; const char *why; } cases[] = {
        {2, 2, 1, 16, "rank 2 of 2 ranks"},
        {-1, 2, 1, 16, "rank -1 of 2 ranks"},
        {0, 3, 1, 16, "batch 16 does not split evenly over 3 ranks"},
        {0, 2, 2, 16, "2 ranks of 2 replicas each"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        dg_train_opts o = blob_opts(cases[i].batch);
        o.rank = cases[i].rank;
        o.ranks = cases[i].ranks;
        cr_assert_eq(dg_train_multi(be, cases[i].replicas, &o, &d, &d, NULL, NULL, NULL), DG_ERR_INVALID,
                     "case %zu", i);
        cr_assert(strstr(dg_last_error(), cases[i].why), "case %zu: %s", i, dg_last_error());
    }
    for (int i = 0; i < 2; i++) cr_assert_eq(dg_backend_n_allocs(be[i]), 0, "backend %d allocated", i);
    for (int i = 0; i < 2; i++) dg_backend_free(be[i]);
    blobs_free(&b);
}
