/* test_sweep_model.c: `bench --model FILE.onnx` (the model sweep,
 * bench/sweeps/model/) on the importer's test models (tests/data/onnx/):
 * rows of the file's training step in every precision asked, named after
 * the file and checked at batch 2 against the float64 step, the file's
 * name and digest in the metadata, bench plot's section; every refusal
 * (no such file, not ONNX, an output that cannot take the loss, --model
 * without its sweep and the sweep without --model, a bad name) before
 * anything is written; a CPU backend with a planted bug in one gradient
 * kernel, whose rows the check makes "wrong"; one whose updates are 1.3x
 * too large, which the batch-norm tolerances let through for the CNN in
 * bf16 and the plain ones do not for the MLP; and the GPU's rows, with and
 * without graph replay, in every precision (skipped, with the reason,
 * where no CUDA device answers). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend_impl.h"
#include "cpu_backend/cpu_backend.h"
#include "runner/step_tol.h"
#include "runner/sweep.h"
#include "sweeps/model/model_file.h"
#include "writers/csv.h"
#include "gpu_util.h"
#include "held.h"
#include "shell_util.h"
#include "test_util.h"

#define DATA DG_SOURCE_DIR "/tests/data/onnx/"

/* the rows, texts and folder a failed assertion leaves: released */
TestSuite(model_sweep, .fini = held_release);

/* the rows of DIR/model.csv (held) */
static csv_rec *rows_of(const char *dir, int *n) {
    char path[256];
    snprintf(path, sizeof path, "%s/model.csv", dir);
    csv_rec *r = held_ptr(bench_csv_read(path, n));
    cr_assert_not_null(r, "%s", dg_last_error());
    return r;
}

static bool measured(const csv_rec *r) { return !strcmp(r->status, "ok") || !strcmp(r->status, "noisy"); }

/* The CNN (conv, batch norm, max pool, Gemm) at batch 4 in fp32 and bf16:
 * two checked rows named after the file, the file and its digest in the
 * metadata, and bench plot's section with a table per precision. --cpu-cap
 * at its largest: no row skipped because the build is slow. */
Test(model_sweep, cnn_rows_are_checked_named_and_traced_to_the_file) {
    char dir[] = "/tmp/dg-model-XXXXXX", cmd[1024], out[1 << 14], path[256];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --model " DATA "cnn.onnx --sizes model=4 --impl cpu --reps 1 --warmup 0 "
             "--min-time 0 --cpu-cap 86400 --dtype fp32,bf16 --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    int n;
    csv_rec *r = rows_of(dir, &n);
    cr_assert_eq(n, 2, "one batch, one implementation, fp32 and bf16: %d rows", n);
    bench_step_tol tol = bench_model_step(NULL).tol;
    for (int i = 0; i < n; i++) {
        cr_assert(measured(&r[i]), "row %d: status %s: %s", i, r[i].status, r[i].note);
        cr_assert_str_eq(r[i].sweep, "model");
        cr_assert_str_eq(r[i].name, "onnx-cnn");
        cr_assert_str_eq(r[i].check, "f64-step@b2");
        /* one example [2,6,6], 3 classes */
        cr_assert(r[i].batch == 4 && r[i].m == 4 && r[i].n == 72 && r[i].k == 3, "m %lld n %lld k %lld", r[i].m,
                  r[i].n, r[i].k);
        double bound = bench_step_tol_bn_in(r[i].precision, tol).update;
        cr_assert(r[i].max_rel_err >= 0 && r[i].max_rel_err <= bound, "max_rel_err %g", r[i].max_rel_err);
        cr_assert(r[i].live_bytes > 0 && r[i].gflops > 0, "live %lld, gflops %g", r[i].live_bytes, r[i].gflops);
    }
    cr_assert(r[0].precision == DG_PREC_FP32 && r[1].precision == DG_PREC_BF16);
    held_free(r);
    snprintf(path, sizeof path, "%s/model.csv", dir);
    char *csv = held_ptr(read_file(path));
    cr_assert(strstr(csv, "# model: " DATA "cnn.onnx (onnx-cnn, 1290 bytes, crc32 "), "no file in: %.2000s", csv);
    held_free(csv);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    char *sum = held_ptr(read_file(path));
    cr_assert(strstr(sum, "### onnx-cnn in fp32:") && strstr(sum, "### onnx-cnn in bf16:") &&
              strstr(sum, "| batch | cpu | arena MB | check error (batch 2) |\n") && strstr(sum, "| 4 | "),
              "%s", sum);
    held_free(sum);
}

