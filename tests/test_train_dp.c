/* test_train_dp.c: the trainer over several replicas (dg_train_multi).
 *
 * Everywhere: a batch the replicas cannot split evenly is refused before
 * anything is made, CPU backends (no collectives) with their reason, and
 * nothing leaks on any failure.
 * Two CPU backends joined by a stand-in all-reduce (a barrier between the
 * replicas' threads where GPUs have NCCL) run the whole multi-replica loop:
 * on their slices of the same shuffle they train as one backend does on the
 * global batch, resident or copied, and every failed allocation on either
 * replica is cleaned up. With two GPUs: Fashion-MNIST on two learns as on
 * one with the same global batch. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <duograd/testing.h>

#include "core/backend_impl.h"
#include "core/nn/data_parallel.h"
#include "core/nn/mlp.h"
#include "core/nn/trainer.h"
#include "gpu_util.h"
#include "test_util.h"
#include "train_util.h"

/* the stats of every epoch of one run */
typedef struct run_log { int n; dg_epoch_stats s[8]; } run_log;

static void log_epoch(const dg_epoch_stats *s, void *arg) {
    run_log *l = arg;
    if (l->n < 8) l->s[l->n++] = *s;
}

/* Blobs as a data set of n examples of 1 x d; the same set serves as test set. */
static dg_dataset blobs_set(const blobs *b) { return (dg_dataset){b->n, 1, b->d, b->c, b->x, b->y}; }

static const dg_mlp_cfg blob_mlp = {{16, 32, 4}, 3};

static dg_train_opts blob_opts(int batch) {
    return (dg_train_opts){.model = dg_mlp_new, .model_cfg = &blob_mlp, .optim = dg_optim_default(DG_OPTIM_ADAM, 0.01f),
                           .epochs = 3, .batch = batch, .seed = test_seed(), .loss_every = 1};
}

static void cpu_pair(dg_backend **be) {
    for (int i = 0; i < 2; i++) ASSERT_OK(dg_cpu_backend_new(&be[i], 1));
}

Test(train_multi, a_batch_the_replicas_cannot_split_is_refused_before_anything_is_made) {
    blobs b;
    cr_assert_eq(blobs_new(&b, 64, 16, 4, test_seed()), 0);
    dg_dataset d = blobs_set(&b);
    dg_backend *be[2];
    cpu_pair(be);
    dg_train_opts o = blob_opts(5);
    cr_assert_eq(dg_train_multi(be, 2, &o, &d, &d, NULL, NULL, NULL), DG_ERR_INVALID, "%s", dg_last_error());
    cr_assert(strstr(dg_last_error(), "batch 5 does not split evenly over 2 replicas"), "%s", dg_last_error());
    /* refused before the plans: grouping, which the CPU refuses, was not reached */
    for (int i = 0; i < 2; i++) cr_assert_eq(dg_backend_n_allocs(be[i]), 0, "backend %d allocated", i);
    for (int i = 0; i < 2; i++) dg_backend_free(be[i]);
    blobs_free(&b);
}

Test(train_multi, cpu_backends_have_no_collectives) {
    blobs b;
    cr_assert_eq(blobs_new(&b, 64, 16, 4, test_seed()), 0);
    dg_dataset d = blobs_set(&b);
    dg_backend *be[2];
    cpu_pair(be);
    dg_train_opts o = blob_opts(8);
    cr_assert_eq(dg_train_multi(be, 2, &o, &d, &d, NULL, NULL, NULL), DG_ERR_UNSUPPORTED, "%s", dg_last_error());
    cr_assert(strstr(dg_last_error(), "cpu backend has no collectives"), "%s", dg_last_error());
    /* the plans made before the refusal are gone (the leak check sees the rest) */
    for (int i = 0; i < 2; i++) cr_assert_gt(dg_backend_n_allocs(be[i]), 0, "replica %d was not planned", i);
    for (int i = 0; i < 2; i++) dg_backend_free(be[i]);
    blobs_free(&b);
}

Test(train_multi, bad_replica_counts_and_backends_are_refused) {
    blobs b;
    cr_assert_eq(blobs_new(&b, 64, 16, 4, test_seed()), 0);
    dg_dataset d = blobs_set(&b);
    dg_backend *be[DG_DP_MAX_REPLICAS + 1] = {0};
    cpu_pair(be);
    dg_train_opts o = blob_opts(8);
    cr_assert_eq(dg_train_multi(be, 0, &o, &d, &d, NULL, NULL, NULL), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "0 replicas (1 to 16)"), "%s", dg_last_error());
    cr_assert_eq(dg_train_multi(be, DG_DP_MAX_REPLICAS + 1, &o, &d, &d, NULL, NULL, NULL), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "17 replicas"), "%s", dg_last_error());
    cr_assert_eq(dg_train_multi(NULL, 2, &o, &d, &d, NULL, NULL, NULL), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "NULL backend"), "%s", dg_last_error());
    cr_assert_eq(dg_train_multi(be, 3, &o, &d, &d, NULL, NULL, NULL), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "NULL backend for replica 2"), "%s", dg_last_error());
    dg_backend *twice[2] = {be[0], be[0]};
    cr_assert_eq(dg_train_multi(twice, 2, &o, &d, &d, NULL, NULL, NULL), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "backend 1 is backend 0 again"), "%s", dg_last_error());
    for (int i = 0; i < 2; i++) dg_backend_free(be[i]);
    blobs_free(&b);
}

