/* test_sweep_resnet.c: the resnet sweep on the CPU (a checked row with the
 * step's FLOPs and its plan's memory, in fp32 and bf16, reported by bench
 * plot per dtype with any other implementation found in the file); the
 * CPU's own and vendor sets listed only when asked for, and refused by
 * the backend: skipped with its reason, said once; and the training-step
 * check of any model flagging wrong updates of a ResNet, and a bf16 step
 * with an entry of a 16-bit product left unwritten. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/check/step_check.h"
#include "core/rng.h"
#include "core/backend_impl.h"
#include "core/layout.h"
#include "cpu_backend/cpu_backend.h"
#include "cpu_backend/cpu_kernels.h"
#include "runner/step_tol.h"
#include "runner/sweep.h"
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
             "--warmup 0 --min-time 0 --cpu-cap 86400 --dtype fp32,bf16 --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/resnet.csv", dir);
    int n;
    csv_rec *r = held_ptr(bench_csv_read(path, &n));
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 2, "one case, one implementation, one batch, fp32 and bf16: %d rows", n);
    /* the bf16 step, checked against its own graph's float64 reference with bf16's tolerances */
    const csv_rec *lo = &r[1];
    cr_assert(lo->precision == DG_PREC_BF16 && (!strcmp(lo->status, "ok") || !strcmp(lo->status, "noisy")),
              "bf16 row: %s, status %s: %s", dg_precision_name(lo->precision), lo->status, lo->note);
    bench_step_tol tol = bench_step_tol_bn_in(DG_PREC_BF16, bench_resnet_step(&(dg_resnet_cfg){0}).tol);
    cr_assert(lo->max_rel_err <= tol.update && lo->live_bytes > 0, "bf16: max_rel_err %g", lo->max_rel_err);
    /* noisy: checked and timed, its spread above --max-cv (a loaded machine) */
    cr_assert(!strcmp(r->status, "ok") || !strcmp(r->status, "noisy"), "status %s: %s", r->status, r->note);
    cr_assert_str_eq(r->name, "resnet18-cifar");
    cr_assert_eq(r->precision, DG_PREC_FP32);
    cr_assert_str_eq(r->check, "f64-step@b2");
    cr_assert(r->m == 2 && r->batch == 2 && r->n == 32 && r->k == 10);
    cr_assert(r->max_rel_err <= BENCH_RESNET_UPDATE_TOL, "max_rel_err %g", r->max_rel_err);
    cr_assert(r->live_bytes > 0 && r->arena_bytes >= r->live_bytes, "arena %lld, live %lld", r->arena_bytes,
              r->live_bytes);
    double flops = r->gflops * r->median_ms * 1e6, want = 3 * 2 * CIFAR_FORWARD_MACS * 2;
    cr_assert(fabs(flops - want) < 1e-3 * want, "the row's FLOPs %.6g, want 3 x forward = %.6g", flops, want);
    held_free(r);
    /* a peer's row (bench/peers/torch_resnet.py appends such) is reported beside the sweep's own */
    snprintf(cmd, sizeof cmd, "grep -v '^#' %s | tail -n 2 | sed 's/,cpu,cpu,/,torch-eager,gpu,/' >> %s", path, path);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "env PATH=/nonexistent %s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = held_ptr(read_file(path));
    cr_assert(strstr(sum, "### resnet18-cifar") &&
              strstr(sum, "| batch | cpu | torch-eager | arena | peak live | arena / live |"), "%s", sum);
    cr_assert(strstr(sum, "| 2 | "), "no row for batch 2 in: %s", sum);
    /* the bf16 rows, the sweep's and the peer's, in a table of their own */
    cr_assert(strstr(sum, "### resnet18-cifar in bf16:") &&
              strstr(sum, "| batch | cpu | torch-eager | arena | peak live | arena / live |"), "%s", sum);
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

/* the CPU backend refusing the vendor's convolutions, as a build without
 * oneDNN does: the words of its refusal are the test's own */
#define NO_VENDOR "no oneDNN in this test's backend"
static const dg_backend_i *vendor_iface;
static dg_status no_vendor(const dg_backend *be, const dg_node *n, unsigned flags, char *buf, size_t size) {
    if (DG_STEP_CONV(flags) == DG_CONV_VENDOR) return dg_fail(DG_ERR_UNSUPPORTED, "cpu: " NO_VENDOR);
    return vendor_iface->step_impl(be, n, flags, buf, size);
}

/* cpu-vendor's rows of both stems at two batches in fp32 and bf16 on a
 * backend that refuses it: skipped with the backend's reason before
 * anything is built (no float64 reference: the test takes no time), none
 * failed, the reason said once on stderr */