/* The MLP (no running statistics): its rows checked with the step's own
 * tolerances; the default batches listed without running anything. */
Test(model_sweep, mlp_rows_and_listing) {
    char dir[] = "/tmp/dg-model-XXXXXX", cmd[1024], out[1 << 14];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --model " DATA "mlp.onnx --list --impl cpu", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "model onnx-mlp cpu cpu fp32 m=8 n=6 k=3") && strstr(out, "m=2048"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s --model " DATA "mlp.onnx --sizes 16 --impl cpu --reps 1 --warmup 0 "
             "--min-time 0 --cpu-cap 86400 --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    int n;
    csv_rec *r = rows_of(dir, &n);
    cr_assert_eq(n, 1);
    cr_assert(measured(r) && !strcmp(r->name, "onnx-mlp") && r->max_rel_err <= bench_model_step(NULL).tol.update,
              "%s %s %g: %s", r->name, r->status, r->max_rel_err, r->note);
    held_free(r);
}

/* `cmd` fails with exit code rc, its output holding `want`, and writes no
 * model.csv into dir */
static void refused(const char *dir, const char *args, int rc, const char *want) {
    char cmd[1024], out[4096], path[256];
    snprintf(cmd, sizeof cmd, "%s %s --out %s --impl cpu", DG_BENCH_PATH, args, dir);
    int got = sh(cmd, out, sizeof out);
    cr_assert_eq(got, rc, "%s: exit %d, want %d: %s", cmd, got, rc, out);
    cr_assert(strstr(out, want), "%s: no '%s' in: %s", cmd, want, out);
    snprintf(path, sizeof path, "%s/model.csv", dir);
    cr_assert(access(path, F_OK) != 0, "%s: wrote %s", cmd, path);
}

Test(model_sweep, refusals_name_the_problem_and_write_nothing) {
    char dir[] = "/tmp/dg-model-XXXXXX", junk[300];
    tmp_dir(dir);
    held_dir(dir);
    refused(dir, "--model " DATA "no_such_model.onnx", 1, "no_such_model.onnx': cannot open");
    snprintf(junk, sizeof junk, "%s/junk.onnx", dir);
    FILE *f = fopen(junk, "wb");
    cr_assert_not_null(f);
    fputs("not a model at all\n", f);
    fclose(f);
    char args[400];
    snprintf(args, sizeof args, "--model %s", junk);
    refused(dir, args, 1, "not an ONNX model");
    /* a global average pool's [batch, 4, 1, 1]: no classes axis for the loss */
    refused(dir, "--model " DATA "op_global_avg_pool.onnx", 1,
            "output 'y' is [2,4,1,1] at batch 2; the training step's softmax cross-entropy takes [batch, classes]");
    refused(dir, "--model " DATA "unknown_op.onnx", 1, "operator Hardmax is not supported");
    refused(dir, "--sweep model", 2, "--sweep model needs --model FILE.onnx");
    refused(dir, "--sweep mlp --model " DATA "mlp.onnx", 2, "--model is for the model sweep");
    refused(dir, "--model " DATA "mlp.in.f32", 2, "bad --model");
}

/* ---- a planted bug: the CPU's weight gradient of every convolution 1.5x
 * too large; the loss is right, the convolution's update is not ---- */

static const dg_backend_i *cpu_iface;
static dg_status conv_grad_too_large(dg_backend *be, const dg_step *s) {
    dg_status st = cpu_iface->compute(be, s);
    if (st != DG_OK || s->node->op != DG_OP_CONV2D_BACKWARD_WEIGHT) return st;
    float *dw = s->out;
    for (int64_t i = 0; i < dg_node_numel(s->node); i++) dw[i] *= 1.5f;
    return st;
}

