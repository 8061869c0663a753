/* test_fashion.c: the MLP trains on real Fashion-MNIST on the CPU, one short
 * epoch on a subset, and clearly beats chance (10%) on the whole test set.
 * The threshold is this test's own (5x chance), not a tuned figure. */
#include <unistd.h>

#include "core/nn/mlp.h"
#include "core/nn/trainer.h"
#include "cpu_backend/cpu_backend.h"
#include "test_util.h"

/* the installed data set and a CPU backend; skips where the package is absent */
static void setup_or_skip(dg_dataset *train, dg_dataset *test, dg_backend **be) {
    if (access(DG_FASHION_MNIST_DIR, R_OK) != 0)
        cr_skip_test("%s not installed (apt-get install dataset-fashion-mnist)", DG_FASHION_MNIST_DIR);
    ASSERT_OK(dg_dataset_load(NULL, "train", train));
    ASSERT_OK(dg_dataset_load(NULL, "t10k", test));
    ASSERT_OK(dg_cpu_backend_new(be, 0));
}

Test(fashion, mlp_one_short_epoch_beats_chance) {
    dg_dataset train, test;
    dg_backend *be;
    setup_or_skip(&train, &test, &be);
    const dg_mlp_cfg mlp = {{784, 128, 10}, 3};
    dg_train_opts o = {.model = dg_mlp_new, .model_cfg = &mlp, .optim = dg_optim_default(DG_OPTIM_ADAM, 1e-3f),
                       .epochs = 1, .batch = 64, .seed = test_seed(), .loss_every = 1, .subset = 6000};
    dg_epoch_stats s;
    ASSERT_OK(dg_train(be, &o, &train, &test, NULL, NULL, &s));
    cr_log_info("1 epoch on 6000 examples: loss %.4f, test accuracy %.2f%% (%.2f s)", s.train_loss,
                100 * s.test_acc, s.epoch_s);
    cr_assert_gt(s.test_acc, 0.5, "test accuracy %.3f is not clearly above chance (seed %llu)", s.test_acc,
                 (unsigned long long)o.seed);
    dg_backend_free(be);
    dg_dataset_free(&train);
    dg_dataset_free(&test);
}

/* Copying each batch from the host and gathering it from the resident data
 * set must feed the same batches: the same loss and accuracy, bit for bit. */
Test(fashion, copy_batches_equals_resident) {
    dg_dataset train, test;
    dg_backend *be;
    setup_or_skip(&train, &test, &be);
    const dg_mlp_cfg mlp = {{784, 32, 10}, 3};
    dg_train_opts o = {.model = dg_mlp_new, .model_cfg = &mlp, .optim = dg_optim_default(DG_OPTIM_SGD, 0.1f),
                       .epochs = 2, .batch = 50, .seed = test_seed(), .loss_every = 1, .subset = 2000};
    dg_epoch_stats resident, copied;
    ASSERT_OK(dg_train(be, &o, &train, &test, NULL, NULL, &resident));
    o.copy_batches = true;
    ASSERT_OK(dg_train(be, &o, &train, &test, NULL, NULL, &copied));
    cr_assert(resident.train_loss == copied.train_loss && resident.test_acc == copied.test_acc,
              "resident: loss %.9g acc %.6f; copied: loss %.9g acc %.6f", resident.train_loss, resident.test_acc,
              copied.train_loss, copied.test_acc);
    dg_backend_free(be);
    dg_dataset_free(&train);
    dg_dataset_free(&test);
}
