/* test_sweep_resnet.c: the resnet sweep on the CPU (a checked row with the
 * step's FLOPs and its plan's memory, reported by bench plot with any
 * other implementation found in the file), and the training-step check of
 * any model flagging wrong updates of a ResNet. */
#include <math.h>
#include <string.h>

#include "core/check/step_check.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "writers/csv.h"
#include "held.h"
#include "shell_util.h"
#include "test_util.h"

/* ResNet-18's CIFAR stem on 32x32: multiply-adds of the forward, by stage:
 * stem 3*9*64*1024; stage 1 four 64*9*64*1024; stages 2-4 each a strided
 * 3x3 conv, three 3x3 convs and a 1x1 shortcut (2^27 in all); linear 512*10 */
#define CIFAR_FORWARD_MACS (1769472.0 + 4 * 37748736.0 + 3 * 134217728.0 + 5120.0)

/* the rows, texts and folder a failed assertion leaves: released */
TestSuite(resnet_sweep, .fini = held_release);

/* --cpu-cap at its largest: the row must not be skipped because the build
 * is slow (the sanitizer build) */
Test(resnet_sweep, cpu_row_is_checked_and_reports_memory) {
    char dir[] = "/tmp/dg-resnet-XXXXXX", cmd[1024], out[1 << 15], path[256];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --sweep resnet --sizes resnet=2 --case resnet18-cifar --impl cpu --reps 1 "
             "--warmup 0 --min-time 0 --cpu-cap 86400 --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/resnet.csv", dir);
    int n;
    csv_rec *r = held_ptr(bench_csv_read(path, &n));
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 1, "one case, one implementation, one batch: %d rows", n);
    /* noisy: checked and timed, its spread above --max-cv (a loaded machine) */
    cr_assert(!strcmp(r->status, "ok") || !strcmp(r->status, "noisy"), "status %s: %s", r->status, r->note);
    cr_assert_str_eq(r->name, "resnet18-cifar");
    cr_assert_str_eq(r->check, "f64-step@b2");
    cr_assert(r->m == 2 && r->batch == 2 && r->n == 32 && r->k == 10);
    cr_assert(r->max_rel_err <= BENCH_RESNET_UPDATE_TOL, "max_rel_err %g", r->max_rel_err);
    cr_assert(r->live_bytes > 0 && r->arena_bytes >= r->live_bytes, "arena %lld, live %lld", r->arena_bytes,
              r->live_bytes);
    double flops = r->gflops * r->median_ms * 1e6, want = 3 * 2 * CIFAR_FORWARD_MACS * 2;
    cr_assert(fabs(flops - want) < 1e-3 * want, "the row's FLOPs %.6g, want 3 x forward = %.6g", flops, want);
    held_free(r);
    /* a peer's row (bench/peers/torch_resnet.py appends such) is reported beside the sweep's own */
    snprintf(cmd, sizeof cmd, "grep -v '^#' %s | tail -n 1 | sed 's/,cpu,cpu,/,torch-eager,gpu,/' >> %s", path, path);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "env PATH=/nonexistent %s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = held_ptr(read_file(path));
    cr_assert(strstr(sum, "### resnet18-cifar") &&
              strstr(sum, "| batch | cpu | torch-eager | arena | peak live | arena / live |"), "%s", sum);
    cr_assert(strstr(sum, "| 2 | "), "no row for batch 2 in: %s", sum);
    held_free(sum);
}

/* A ResNet-18 with the CIFAR stem on 16x16 images (the last stage 2x2, so
 * each batch norm still sees 8 values at batch 2), small enough for a
 * float64 reference in seconds. */
static dg_resnet_cfg small_cifar(void) {
    dg_resnet_cfg cfg = dg_resnet18_default(DG_RESNET_CIFAR);
    cfg.height = cfg.width = 16;
    return cfg;
}

#define BATCH 2

static void synth(const dg_resnet_cfg *cfg, float *x, int32_t *y) {
    dg_rng r = dg_rng_new(test_seed());
    for (int i = 0; i < BATCH * cfg->channels * cfg->height * cfg->width; i++) x[i] = (float)dg_rng_uniform(&r);
    for (int i = 0; i < BATCH; i++) y[i] = (int32_t)(dg_rng_u64(&r) % (uint64_t)cfg->classes);
}