/* sweep_model on be for the file's model (has_bn: it has a batch norm) at
 * batch 4 in the n precisions p[]: its rows (held), one per precision */
static csv_rec *sweep_on(dg_backend *be, const char *file, bool has_bn, const dg_precision *p, int n) {
    char dir[] = "/tmp/dg-model-XXXXXX";
    tmp_dir(dir);
    held_dir(dir);
    bench_ctx ctx = {.out_dir = dir, .cpu = be, .threads = 2, .model_path = file,
                     .size_lists = {{.v = {4}, .n = 1}}, .n_size_lists = 1,
                     .timing = {.min_reps = 1, .max_reps = 1}, .cpu_cap_s = 86400, .n_precisions = n};
    for (int i = 0; i < n; i++) ctx.precisions[i] = p[i];
    ASSERT_OK(bench_model_load(ctx.model_path, &ctx.model, &ctx.model_has_batch_norm));
    cr_assert_eq(ctx.model_has_batch_norm, has_bn, "%s: has_batch_norm %d", file, ctx.model_has_batch_norm);
    ctx.csv = bench_csv_open(dir, "model", "# planted\n", BENCH_CSV_HEADER);
    cr_assert_not_null(ctx.csv, "%s", dg_last_error());
    held_file(ctx.csv);
    ASSERT_OK(sweep_model(&ctx));
    held_drop(ctx.csv, true); /* closed by bench_csv_finish */
    ASSERT_OK(bench_csv_finish(ctx.csv, dir, "model", true));
    dg_onnx_free(ctx.model);
    int rows;
    csv_rec *r = rows_of(dir, &rows);
    cr_assert_eq(rows, n, "%s: %d rows, %d precisions", file, rows, n);
    return r;
}

static csv_rec *cnn_fp32_on(dg_backend *be) {
    return sweep_on(be, DATA "cnn.onnx", true, (dg_precision[]){DG_PREC_FP32}, 1);
}

Test(model_sweep, a_wrong_weight_gradient_makes_the_rows_wrong) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    held_backend(be, be->iface);
    csv_rec *r = cnn_fp32_on(be);
    cr_assert(measured(r), "the right backend's row: %s: %s (max_rel_err %g)", r->status, r->note, r->max_rel_err);
    held_free(r);
    cpu_iface = be->iface;
    dg_backend_i planted = *be->iface;
    planted.compute = conv_grad_too_large;
    be->iface = &planted;
    r = cnn_fp32_on(be);
    be->iface = cpu_iface;
    cr_assert_str_eq(r->status, "wrong", "a 1.5x convolution weight gradient passes: max_rel_err %g", r->max_rel_err);
    cr_assert(r->max_rel_err > BENCH_RESNET_UPDATE_TOL && strstr(r->note, "float64"), "max_rel_err %g: %s",
              r->max_rel_err, r->note);
    /* the note says which part failed and by how much (bench_step_error) */
    cr_assert(strstr(r->note, "updates") && strstr(r->note, "(tol "), "the note names no error: %s", r->note);
    cr_assert(isnan(r->median_ms) || r->median_ms == 0, "a wrong row is not timed: %g ms", r->median_ms);
    held_free(r);
}

/* ---- a planted bug: every parameter's update 1.3x its size (the
 * momentum step's weights moved 1.3x as far), an update error of 0.3:
 * above the tolerance of a step without batch norm in bf16 (0.15,
 * bench_step_tol_in), within a batch-norm step's (0.6,
 * bench_step_tol_bn_in), above fp32's (0.05) for both. fp16 has the same
 * two tolerances, but the CNN's fp16 check step overflows the initial
 * loss scale and skips its update (as its reference does): nothing to
 * scale there ---- */

#define UPDATE_SCALE 1.3f

static dg_status update_too_large(dg_backend *be, const dg_step *s) {
    if (s->node->op != DG_OP_MOMENTUM_UPDATE) return cpu_iface->compute(be, s);
    int64_t n = dg_node_numel(s->node);
    float *w = s->inout[0], *before = malloc((size_t)n * sizeof *before);
    if (!before) return dg_fail(DG_ERR_OOM, "planted update: out of memory");
    memcpy(before, w, (size_t)n * sizeof *w);
    dg_status st = cpu_iface->compute(be, s);
    for (int64_t i = 0; i < n; i++) w[i] = before[i] + UPDATE_SCALE * (w[i] - before[i]);
    free(before);
    return st;
}

