/* test_train.c: an MLP learns a seeded, separable synthetic set on the CPU
 * backend with each optimizer (full batch, bounded steps). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "cpu_backend/cpu_backend.h"
#include "test_util.h"
#include "train_util.h"

typedef struct train_case { dg_optim_kind kind; float lr; int steps; } train_case;

ParameterizedTestParameters(train, mlp_blobs) {
    static train_case cases[] = {
        {DG_OPTIM_SGD, 0.1f, 300},
        {DG_OPTIM_MOMENTUM, 0.05f, 200},
        {DG_OPTIM_ADAM, 0.01f, 200},
    };
    return cr_make_param_array(train_case, cases, 3);
}

ParameterizedTest(train_case *tc, train, mlp_blobs) {
    const int n = 256, d = 8, c = 4, widths[] = {8, 32, 4};
    uint64_t seed = test_seed();
    blobs data;
    cr_assert_eq(blobs_new(&data, n, d, c, seed), 0);
    dg_optim o = dg_optim_default(tc->kind, tc->lr);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, widths, 3, n, &o, seed));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    dg_plan *step, *eval;
    ASSERT_OK(dg_plan_new(&step, t.g, be, t.step.outputs, t.step.n_outputs, NULL));
    ASSERT_OK(dg_plan_new(&eval, t.g, be, &t.step.logits, 1, &(dg_plan_opts){.share_leaves = step}));
    ASSERT_OK(dg_plan_set(step, t.step.x, data.x, (size_t)n * d * sizeof(float)));
    ASSERT_OK(dg_plan_set(step, t.step.y, data.y, (size_t)n * sizeof(int32_t)));
    float loss0 = 0, loss = 0;
    for (int s = 0; s < tc->steps; s++) {
        ASSERT_OK(dg_plan_run(step));
        ASSERT_OK(dg_plan_get(step, t.step.loss, &loss, sizeof loss));
        if (s == 0) loss0 = loss;
    }
    float *logits = malloc((size_t)n * c * sizeof(float));
    ASSERT_OK(dg_plan_run(eval));
    ASSERT_OK(dg_plan_get(eval, t.step.logits, logits, (size_t)n * c * sizeof(float)));
    double acc = accuracy(logits, data.y, n, c);
    cr_log_info("%s: loss %.4f -> %.4f, training accuracy %.1f%% after %d steps",
                dg_optim_name(tc->kind), loss0, loss, 100 * acc, tc->steps);
    cr_assert_lt(loss, 0.5f * loss0, "%s: loss only went %.4f -> %.4f (seed %llu)", dg_optim_name(tc->kind),
                 loss0, loss, (unsigned long long)seed);
    cr_assert_geq(acc, 0.95, "%s: training accuracy %.3f < 0.95 (seed %llu)", dg_optim_name(tc->kind), acc,
                  (unsigned long long)seed);
    free(logits);
    dg_plan_free(eval);
    dg_plan_free(step);
    dg_backend_free(be);
    train_graph_free(&t);
    blobs_free(&data);
}
