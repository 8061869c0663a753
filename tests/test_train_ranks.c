/* test_train_ranks.c: data parallelism across processes without MPI: the
 * CPU backend's all_reduce through a caller's sum (dg_cpu_set_all_reduce,
 * blocking, and dg_cpu_set_all_reduce_overlap, overlapped)
 * and the trainer's rank slices (dg_train_opts.rank, ranks). Two "ranks"
 * here are two threads of one process, each with its backend, whose sum
 * meets the other's at a barrier, as MPI_Allreduce pairs two processes
 * (tests/test_mpi.sh runs the real thing under mpirun).
 *
 * Bugs caught: an all_reduce that does not sum through the function or
 * does not divide by the process count (the node against a host mean); an
 * overlapped all_reduce whose steps read a bucket's output before its
 * wait, or that never lets the buckets go before the backward ends; a
 * trainer that feeds every rank the same slice or skips the loss's
 * average (two ranks against one backend on the global batch); the rank
 * arguments the trainer must refuse before anything is made. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <duograd/testing.h>

#include "core/nn/mlp.h"
#include "core/nn/train_step.h"
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

static const dg_mlp_cfg blob_mlp = {{16, 32, 4}, 3};

/* An overlapped sum standing in for another process that holds the same
 * values: start only records the bucket, test never finds it done (no
 * progress without the other process), wait doubles it (the sum of the
 * two). The mean is then the value itself, bit for bit, so a step must
 * equal a step without all_reduce exactly; a step that read a bucket's
 * output before its wait would read the arena's stale bytes. */
typedef struct deferred {
    int   started, waited, tested, started_at_first_wait;
    float *buf;
    size_t count;
} deferred;
typedef struct deferred_req { float *buf; size_t count; } deferred_req;

static dg_status deferred_start(float *buf, size_t count, void *arg, void **req) {
    deferred *d = arg;
    deferred_req *r = malloc(sizeof *r);
    if (!r) return dg_fail(DG_ERR_OOM, "deferred: out of memory");
    *r = (deferred_req){buf, count};
    *req = r;
    d->started++;
    return DG_OK;
}

static dg_status deferred_test(void *req, void *arg, bool *done) {
    (void)req;
    ((deferred *)arg)->tested++;
    *done = false;
    return DG_OK;
}

static dg_status deferred_wait(void *req, void *arg) {
    deferred *d = arg;
    deferred_req *r = req;
    for (size_t i = 0; i < r->count; i++) r->buf[i] += r->buf[i];
    if (!d->waited++) d->started_at_first_wait = d->started;
    free(r);
    return DG_OK;
}

/* the MLP's parameters after `steps` SGD steps at batch 8 on be, all_reduce or not */
static void mlp_steps(dg_backend *be, bool all_reduce, int steps, const blobs *b, float *params, size_t n) {
    dg_graph *g = dg_graph_new();
    dg_model model;
    dg_train_step ts;
    dg_optim o = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    dg_plan *p = NULL;
    ASSERT_OK(dg_mlp_new(g, &blob_mlp, 3, &model));
    ASSERT_OK(dg_train_step_build_ex(g, &model, 8, &o, all_reduce, &ts));
    ASSERT_OK(dg_plan_new(&p, g, be, ts.outputs, ts.n_outputs, NULL));
    for (int s = 0; s < steps; s++) {
        ASSERT_OK(dg_plan_set(p, ts.x, b->x + (size_t)s * 8 * 16, 8 * 16 * sizeof(float)));
        ASSERT_OK(dg_plan_set(p, ts.y, b->y + (size_t)s * 8, 8 * sizeof(int32_t)));
        ASSERT_OK(dg_plan_run(p));
    }
    size_t at = 0;
    for (int i = 0; i < model.n_params; i++) {
        size_t k = (size_t)dg_shape_numel(model.params[i]->shape);
        cr_assert_leq(at + k, n);
        ASSERT_OK(dg_plan_get(p, model.params[i], params + at, k * sizeof(float)));
        at += k;
    }
    dg_plan_free(p);
    dg_graph_free(g);
}

Test(cpu_ranks, the_overlapped_all_reduce_waits_for_each_bucket_before_its_gradients_are_read) {
    enum { STEPS = 3, N = 16 * 32 + 32 + 32 * 4 + 4 }; /* blob_mlp's parameters */
    blobs b;
    cr_assert_eq(blobs_new(&b, 8 * STEPS, 16, 4, test_seed()), 0);
    float plain[N], overlapped[N];
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    mlp_steps(be, false, STEPS, &b, plain, N);
    deferred d = {0};
    const dg_cpu_async_sum sum = {deferred_start, deferred_test, deferred_wait, &d};
    /* buckets of 256 bytes: the biases go together, each weight alone */
    ASSERT_OK(dg_cpu_set_all_reduce_overlap(be, &sum, 2, 256));
    mlp_steps(be, true, STEPS, &b, overlapped, N);
    cr_assert_arr_eq(overlapped, plain, sizeof plain, "the overlapped steps differ from plain ones");
    cr_assert_eq(d.waited, d.started, "%d buckets started, %d waited for", d.started, d.waited);
    cr_assert_geq(d.started, 2 * STEPS, "%d buckets in %d steps", d.started, STEPS);
    /* the backward went on past the first bucket before anything waited */
    cr_assert_geq(d.started_at_first_wait, 2, "%d buckets started at the first wait", d.started_at_first_wait);
    cr_assert_gt(d.tested, 0, "the buckets in flight were never tested (no progress between steps)");
    dg_backend_free(be);
    blobs_free(&b);
}

Test(cpu_ranks, bad_overlap_arguments_are_refused) {
    dg_backend *be;
    deferred d = {0};
    const dg_cpu_async_sum sum = {deferred_start, deferred_test, deferred_wait, &d}, no_wait = {deferred_start,
                                                                                              deferred_test, NULL, &d};
    ASSERT_OK(dg_cpu_backend_new(&be, 1));
    cr_assert_eq(dg_cpu_set_all_reduce_overlap(NULL, &sum, 2, 0), DG_ERR_INVALID);
    cr_assert_eq(dg_cpu_set_all_reduce_overlap(be, NULL, 2, 0), DG_ERR_INVALID);
    cr_assert_eq(dg_cpu_set_all_reduce_overlap(be, &no_wait, 2, 0), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "NULL"), "%s", dg_last_error());
    cr_assert_eq(dg_cpu_set_all_reduce_overlap(be, &sum, 0, 0), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "processes < 1"), "%s", dg_last_error());
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