/* the plan's values, except that one tensor's change since its init is
 * scaled by `factor`: an update that many times the right one */
typedef struct skewed { dg_plan *p; const dg_node *target; double factor; } skewed;

static dg_status skewed_fetch(void *arg, const dg_node *n, float *host, size_t bytes) {
    const skewed *s = arg;
    dg_status st = dg_plan_get(s->p, n, host, bytes);
    if (st != DG_OK || n != s->target) return st;
    int64_t cnt = dg_node_numel(n);
    float *init = malloc((size_t)cnt * sizeof *init);
    cr_assert_not_null(init);
    dg_init_fill(n->init, init, cnt);
    for (int64_t i = 0; i < cnt; i++) host[i] = (float)(init[i] + s->factor * ((double)host[i] - init[i]));
    free(init);
    return DG_OK;
}

static const dg_node *param_named(const dg_model *m, const char *name) {
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i]->name, name)) return m->params[i];
    cr_assert_fail("no parameter %s", name);
    return NULL;
}

/* The step passes its own check; the same step with one small tensor's
 * update 10% off (a batch norm's scale in the last stage, as a missing
 * weight decay or a wrong scale gradient would make it) or with a running
 * mean's update 10% off is flagged. */
Test(resnet_check, flags_one_wrong_tensor) {
    dg_resnet_cfg cfg = small_cifar();
    bench_step_spec spec = bench_resnet_step(&cfg);
    float x[BATCH * 3 * 16 * 16];
    int32_t y[BATCH];
    synth(&cfg, x, y);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    bench_step s;
    bench_step_ref ref = {0};
    double err;
    bool ok;
    ASSERT_OK(bench_step_new(&s, be, &spec, BATCH, x, y, NULL, &ref, &err, &ok));
    cr_assert(ok, "the step fails its own check: error %g (seed %llu)", err, (unsigned long long)test_seed());
    float loss;
    ASSERT_OK(dg_plan_get(s.p, s.ts.loss, &loss, sizeof loss));
    const dg_node *targets[2] = {param_named(&s.model, "l4.1.conv2.bn.scale"), s.model.state[0]};
    for (int i = 0; i < 2; i++) {
        skewed sk = {s.p, targets[i], 1.1};
        ASSERT_OK(bench_step_error(&s.model, skewed_fetch, &sk, loss, &ref, spec.tol, &err, &ok));
        cr_assert(!ok && err > 0.05, "%s's update 10%% off passes: error %g", targets[i]->name, err);
    }
    bench_step_free(&s);
    bench_step_ref_free(&ref);
    dg_backend_free(be);
}

static dg_status plan_fetch(void *p, const dg_node *n, float *host, size_t bytes) {
    return dg_plan_get(p, n, host, bytes);
}

/* A step compared with the reference of another optimizer (lr 0.05 instead
 * of 0.1: every update half as large) is flagged. */
Test(resnet_check, flags_the_reference_of_another_optimizer) {
    dg_resnet_cfg cfg = small_cifar();
    bench_step_spec spec = bench_resnet_step(&cfg), half = spec;
    half.optim.lr = spec.optim.lr / 2;
    float x[BATCH * 3 * 16 * 16];
    int32_t y[BATCH];
    synth(&cfg, x, y);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    bench_step s, other;
    bench_step_ref ref = {0};
    double err;
    bool ok;
    ASSERT_OK(bench_step_build(&other, be, &half, BATCH, x, y, NULL));
    ASSERT_OK(bench_step_ref_run(&other, x, y, &ref));
    ASSERT_OK(bench_step_build(&s, be, &spec, BATCH, x, y, NULL));
    ASSERT_OK(dg_plan_run(s.p));
    float loss;
    ASSERT_OK(dg_plan_get(s.p, s.ts.loss, &loss, sizeof loss));
    ASSERT_OK(bench_step_error(&s.model, plan_fetch, s.p, loss, &ref, spec.tol, &err, &ok));
    cr_assert(!ok && err > 0.5, "lr 0.1 against a reference of lr 0.05 passes: error %g", err);
    bench_step_free(&s);
    bench_step_free(&other);
    bench_step_ref_free(&ref);
    dg_backend_free(be);
}