Test(resnet_sweep, vendor_rows_refused_are_skipped_with_the_reason_once) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    vendor_iface = be->iface;
    held_backend(be, vendor_iface);
    dg_backend_i refusing = *be->iface;
    refusing.step_impl = no_vendor;
    be->iface = &refusing;
    char dir[] = "/tmp/dg-resnet-XXXXXX", path[256], err_path[] = "/tmp/dg-resnet-err-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    bench_ctx ctx = {.out_dir = dir, .cpu = be, .threads = 2, .size_lists = {{.v = {2, 4}, .n = 2}},
                     .n_size_lists = 1, .impl_filter = "cpu-vendor",
                     .precisions = {DG_PREC_FP32, DG_PREC_BF16}, .n_precisions = 2,
                     .timing = {.min_reps = 1, .max_reps = 1}, .cpu_cap_s = 86400};
    ctx.csv = bench_csv_open(dir, "resnet", "# the vendor refused\n", BENCH_CSV_HEADER);
    cr_assert_not_null(ctx.csv, "%s", dg_last_error());
    held_file(ctx.csv);
    int fd = mkstemp(err_path), saved = dup(STDERR_FILENO);
    cr_assert(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, STDERR_FILENO);
    dg_status st = sweep_resnet(&ctx);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    ASSERT_OK(st);
    char *err = held_ptr(read_file(err_path));
    remove(err_path);
    held_drop(ctx.csv, true); /* closed by bench_csv_finish */
    ASSERT_OK(bench_csv_finish(ctx.csv, dir, "resnet", true));
    snprintf(path, sizeof path, "%s/resnet.csv", dir);
    int n;
    csv_rec *r = held_ptr(bench_csv_read(path, &n));
    cr_assert_not_null(r, "%s", dg_last_error());
    cr_assert_eq(n, 8, "2 stems x 2 batches x 2 dtypes, got %d rows", n);
    for (int i = 0; i < n; i++)
        cr_assert(!strcmp(r[i].impl, "cpu-vendor") && !strcmp(r[i].status, "skipped") &&
                      strstr(r[i].note, NO_VENDOR) && r[i].reps == 0,
                  "%s %s %s at batch %lld: %s (%s)", r[i].name, r[i].impl, dg_precision_name(r[i].precision),
                  r[i].batch, r[i].status, r[i].note);
    cr_assert_eq(ctx.failed, 0);
    int said = 0;
    for (const char *p = err; (p = strstr(p, NO_VENDOR)) != NULL; p++) said++;
    cr_assert_eq(said, 1, "the reason said %d times on stderr: %s", said, err);
    held_free(err);
    held_free(r);
    held_free(be);
}

/* the CPU backend's compute, each convolution step that AUTO gives oneDNN
 * on this CPU appended to conv_runs as 'D' where it ran oneDNN, 'O' where
 * the own: the order of the rows' steps, as the sweep ran them */
static const dg_backend_i *recording_iface;
static char conv_runs[1 << 16];
static size_t n_conv_runs;
static dg_status recording_compute(dg_backend *be, const dg_step *s) {
    const dg_node *n = s->node;
    bool conv = n->op == DG_OP_CONV2D || n->op == DG_OP_CONV2D_BACKWARD_DATA || n->op == DG_OP_CONV2D_BACKWARD_WEIGHT;
    char name[96];
    if (conv) {
        dg_conv_dims d = dg_conv_dims_of(n); /* float32 steps: the ISA does not matter */
        if (dg__cpu_conv_auto_onednn(&d, n->op, n->in[0]->dtype, false) &&
            recording_iface->step_impl(be, n, s->flags, name, sizeof name) == DG_OK && n_conv_runs + 1 < sizeof conv_runs)
            conv_runs[n_conv_runs++] = strncmp(name, "cpu-onednn", 10) ? 'O' : 'D';
    }
    return recording_iface->compute(be, s);
}

/* cpu and cpu-conv-own at batches 2 and 4: the rows run in turn (cpu at
 * 2, cpu-conv-own at 2, cpu at 4, cpu-conv-own at 4), and each row's
 * convolutions run its set's choice: oneDNN where AUTO gives it for cpu,
 * the own for cpu-conv-own, so the recorded steps fall in four blocks,
 * D O D O. Catches an own row whose plan does not ask for the own
 * convolutions (DG_CONV_OWN: one block), a row that follows the plan
 * before it instead of its own (three), and a sweep that leaves the
 * backend's setting at the own rule. */