/* The stand-in: CPU backends whose interface has a group entry, and whose
 * all_reduce averages over the group. dg_dp_run runs each replica on its
 * own thread and every replica meets the same all_reduce nodes in the same
 * order, so a barrier pairs them: each publishes its input, averages
 * everyone's into a buffer of its own, and writes its output only once all
 * have read (an output may share storage with its replica's input). */
enum { STAND_IN_MAX = 2 };
static struct {
    const dg_backend_i *cpu;
    dg_backend_i        iface;
    dg_backend         *be[STAND_IN_MAX];
    int                 n;
    const float        *in[STAND_IN_MAX];
    pthread_barrier_t   barrier;
} stand_in;

static dg_status stand_in_group(dg_backend *const *bes, int n) {
    if (n > STAND_IN_MAX) return DG_ERR_UNSUPPORTED;
    if (!stand_in.n) pthread_barrier_init(&stand_in.barrier, NULL, (unsigned)n); /* grouped once, as on GPUs */
    memcpy(stand_in.be, bes, (size_t)n * sizeof *bes);
    stand_in.n = n;
    return DG_OK;
}

static dg_status stand_in_compute(dg_backend *be, const dg_step *s) {
    if (s->node->op != DG_OP_ALL_REDUCE) return stand_in.cpu->compute(be, s);
    int r = 0;
    while (stand_in.be[r] != be) r++;
    size_t n = (size_t)dg_node_numel(s->node);
    float *mean = malloc(n * sizeof *mean);
    if (!mean) abort(); /* a replica that left the barrier would hang the other */
    stand_in.in[r] = s->in[0];
    pthread_barrier_wait(&stand_in.barrier);
    for (size_t i = 0; i < n; i++) {
        double sum = 0;
        for (int k = 0; k < stand_in.n; k++) sum += stand_in.in[k][i];
        mean[i] = (float)(sum / stand_in.n);
    }
    pthread_barrier_wait(&stand_in.barrier);
    memcpy(s->out, mean, n * sizeof *mean);
    free(mean);
    return DG_OK;
}

/* two single-threaded CPU backends behind the stand-in interface */
static void stand_in_pair(dg_backend **be) {
    cpu_pair(be);
    stand_in.cpu = be[0]->iface;
    stand_in.iface = *be[0]->iface;
    stand_in.iface.group = stand_in_group;
    stand_in.iface.compute = stand_in_compute;
    for (int i = 0; i < 2; i++) be[i]->iface = &stand_in.iface;
}

static void stand_in_free(dg_backend **be) {
    for (int i = 0; i < 2; i++) {
        be[i]->iface = stand_in.cpu;
        dg_backend_free(be[i]);
    }
    if (stand_in.n) pthread_barrier_destroy(&stand_in.barrier);
}

/* Same seed, same global batch: the replicas' slices together are the
 * batch one backend takes, so the losses and accuracy differ by rounding
 * only (a gradient summed in two halves). */
Test(train_multi, two_stand_in_replicas_train_as_one_backend_on_the_global_batch) {
    blobs b;
    cr_assert_eq(blobs_new(&b, 512, 16, 4, test_seed()), 0);
    dg_dataset d = blobs_set(&b);
    dg_backend *one, *be[2];
    ASSERT_OK(dg_cpu_backend_new(&one, 1));
    stand_in_pair(be);
    dg_train_opts o = blob_opts(64);
    for (int copy = 0; copy < 2; copy++) {
        o.copy_batches = copy;
        run_log single = {0}, pair = {0};
        ASSERT_OK(dg_train(one, &o, &d, &d, log_epoch, &single, NULL));
        ASSERT_OK(dg_train_multi(be, 2, &o, &d, &d, log_epoch, &pair, NULL));
        cr_assert_eq(pair.n, o.epochs);
        for (int e = 0; e < o.epochs; e++) {
            double l1 = single.s[e].train_loss, l2 = pair.s[e].train_loss;
            cr_log_info("%s epoch %d: loss %.7f on one, %.7f on two; accuracy %.4f, %.4f", copy ? "copied" : "resident",
                        e + 1, l1, l2, single.s[e].test_acc, pair.s[e].test_acc);
            cr_assert(fabs(l2 - l1) <= 1e-4 * fabs(l1),
                      "%s epoch %d: loss %.9g on two replicas, %.9g on one (seed %llu)", copy ? "copied" : "resident",
                      e + 1, l2, l1, (unsigned long long)o.seed);
            cr_assert(fabs(pair.s[e].test_acc - single.s[e].test_acc) <= 1.0 / b.n,
                      "%s epoch %d: accuracy %.4f on two replicas, %.4f on one", copy ? "copied" : "resident", e + 1,
                      pair.s[e].test_acc, single.s[e].test_acc);
        }
    }
    stand_in_free(be);
    dg_backend_free(one);
    blobs_free(&b);
}

