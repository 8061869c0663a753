/* test_models_memory.c: a model's whole training step as one plan keeps
 * its memory promises: after the first run, runs allocate nothing; the
 * arena packs the step's buffers close to the least they can take (the
 * peak of bytes alive at one step). */
#include <duograd/testing.h>

#include "core/nn/resnet.h"
#include "core/nn/train_step.h"
#include "cpu_backend/cpu_backend.h"
#include "test_util.h"

/* ResNet-18 with the CIFAR stem (3x32x32, 10 classes), batch 2, SGD with
 * momentum and weight decay, on the CPU. */
Test(models_memory, resnet18_cifar_step_allocates_nothing_and_packs_tightly) {
    dg_resnet_cfg cfg = dg_resnet18_default(DG_RESNET_CIFAR);
    dg_optim o = dg_optim_default(DG_OPTIM_MOMENTUM, 0.1f);
    o.weight_decay = 5e-4f;
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_train_step ts;
    ASSERT_OK(dg_resnet18_new(g, &cfg, 1, &m));
    ASSERT_OK(dg_train_step_build(g, &m, 2, &o, &ts));
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, ts.outputs, ts.n_outputs, NULL));
    ASSERT_OK(dg_plan_run(p)); /* first run */
    size_t before = dg_backend_n_allocs(be);
    cr_assert_gt(before, 0, "the plan allocated nothing at all: the counter is not wired");
    for (int i = 0; i < 3; i++) ASSERT_OK(dg_plan_run(p));
    cr_assert_eq(dg_backend_n_allocs(be), before, "3 runs made %zu allocations", dg_backend_n_allocs(be) - before);
    dg_plan_stats s = dg_plan_stats_get(p);
    cr_log_info("ResNet-18 CIFAR step, batch 2: arena %.1f MB, peak live %.1f MB (ratio %.3f), %d buffers, %d steps",
                (double)s.arena_bytes / 1e6, (double)s.live_bytes / 1e6, (double)s.arena_bytes / (double)s.live_bytes,
                s.n_buffers, s.n_steps);
    cr_assert(s.live_bytes > 0 && s.arena_bytes >= s.live_bytes);
    cr_assert_leq((double)s.arena_bytes, 1.3 * (double)s.live_bytes, "arena %zu bytes > 1.3 x live %zu bytes",
                  s.arena_bytes, s.live_bytes);
    dg_plan_free(p);
    dg_backend_free(be);
    dg_graph_free(g);
}