Test(resnet_sweep, conv_own_rows_run_the_own_convolutions_and_cpu_rows_auto) {
    if (!dg_cpu_has_onednn()) cr_skip_test("built without oneDNN: AUTO is the own convolutions everywhere");
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    recording_iface = be->iface;
    held_backend(be, recording_iface);
    dg_backend_i recording = *be->iface;
    recording.compute = recording_compute;
    be->iface = &recording;
    char dir[] = "/tmp/dg-resnet-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    bench_ctx ctx = {.out_dir = dir, .cpu = be, .threads = 2, .size_lists = {{.v = {2, 4}, .n = 2}},
                     .n_size_lists = 1, .impl_filter = "cpu,cpu-conv-own", .case_filter = "resnet18-cifar",
                     .precisions = {DG_PREC_FP32}, .n_precisions = 1,
                     .timing = {.min_reps = 1, .max_reps = 1}, .cpu_cap_s = 86400};
    ctx.csv = bench_csv_open(dir, "resnet", "# cpu and cpu-conv-own\n", BENCH_CSV_HEADER);
    cr_assert_not_null(ctx.csv, "%s", dg_last_error());
    held_file(ctx.csv);
    n_conv_runs = 0;
    ASSERT_OK(sweep_resnet(&ctx));
    held_drop(ctx.csv, true); /* closed by bench_csv_finish */
    ASSERT_OK(bench_csv_finish(ctx.csv, dir, "resnet", true));
    conv_runs[n_conv_runs] = 0;
    char blocks[8] = {0};
    int n_blocks = 0;
    for (size_t i = 0; i < n_conv_runs && n_blocks < 7; i++)
        if (i == 0 || conv_runs[i] != conv_runs[i - 1]) blocks[n_blocks++] = conv_runs[i];
    cr_assert_str_eq(blocks, "DODO", "steps in %d blocks %s (%zu steps)", n_blocks, blocks, n_conv_runs);
    char name[96];
    dg_graph *g = dg_graph_new();
    const dg_node *probe = dg_conv2d(g, dg_input(g, "x", DG_SHAPE(2, 64, 8, 8)), dg_input(g, "w", DG_SHAPE(64, 64, 3, 3)), NULL,
                      (dg_conv2d_opts){.pad = {1, 1}});
    ASSERT_OK(dg_backend_step_impl(be, probe, 0u, name, sizeof name));
    cr_assert(!strncmp(name, "cpu-onednn", 10), "after the sweep a 64-channel 3x3 layer runs as %s", name);
    dg_graph_free(g);
    held_free(be);
}

/* The CPU's own, own-convolution and vendor sets are not in the default
 * rows (a 2-core machine's default sweep would take three times as long);
 * --impl names them. The GPU's are (a CPU-only build lists no GPU row). */
Test(resnet_sweep, cpu_sets_run_only_when_asked) {
    char cmd[512], out[1 << 14];
    snprintf(cmd, sizeof cmd, "%s --list resnet --backends cpu", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "resnet resnet18-cifar cpu cpu fp32 m=8") && !strstr(out, "cpu-own") &&
              !strstr(out, "cpu-vendor") && !strstr(out, "cpu-conv-own"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s --list resnet --backends cpu --impl 'cpu-*' --dtype bf16", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "resnet resnet18-cifar cpu-own cpu bf16 m=8") &&
              strstr(out, "resnet resnet18-imagenet cpu-vendor cpu bf16 m=64") &&
              strstr(out, "resnet resnet18-cifar cpu-conv-own cpu bf16 m=8"), "%s", out);
}

/* the CPU backend's compute, then NaN in the last entry of every product
 * that reads 16-bit operands: an entry left unwritten in a poisoned arena */
static const dg_backend_i *lowp_iface;
static dg_status lowp_entry_unwritten(dg_backend *be, const dg_step *s) {
    dg_status st = lowp_iface->compute(be, s);
    const dg_node *nd = s->node;
    bool lowp = nd->n_in > 0 && (nd->in[0]->dtype == DG_BF16 || nd->in[0]->dtype == DG_F16) &&
                (nd->op == DG_OP_MATMUL || nd->op == DG_OP_CONV2D || nd->op == DG_OP_CONV2D_BACKWARD_DATA ||
                 nd->op == DG_OP_CONV2D_BACKWARD_WEIGHT);
    if (st != DG_OK || !lowp) return st;
    size_t bytes = dg_node_bytes(nd);
    if (nd->dtype == DG_F32) ((float *)s->out)[bytes / 4 - 1] = NAN;
    else memcpy((char *)s->out + bytes - 2, &(uint16_t){nd->dtype == DG_BF16 ? 0x7fc0u : 0x7e00u}, 2);
    return st;
}

/* The bf16 step (the step builder's policy) passes its check with bf16's
 * tolerances; the same step with an entry of a 16-bit product left
 * unwritten is flagged. */
Test(resnet_check, a_bf16_step_passes_and_an_unwritten_entry_is_flagged) {
    dg_resnet_cfg cfg = small_cifar();
    bench_step_spec spec = bench_resnet_step(&cfg);
    spec.precision = DG_PREC_BF16;
    spec.tol = bench_step_tol_bn_in(DG_PREC_BF16, spec.tol);
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
    cr_assert(ok, "the bf16 step fails its own check: error %g (seed %llu)", err, (unsigned long long)test_seed());
    bench_step_free(&s);
    lowp_iface = be->iface;
    dg_backend_i wrong = *be->iface;
    wrong.compute = lowp_entry_unwritten;
    be->iface = &wrong;
    ASSERT_OK(bench_step_new(&s, be, &spec, BATCH, x, y, NULL, &ref, &err, &ok));
    cr_assert(!ok, "an unwritten entry passes: error %g", err);
    bench_step_free(&s);
    be->iface = lowp_iface;
    bench_step_ref_free(&ref);
    dg_backend_free(be);
}