/* every allocation of either replica made to fail in turn, in both data
 * modes: the failure's status, and nothing left (the leak check) */
Test(train_multi, every_failed_allocation_of_a_replica_is_cleaned_up) {
    blobs b;
    cr_assert_eq(blobs_new(&b, 64, 16, 4, test_seed()), 0);
    dg_dataset d = blobs_set(&b);
    dg_backend *be[2];
    stand_in_pair(be);
    dg_train_opts o = blob_opts(16);
    o.epochs = 1;
    int allocs[2][2]; /* [copy][replica]: how many a run makes */
    for (int copy = 0; copy < 2; copy++)
        for (int r = 0; r < 2; r++) {
            o.copy_batches = copy;
            int k = 1;
            for (;; k++) {
                dg_backend_fail_alloc_after(be[r], k);
                dg_status st = dg_train_multi(be, 2, &o, &d, &d, NULL, NULL, NULL);
                dg_backend_fail_alloc_after(be[r], 0);
                if (st == DG_OK) break;
                cr_assert_eq(st, DG_ERR_OOM, "replica %d, allocation %d: %s", r, k, dg_last_error());
            }
            allocs[copy][r] = k - 1;
        }
    /* resident, each replica also holds the data set, its labels and the permutation */
    for (int r = 0; r < 2; r++)
        cr_assert_eq(allocs[0][r], allocs[1][r] + 3, "replica %d: %d allocations resident, %d copied", r,
                     allocs[0][r], allocs[1][r]);
    stand_in_free(be);
    blobs_free(&b);
}

#ifdef DG_HAVE_CUDA
/* Fashion-MNIST (from $DG_FASHION_DIR where set: the GPU machine gets a
 * carried copy), or the test skips where it is absent */
static void fashion_or_skip(dg_dataset *train, dg_dataset *test) {
    const char *dir = getenv("DG_FASHION_DIR") ? getenv("DG_FASHION_DIR") : DG_FASHION_MNIST_DIR;
    if (access(dir, R_OK) != 0) cr_skip_test("%s not installed (apt-get install dataset-fashion-mnist)", dir);
    ASSERT_OK(dg_dataset_load(dir, "train", train));
    ASSERT_OK(dg_dataset_load(dir, "t10k", test));
}

Test(train_multi_gpu, two_gpus_learn_fashion_mnist_as_one_on_the_same_global_batch) {
    dg_backend *be[2];
    gpus_open_or_skip(be, 2);
    dg_dataset train, test;
    fashion_or_skip(&train, &test);
    const dg_mlp_cfg mlp = {{784, 256, 100, 10}, 4};
    dg_train_opts o = {.model = dg_mlp_new, .model_cfg = &mlp, .optim = dg_optim_default(DG_OPTIM_ADAM, 1e-3f),
                       .epochs = 2, .batch = 128, .seed = test_seed(), .loss_every = 1, .subset = 2048};
    for (int copy = 0; copy < 2; copy++) {
        o.copy_batches = copy;
        dg_epoch_stats one, two;
        ASSERT_OK(dg_train(be[0], &o, &train, &test, NULL, NULL, &one)); /* replica 0's device alone */
        ASSERT_OK(dg_train_multi(be, 2, &o, &train, &test, NULL, NULL, &two));
        cr_log_info("%s: one GPU loss %.5f acc %.2f%%; two GPUs loss %.5f acc %.2f%%", copy ? "copied" : "resident",
                    one.train_loss, 100 * one.test_acc, two.train_loss, 100 * two.test_acc);
        cr_assert(one.test_acc > 0.70 && two.test_acc > 0.70,
                  "%s: test accuracy %.4f on one GPU, %.4f on two (seed %llu)", copy ? "copied" : "resident",
                  one.test_acc, two.test_acc, (unsigned long long)o.seed);
        cr_assert(fabs(two.test_acc - one.test_acc) <= 0.005, "%s: test accuracy %.4f on two GPUs, %.4f on one",
                  copy ? "copied" : "resident", two.test_acc, one.test_acc);
        /* rounding moves the loss far less than a wrong slice of the batch would */
        cr_assert(fabs(two.train_loss - one.train_loss) <= 1e-2 * one.train_loss,
                  "%s: training loss %.6f on two GPUs, %.6f on one", copy ? "copied" : "resident", two.train_loss,
                  one.train_loss);
    }
    dg_dataset_free(&train);
    dg_dataset_free(&test);
    for (int i = 0; i < 2; i++) dg_backend_free(be[i]);
}
#endif