/* the row of precision p among n rows */
static const csv_rec *row_in(const csv_rec *r, int n, dg_precision p) {
    for (int i = 0; i < n; i++)
        if (r[i].precision == p) return &r[i];
    cr_assert_fail("no %s row", dg_precision_name(p));
    return NULL;
}

/* The sweep checks a model with a batch norm (the CNN) at the batch-norm
 * tolerances and one without (the MLP) at the plain ones: with every
 * update 1.3x too large, the CNN's bf16 row passes and the MLP's is
 * "wrong", while fp32 (one tolerance for both) fails both. Catches
 * sweep_model checking every model at either tolerance. */
Test(model_sweep, batch_norm_models_are_checked_at_the_batch_norm_tolerances) {
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 2));
    held_backend(be, be->iface);
    cpu_iface = be->iface;
    dg_backend_i planted = *be->iface;
    planted.compute = update_too_large;
    be->iface = &planted;
    const dg_precision p[] = {DG_PREC_FP32, DG_PREC_BF16};
    const bench_step_tol tol = bench_model_step(NULL).tol;
    const struct { const char *file; bool bn; } models[] = {{DATA "cnn.onnx", true}, {DATA "mlp.onnx", false}};
    for (int m = 0; m < 2; m++) {
        csv_rec *r = sweep_on(be, models[m].file, models[m].bn, p, 2);
        for (int i = 0; i < 2; i++) {
            const csv_rec *row = row_in(r, 2, p[i]);
            double bound = (models[m].bn ? bench_step_tol_bn_in(p[i], tol) : bench_step_tol_in(p[i], tol)).update;
            bool pass = p[i] != DG_PREC_FP32 && models[m].bn;
            /* the planted error, between the tolerances it tells apart */
            cr_assert(fabs(row->max_rel_err - (UPDATE_SCALE - 1)) < 0.05, "%s %s: max_rel_err %g", models[m].file,
                      dg_precision_name(p[i]), row->max_rel_err);
            cr_assert_eq(pass, row->max_rel_err <= bound, "the planted error does not tell the tolerances apart");
            cr_assert(pass ? measured(row) : !strcmp(row->status, "wrong"),
                      "%s %s: status %s (max_rel_err %g; the %s tolerance %g): %s", models[m].file,
                      dg_precision_name(p[i]), row->status, row->max_rel_err, models[m].bn ? "batch-norm" : "plain",
                      bound, row->note);
        }
        held_free(r);
    }
    be->iface = cpu_iface;
}

/* The GPU's rows of the CNN at batch 4: gpu and gpu-graph in fp32, tf32,
 * bf16 and fp16, each checked against its own float64 step. */
Test(model_sweep, gpu_rows_in_every_precision_are_checked) {
    dg_backend_free(test_backend_open(true)); /* skips without a device */
    char dir[] = "/tmp/dg-model-XXXXXX", cmd[1024], out[1 << 14];
    tmp_dir(dir);
    held_dir(dir);
    snprintf(cmd, sizeof cmd, "%s --model " DATA "cnn.onnx --sizes model=4 --backends gpu --reps 1 --warmup 0 "
             "--min-time 0 --dtype all --out %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    int n;
    csv_rec *r = rows_of(dir, &n);
    cr_assert_eq(n, 8, "gpu and gpu-graph in 4 precisions: %d rows", n);
    bench_step_tol tol = bench_model_step(NULL).tol;
    for (int i = 0; i < n; i++) {
        cr_assert(measured(&r[i]) && !strcmp(r[i].backend, "gpu"), "%s %s: %s: %s", r[i].impl,
                  dg_precision_name(r[i].precision), r[i].status, r[i].note);
        cr_assert(r[i].max_rel_err <= bench_step_tol_bn_in(r[i].precision, tol).update, "%s %s: max_rel_err %g",
                  r[i].impl, dg_precision_name(r[i].precision), r[i].max_rel_err);
    }
    held_free(r);
}
