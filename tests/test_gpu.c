/* test_gpu.c: the CUDA backend against the CPU backend and the float64
 * reference. Every test opens the device itself (Criterion runs each test
 * in its own process) and skips with the reason where none answers, or
 * fails under DG_REQUIRE_GPU=1 (gpu_util.h). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <duograd/testing.h>

#include "core/dtype_convert.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "gpu_backend/gpu_backend.h"
#include "gpu_util.h"
#include "shell_util.h"
#include "test_util.h"
#include "train_util.h"

#define NMSE_MAX 1e-9 /* float32 kernels that differ only in rounding order */

static struct criterion_test_params case_indices(void) {
    static int idx[256];
    for (int i = 0; i < dg_n_op_cases; i++) idx[i] = i;
    return cr_make_param_array(int, idx, (size_t)dg_n_op_cases);
}

#define ASSERT_NMSE(stats, what, name, seed)                                                               \
    cr_assert((stats).nmse <= NMSE_MAX,                                                                    \
              "%s [%s, seed %llu]: gpu vs cpu nmse %.3g > %.3g; worst element %lld: gpu %.9g, cpu %.9g", what, \
              name, (unsigned long long)(seed), (stats).nmse, NMSE_MAX, (long long)(stats).worst, (stats).got, \
              (stats).want)

/* Forward and every gradient of each op-table row, GPU against CPU, and
 * the GPU against the float64 reference with the row's tolerance. */
ParameterizedTestParameters(gpu, op_agrees_with_cpu) { return case_indices(); }
ParameterizedTest(int *row, gpu, op_agrees_with_cpu) {
    const op_case *c = &dg_op_cases[*row];
    dg_backend *gpu = gpu_open_or_skip(NULL), *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 0));
    uint64_t seed = test_seed();
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, c, seed));
    case_result rg, rc;
    case_ref ref;
    ASSERT_OK(case_run(&cg, gpu, &rg));
    ASSERT_OK(case_run(&cg, cpu, &rc));
    ASSERT_OK(case_ref_run(&cg, &ref));
    cmp_stats s = cmp_f32_f32(rg.out, rc.out, rg.n_out);
    double worst = s.nmse;
    ASSERT_NMSE(s, "forward", c->name, seed);
    ASSERT_CLOSE(cmp_f32(rg.out, ref.out, rg.n_out), c->tol, "gpu forward vs float64", c->name, seed);
    for (int i = 0; i < c->n_in; i++) {
        if (!cg.grad[i]) continue;
        s = cmp_f32_f32(rg.grad[i], rc.grad[i], rg.n_grad[i]);
        worst = s.nmse > worst ? s.nmse : worst;
        ASSERT_NMSE(s, "gradient", c->name, seed);
        ASSERT_CLOSE(cmp_f32(rg.grad[i], ref.grad[i], rg.n_grad[i]), c->tol, "gpu grad vs float64", c->name, seed);
    }
    cr_log_info("nmse %-16s %s %.3g", dg_op_name(c->op), c->name, worst);
    case_result_free(&rg);
    case_result_free(&rc);
    case_ref_free(&ref);
    case_graph_free(&cg);
    dg_backend_free(cpu);
    dg_backend_free(gpu);
}

/* every sgemm implementation, odd sizes, all transposes, against float64 */
Test(gpu, sgemm_implementations) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    const int sizes[][3] = {{1, 1, 1}, {7, 5, 3}, {129, 131, 9}, {200, 77, 515}, {256, 256, 256}};
    uint64_t seed = test_seed();
    dg_rng r = dg_rng_new(seed);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            int m = sizes[si][0], n = sizes[si][1], k = sizes[si][2];
            size_t ba = sizeof(float) * m * k, bb = sizeof(float) * k * n, bc = sizeof(float) * m * n;
            float *A = malloc(ba), *B = malloc(bb), *C = malloc(bc);
            double *R = malloc(sizeof(double) * m * n);
            for (int i = 0; i < m * k; i++) A[i] = (float)(2 * dg_rng_uniform(&r) - 1);
            for (int i = 0; i < k * n; i++) B[i] = (float)(2 * dg_rng_uniform(&r) - 1);
            ref_sgemm(ta, tb, m, n, k, A, B, R);
            void *dA, *dB, *dC;
            ASSERT_OK(dg_backend_alloc(gpu, ba, &dA));
            ASSERT_OK(dg_backend_alloc(gpu, bb, &dB));
            ASSERT_OK(dg_backend_alloc(gpu, bc, &dC));
            ASSERT_OK(dg_backend_upload(gpu, dA, A, ba));
            ASSERT_OK(dg_backend_upload(gpu, dB, B, bb));
            for (int impl = 0; impl < 3; impl++) {
                for (int i = 0; i < m * n; i++) C[i] = NAN; /* poison: every element must be written */
                ASSERT_OK(dg_backend_upload(gpu, dC, C, bc));
                ASSERT_OK(dg_gpu_sgemm(gpu, (dg_gpu_gemm)impl, false, ta, tb, m, n, k, dA, dB, dC));
                ASSERT_OK(dg_backend_download(gpu, C, dC, bc));
                char name[64];
                snprintf(name, sizeof name, "%s %dx%dx%d ta=%d tb=%d",
                         impl == 0 ? "cublas" : impl == 1 ? "naive" : "tiled", m, n, k, ta, tb);
                ASSERT_CLOSE(cmp_f32(C, R, (int64_t)m * n), 1e-5, "sgemm", name, seed);
            }
            dg_backend_release(gpu, dA);
            dg_backend_release(gpu, dB);
            dg_backend_release(gpu, dC);
            free(A); free(B); free(C); free(R);
        }
    dg_backend_free(gpu);
}

/* The tiled kernel at sizes that are not multiples of any of its tiles
 * (128x128, 128x64, 64x64; which one runs depends on the shape), every
 * transpose, k not a multiple of its k-step of 8: the predicated edge
 * tiles. Odd n and k give unaligned rows (single-float loads), the even
 * sizes float4 loads with partial tiles. Against float64. */
Test(gpu, sgemm_tiled_ragged_edges) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    const int sizes[][3] = {{2047, 2049, 67}, {1000, 1032, 132}, {515, 700, 35}, {129, 1000, 1003}, {33, 4097, 9}};
    uint64_t seed = test_seed();
    dg_rng r = dg_rng_new(seed);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int m = sizes[si][0], n = sizes[si][1], k = sizes[si][2];
        size_t ba = sizeof(float) * m * k, bb = sizeof(float) * k * n, bc = sizeof(float) * m * n;
        float *A = malloc(ba), *B = malloc(bb), *C = malloc(bc);
        double *R = malloc(sizeof(double) * m * n);
        cr_assert(A && B && C && R);
        for (int i = 0; i < m * k; i++) A[i] = (float)(2 * dg_rng_uniform(&r) - 1);
        for (int i = 0; i < k * n; i++) B[i] = (float)(2 * dg_rng_uniform(&r) - 1);
        void *dA, *dB, *dC;
        ASSERT_OK(dg_backend_alloc(gpu, ba, &dA));
        ASSERT_OK(dg_backend_alloc(gpu, bb, &dB));
        ASSERT_OK(dg_backend_alloc(gpu, bc, &dC));
        ASSERT_OK(dg_backend_upload(gpu, dA, A, ba));
        ASSERT_OK(dg_backend_upload(gpu, dB, B, bb));
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            ref_sgemm(ta, tb, m, n, k, A, B, R);
            for (size_t i = 0; i < (size_t)m * n; i++) C[i] = NAN; /* every element must be written */
            ASSERT_OK(dg_backend_upload(gpu, dC, C, bc));
            ASSERT_OK(dg_gpu_sgemm(gpu, DG_GPU_GEMM_TILED, false, ta, tb, m, n, k, dA, dB, dC));
            ASSERT_OK(dg_backend_download(gpu, C, dC, bc));
            char name[64];
            snprintf(name, sizeof name, "tiled %dx%dx%d ta=%d tb=%d", m, n, k, ta, tb);
            ASSERT_CLOSE(cmp_f32(C, R, (int64_t)m * n), 1e-5, "sgemm", name, seed);
        }
        dg_backend_release(gpu, dA);
        dg_backend_release(gpu, dB);
        dg_backend_release(gpu, dC);
        free(A); free(B); free(C); free(R);
    }
    dg_backend_free(gpu);
}

/* softmax, log-softmax and softmax cross-entropy, forward and gradients, at
 * row widths around the register kernels' limits: whole and partly filled
 * float4 sets of 1, 2, 4 and 8 per lane (4 .. 1024 floats), and widths
 * that take the two-pass kernels (not a multiple of 4, over 1024). GPU
 * against the float64 reference and against the CPU. */
Test(gpu, softmax_row_widths) {
    dg_backend *gpu = gpu_open_or_skip(NULL), *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 0));
    const char *names[] = {"softmax", "log_softmax", "softmax_ce"};
    const int widths[] = {4, 100, 128, 132, 256, 260, 512, 1000, 1024, 1026, 1028, 2048};
    const int rows = 37;
    uint64_t seed = test_seed();
    for (size_t ni = 0; ni < sizeof names / sizeof *names; ni++) {
        const op_case *c = NULL;
        for (int i = 0; i < dg_n_op_cases && !c; i++)
            if (!strcmp(dg_op_cases[i].name, names[ni])) c = &dg_op_cases[i];
        cr_assert(c, "no op case named %s", names[ni]);
        for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
            dg_shape shape[OP_CASE_MAX_IN] = {DG_SHAPE(rows, widths[wi]), DG_SHAPE(rows)};
            char name[64];
            snprintf(name, sizeof name, "%s [%d, %d]", names[ni], rows, widths[wi]);
            case_graph cg;
            ASSERT_OK(case_graph_new_at(&cg, c, shape, seed));
            case_result rg, rc;
            case_ref ref;
            ASSERT_OK(case_run(&cg, gpu, &rg));
            ASSERT_OK(case_run(&cg, cpu, &rc));
            ASSERT_OK(case_ref_run(&cg, &ref));
            ASSERT_NMSE(cmp_f32_f32(rg.out, rc.out, rg.n_out), "forward", name, seed);
            ASSERT_CLOSE(cmp_f32(rg.out, ref.out, rg.n_out), c->tol, "gpu forward vs float64", name, seed);
            cr_assert(cg.grad[0], "%s: no gradient of the logits", name);
            ASSERT_NMSE(cmp_f32_f32(rg.grad[0], rc.grad[0], rg.n_grad[0]), "gradient", name, seed);
            ASSERT_CLOSE(cmp_f32(rg.grad[0], ref.grad[0], rg.n_grad[0]), c->tol, "gpu grad vs float64", name, seed);
            case_result_free(&rg);
            case_result_free(&rc);
            case_ref_free(&ref);
            case_graph_free(&cg);
        }
    }
    dg_backend_free(cpu);
    dg_backend_free(gpu);
}

/* Pools whose windows are 2^31 - 1 taps tall over 4 rows of x (padding
 * 2^30 - 1, at most half the window, so the builder accepts them): the GPU
 * kernels loop over the taps inside x alone, as the CPU's do, and agree
 * with them. Looping over every tap and skipping the padding took seconds
 * a window in the forward and longer in the backward (the timeout). Such
 * windows run max_pool2d_backward's 64-bit kernel (their extent does not
 * fit its 32-bit one); the op table's pools run the 32-bit one. */
Test(gpu, pools_loop_over_the_taps_inside_x_alone, .timeout = 20) {
    dg_backend *gpu = gpu_open_or_skip(NULL), *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 0));
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_param(g, "x", DG_SHAPE(1, 2, 4, 5), (dg_init){DG_INIT_UNIFORM, -1, 1, 11});
    dg_pool2d_opts o = {.kernel = {INT32_MAX, 3}, .stride = {1, 1}, .pad = {(1 << 30) - 1, 1}};
    dg_node *mx = dg_max_pool2d(g, x, o), *av = dg_avg_pool2d(g, x, o), *dx;
    ASSERT_OK(dg_graph_status(g));
    cr_assert_eq(mx->shape.d[2], 4, "oh %lld", (long long)mx->shape.d[2]);
    dg_node *loss = dg_add(g, dg_sum(g, mx, DG_ALL_AXES, false), dg_sum(g, av, DG_ALL_AXES, false));
    ASSERT_OK(dg_grad(g, loss, &x, 1, &dx));
    dg_node *outs[4] = {mx, mx->side[0], av, dx};
    float y[2][4][40];
    int32_t arg[2][40];
    dg_backend *be[2] = {gpu, cpu};
    for (int b = 0; b < 2; b++) {
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, g, be[b], outs, 4, NULL));
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(dg_plan_get(p, mx, y[b][0], sizeof y[b][0]));
        ASSERT_OK(dg_plan_get(p, mx->side[0], arg[b], sizeof arg[b]));
        ASSERT_OK(dg_plan_get(p, av, y[b][1], sizeof y[b][1]));
        ASSERT_OK(dg_plan_get(p, dx, y[b][2], sizeof y[b][2]));
        dg_plan_free(p);
    }
    for (int i = 0; i < 40; i++) {
        cr_assert_eq(y[0][0][i], y[1][0][i], "max_pool2d y[%d]: gpu %g, cpu %g", i, y[0][0][i], y[1][0][i]);
        cr_assert_eq(arg[0][i], arg[1][i], "argmax[%d]: gpu %d, cpu %d", i, arg[0][i], arg[1][i]);
    }
    ASSERT_NMSE(cmp_f32_f32(y[0][1], y[1][1], 40), "avg_pool2d", "2^31 - 1 taps", 11);
    ASSERT_NMSE(cmp_f32_f32(y[0][2], y[1][2], 40), "dx", "2^31 - 1 taps", 11);
    dg_graph_free(g);
    dg_backend_free(cpu);
    dg_backend_free(gpu);
}

/* Every softmax-like op with logits in [-mag, mag] (the table draws
 * [-2, 2]) at 100 and 1000, where exp of a logit overflows float: a row
 * reduced without its max subtracted (or with 0 for the max) gives inf or
 * NaN. Widths that take the register kernels (4, 128, 1024) and the
 * two-pass ones (1026, 2048). GPU against the float64 reference, with a
 * tolerance that grows with the logits (float rounds x - max to |x| *
 * 2^-24, and __expf adds its own error of the same order), and against the
 * CPU. */
Test(gpu, softmax_family_at_large_logits) {
    dg_backend *gpu = gpu_open_or_skip(NULL), *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 0));
    const char *names[] = {"softmax", "softmax_scaled", "softmax_causal", "log_softmax", "softmax_ce"};
    const int widths[] = {4, 128, 1024, 1026, 2048};
    const float mags[] = {100.0f, 1000.0f};
    const int rows = 9;
    uint64_t seed = test_seed();
    for (size_t ni = 0; ni < sizeof names / sizeof *names; ni++) {
        const op_case *c = NULL;
        for (int i = 0; i < dg_n_op_cases && !c; i++)
            if (!strcmp(dg_op_cases[i].name, names[ni])) c = &dg_op_cases[i];
        cr_assert(c, "no op case named %s", names[ni]);
        for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
            for (size_t mi = 0; mi < sizeof mags / sizeof *mags; mi++) {
                dg_shape shape[OP_CASE_MAX_IN] = {DG_SHAPE(rows, widths[wi]), DG_SHAPE(rows)};
                char name[80];
                snprintf(name, sizeof name, "%s [%d, %d] at +-%g", names[ni], rows, widths[wi], (double)mags[mi]);
                case_graph cg;
                ASSERT_OK(case_graph_new_at(&cg, c, shape, seed));
                for (int64_t j = 0; j < dg_node_numel(cg.in[0]); j++) cg.in_val[0][j] *= mags[mi] / 2.0f;
                case_result rg, rc;
                case_ref ref;
                ASSERT_OK(case_run(&cg, gpu, &rg));
                ASSERT_OK(case_run(&cg, cpu, &rc));
                ASSERT_OK(case_ref_run(&cg, &ref));
                double tol = c->tol * mags[mi];
                ASSERT_CLOSE(cmp_f32(rg.out, ref.out, rg.n_out), tol, "gpu forward vs float64", name, seed);
                /* a saturated row's gradient is w - sum(w y) cancelling to
                 * float32's rounding of y; a row without its max is still
                 * inf or NaN */
                cmp_stats gs = grad_vs_dy(cmp_f32(rg.grad[0], ref.grad[0], rg.n_grad[0]), ref.grad[0], rg.n_grad[0],
                                          cg.w_val, dg_node_numel(cg.w));
                ASSERT_CLOSE(gs, tol, "gpu grad vs float64 (scale: max of it and dy)", name, seed);
                ASSERT_CLOSE(cmp_f32(rc.out, ref.out, rc.n_out), tol, "cpu forward vs float64", name, seed);
                case_result_free(&rg);
                case_result_free(&rc);
                case_ref_free(&ref);
                case_graph_free(&cg);
            }
    }
    dg_backend_free(cpu);
    dg_backend_free(gpu);
}

/* Labels outside [0, classes) and embedding ids outside [0, V) are
 * refused by dg_plan_set on the GPU backend too (no device flag: the GPU
 * kernels would turn the loss NaN without a status), naming the first,
 * and nothing is copied. */
Test(gpu, labels_and_ids_outside_their_range_are_refused) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    dg_graph *g = dg_graph_new();
    dg_node *logits = dg_param(g, "logits", DG_SHAPE(4, 5), (dg_init){DG_INIT_UNIFORM, -1, 1, 7});
    dg_node *labels = dg_input_i32(g, "labels", DG_SHAPE(4));
    dg_node *table = dg_param(g, "table", DG_SHAPE(6, 3), (dg_init){DG_INIT_UNIFORM, -1, 1, 8});
    dg_node *ids = dg_input_i32(g, "ids", DG_SHAPE(3));
    dg_node *outs[2] = {dg_softmax_cross_entropy(g, logits, labels), dg_embedding(g, table, ids)};
    ASSERT_OK(dg_graph_status(g));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, gpu, outs, 2, NULL));
    const int32_t good[4] = {0, 4, 2, 2}, bad[4] = {0, 1, 5, 2}, good_ids[3] = {5, 0, 1}, bad_ids[3] = {5, 6, -1};
    ASSERT_OK(dg_plan_set(p, labels, good, sizeof good));
    ASSERT_OK(dg_plan_set(p, ids, good_ids, sizeof good_ids));
    cr_assert_eq(dg_plan_set(p, labels, bad, sizeof bad), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "label 5 at position 2 of 'labels' is outside [0, 5)"), "%s", dg_last_error());
    cr_assert_eq(dg_plan_set(p, ids, bad_ids, sizeof bad_ids), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "id 6 at position 1 of 'ids' is outside [0, 6)"), "%s", dg_last_error());
    int32_t back[4];
    ASSERT_OK(dg_plan_get(p, labels, back, sizeof back));
    cr_assert(!memcmp(back, good, sizeof good), "a refused set changed the labels");
    ASSERT_OK(dg_plan_run(p));
    float loss;
    ASSERT_OK(dg_plan_get(p, outs[0], &loss, sizeof loss));
    cr_assert(isfinite(loss), "loss %g", (double)loss);
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(gpu);
}

/* the backend's matmul on its own kernels: every matmul row of the op table,
 * forward and gradients, against the float64 reference */
Test(gpu, backend_matmul_with_own_kernels) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    uint64_t seed = test_seed();
    const dg_gpu_gemm impls[] = {DG_GPU_GEMM_TILED, DG_GPU_GEMM_NAIVE};
    int rows = 0;
    for (int i = 0; i < dg_n_op_cases; i++) {
        const op_case *c = &dg_op_cases[i];
        if (c->op != DG_OP_MATMUL || c->build) continue;
        rows++;
        case_graph cg;
        case_ref ref;
        ASSERT_OK(case_graph_new(&cg, c, seed));
        ASSERT_OK(case_ref_run(&cg, &ref));
        for (int k = 0; k < 2; k++) {
            dg_gpu_set_gemm(gpu, impls[k]);
            case_result r;
            ASSERT_OK(case_run(&cg, gpu, &r));
            char what[64];
            snprintf(what, sizeof what, "gpu gemm impl %d forward", (int)impls[k]);
            ASSERT_CLOSE(cmp_f32(r.out, ref.out, r.n_out), c->tol, what, c->name, seed);
            for (int j = 0; j < c->n_in; j++) {
                snprintf(what, sizeof what, "gpu gemm impl %d grad %d", (int)impls[k], j);
                ASSERT_CLOSE(cmp_f32(r.grad[j], ref.grad[j], r.n_grad[j]), c->tol, what, c->name, seed);
            }
            case_result_free(&r);
        }
        case_ref_free(&ref);
        case_graph_free(&cg);
    }
    cr_assert_geq(rows, 8, "only %d matmul rows in the op table", rows);
    dg_backend_free(gpu);
}

static const int widths[] = {64, 48, 32, 10};
enum { BATCH = 96 };

typedef struct step_run { float loss[8]; float *params; size_t n_params; } step_run;

static dg_optim optim_of(dg_optim_kind kind) {
    return dg_optim_default(kind, kind == DG_OPTIM_ADAM ? 1e-2f : 5e-2f);
}

/* the final weights of plan p of training graph t, concatenated */
static void get_params(dg_plan *p, const train_graph *t, step_run *out) {
    out->n_params = 0;
    for (int i = 0; i < t->model.n_params; i++) out->n_params += (size_t)dg_node_numel(t->model.params[i]);
    out->params = malloc(out->n_params * sizeof(float));
    size_t off = 0;
    for (int i = 0; i < t->model.n_params; i++) {
        ASSERT_OK(dg_plan_get(p, t->model.params[i], out->params + off, dg_node_bytes(t->model.params[i])));
        off += (size_t)dg_node_numel(t->model.params[i]);
    }
}

/* Runs `steps` training steps on be under plan options po (NULL: the
 * defaults); records losses and the final weights. */
static void run_steps(dg_backend *be, dg_optim_kind kind, int steps, const blobs *data, const dg_plan_opts *po,
                      step_run *out) {
    dg_optim o = optim_of(kind);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, widths, 4, BATCH, &o, 7));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, t.g, be, t.step.outputs, t.step.n_outputs, po));
    ASSERT_OK(dg_plan_set(p, t.step.x, data->x, dg_node_bytes(t.step.x)));
    ASSERT_OK(dg_plan_set(p, t.step.y, data->y, dg_node_bytes(t.step.y)));
    for (int s = 0; s < steps; s++) {
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(dg_plan_get(p, t.step.loss, &out->loss[s], sizeof(float)));
    }
    get_params(p, &t, out);
    dg_plan_free(p);
    train_graph_free(&t);
}

Test(gpu, mlp_training_steps_agree_with_cpu) {
    dg_backend *gpu = gpu_open_or_skip(NULL), *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 0));
    blobs data;
    cr_assert_eq(blobs_new(&data, BATCH, widths[0], widths[3], test_seed()), 0);
    for (int kind = 0; kind < 3; kind++) {
        step_run g, c;
        run_steps(gpu, (dg_optim_kind)kind, 8, &data, NULL, &g);
        run_steps(cpu, (dg_optim_kind)kind, 8, &data, NULL, &c);
        for (int s = 0; s < 8; s++)
            cr_assert_float_eq(g.loss[s], c.loss[s], 1e-4f * (1 + c.loss[s]), "%s step %d: loss gpu %.7g cpu %.7g",
                               dg_optim_name((dg_optim_kind)kind), s, g.loss[s], c.loss[s]);
        cmp_stats st = cmp_f32_f32(g.params, c.params, (int64_t)c.n_params);
        cr_log_info("%s: 8 steps, weights nmse gpu vs cpu %.3g", dg_optim_name((dg_optim_kind)kind), st.nmse);
        cr_assert_leq(st.nmse, 1e-8, "%s: weights after 8 steps differ, nmse %.3g (worst %lld: %.9g vs %.9g)",
                      dg_optim_name((dg_optim_kind)kind), st.nmse, (long long)st.worst, st.got, st.want);
        free(g.params);
        free(c.params);
    }
    blobs_free(&data);
    dg_backend_free(cpu);
    dg_backend_free(gpu);
}

/* replay is a plan option: a replayed plan and a node-by-node plan of the
 * same graph on one backend agree bit for bit */
Test(gpu, cuda_graph_replay_equals_plain_runs) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    blobs data;
    cr_assert_eq(blobs_new(&data, BATCH, widths[0], widths[3], test_seed()), 0);
    for (int kind = 0; kind < 3; kind++) {
        step_run a, b;
        run_steps(gpu, (dg_optim_kind)kind, 8, &data, &(dg_plan_opts){.no_replay = false}, &a);
        run_steps(gpu, (dg_optim_kind)kind, 8, &data, &(dg_plan_opts){.no_replay = true}, &b);
        cr_assert(memcmp(a.loss, b.loss, sizeof a.loss) == 0, "%s: losses differ under graph replay",
                  dg_optim_name((dg_optim_kind)kind));
        cr_assert(a.n_params == b.n_params && memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
                  "%s: weights differ under graph replay", dg_optim_name((dg_optim_kind)kind));
        free(a.params);
        free(b.params);
    }
    blobs_free(&data);
    dg_backend_free(gpu);
}

/* Column sums run in one launch: each strip's last block to finish sums
 * the strip's partials, found by a per-strip arrival count that block
 * sets back to zero (gpu_reduce.cu). Six sums and means in one replayed
 * plan, of 1 to 64 row slices (so the counts are shared by sums of
 * different slice counts) and a ragged last strip, one of a bf16 x into
 * float32. Four runs: the first two on new multiples of 1/16 (every sum
 * and mean exact in float32, so held to float64's value exactly: a count
 * not set back leaves y unwritten on the next run, a partial read from
 * the wrong slice or column is off by whole terms, a mean's scale applied
 * twice or not at all is off by far), the last two on the same uniform
 * values, whose roundings depend on the order of the sum: the same bits
 * both times, within float32's bound for the sum. */
Test(gpu, column_sums_are_right_on_every_run) {
    enum { N_SUMS = 6 };
    static const int64_t rows[N_SUMS] = {4096, 3000, 1000, 50, 2048, 64}, cols[N_SUMS] = {100, 1000, 40, 70, 36, 70};
    dg_backend *gpu = gpu_open_or_skip(NULL);
    dg_graph *g = dg_graph_new();
    dg_node *x[N_SUMS], *y[N_SUMS];
    for (int k = 0; k < N_SUMS; k++) {
        x[k] = dg_input(g, "x", DG_SHAPE(rows[k], cols[k]));
        y[k] = k == 2 ? dg_sum_ex(g, dg_cast(g, x[k], DG_BF16), 1u, false, DG_F32)
               : k >= 4 ? dg_mean(g, x[k], 1u, false)
                        : dg_sum(g, x[k], 1u, false);
    }
    ASSERT_OK(dg_graph_status(g));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, gpu, y, N_SUMS, NULL));
    dg_rng r = dg_rng_new(test_seed());
    float *xs[N_SUMS], *ys[N_SUMS][2];
    for (int k = 0; k < N_SUMS; k++) {
        xs[k] = malloc((size_t)(rows[k] * cols[k]) * sizeof(float));
        for (int b = 0; b < 2; b++) ys[k][b] = malloc((size_t)cols[k] * sizeof(float));
        cr_assert(xs[k] && ys[k][0] && ys[k][1]);
    }
    for (int run = 0; run < 4; run++) {
        bool exact = run < 2;
        for (int k = 0; k < N_SUMS && run < 3; k++) /* exact: multiples of 1/16 under 4, exact in bf16 too */
            for (int64_t i = 0; i < rows[k] * cols[k]; i++)
                xs[k][i] = exact ? (float)((int)(dg_rng_u64(&r) % 129) - 64) / 16.0f
                                 : (float)(2 * dg_rng_uniform(&r) - 1);
        if (!exact) /* the bf16 copy rounds: its sum is of the rounded values */
            for (int64_t i = 0; i < rows[2] * cols[2]; i++) xs[2][i] = dg__bf16_to_f32(dg__f32_to_bf16(xs[2][i]));
        for (int k = 0; k < N_SUMS; k++) ASSERT_OK(dg_plan_set(p, x[k], xs[k], dg_node_bytes(x[k])));
        ASSERT_OK(dg_plan_run(p));
        for (int k = 0; k < N_SUMS; k++) {
            float *got = ys[k][run == 3];
            ASSERT_OK(dg_plan_get(p, y[k], got, (size_t)cols[k] * sizeof(float)));
            double scale = k >= 4 ? 1.0 / (double)rows[k] : 1.0;
            for (int64_t j = 0; j < cols[k]; j++) {
                double want = 0, mag = 0;
                for (int64_t i = 0; i < rows[k]; i++) {
                    want += xs[k][i * cols[k] + j];
                    mag += fabs(xs[k][i * cols[k] + j]);
                }
                double tol = exact ? 0 : (double)rows[k] * 0x1p-24 * mag * scale;
                cr_assert(fabs(got[j] - want * scale) <= tol, "run %d, sum %d [%lld x %lld], column %lld: %.9g, "
                          "float64 %.9g", run, k, (long long)rows[k], (long long)cols[k], (long long)j,
                          (double)got[j], want * scale);
            }
            if (run == 3)
                cr_assert(memcmp(ys[k][0], ys[k][1], (size_t)cols[k] * sizeof(float)) == 0,
                          "sum %d: a second run on the same values gave other bits", k);
        }
    }
    for (int k = 0; k < N_SUMS; k++) {
        free(xs[k]);
        free(ys[k][0]);
        free(ys[k][1]);
    }
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(gpu);
}

Test(gpu, runs_allocate_nothing) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, widths, 4, BATCH, &o, 3));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, t.g, gpu, t.step.outputs, t.step.n_outputs, NULL));
    ASSERT_OK(dg_plan_run(p));
    ASSERT_OK(dg_backend_sync(gpu));
    size_t before = dg_backend_n_allocs(gpu);
    cr_assert_gt(before, 0);
    for (int i = 0; i < 100; i++) ASSERT_OK(dg_plan_run(p));
    ASSERT_OK(dg_backend_sync(gpu));
    cr_assert_eq(dg_backend_n_allocs(gpu), before);
    dg_plan_free(p);
    train_graph_free(&t);
    dg_backend_free(gpu);
}

Test(gpu, impossible_allocation_is_oom_and_backend_survives) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    void *ptr = (void *)1;
    size_t huge = (size_t)1 << 50; /* 1 PiB */
    cr_assert_eq(dg_backend_alloc(gpu, huge, &ptr), DG_ERR_OOM, "got %s", dg_last_error());
    cr_assert_null(ptr);
    cr_assert(strstr(dg_last_error(), "1125899906842624"), "message lacks the size: %s", dg_last_error());
    /* a graph too large for the device fails in dg_plan_new, cleanly */
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(1 << 20, 1 << 19)), *y = dg_relu(g, x); /* 2 TiB each */
    dg_plan *p = NULL;
    cr_assert_eq(dg_plan_new(&p, g, gpu, &y, 1, NULL), DG_ERR_OOM, "got %s", dg_last_error());
    cr_assert_null(p);
    dg_graph_free(g);
    /* and the backend still computes */
    dg_optim o = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, widths, 4, BATCH, &o, 3));
    ASSERT_OK(dg_plan_new(&p, t.g, gpu, t.step.outputs, t.step.n_outputs, NULL));
    ASSERT_OK(dg_plan_run(p));
    float loss = NAN;
    ASSERT_OK(dg_plan_get(p, t.step.loss, &loss, sizeof loss));
    cr_assert(loss > 0 && loss < 100, "loss %g", loss);
    dg_plan_free(p);
    train_graph_free(&t);
    dg_backend_free(gpu);
}

/* Without a usable device the constructor fails as dg_gpu_probe words it:
 * absent is DG_ERR_NO_DEVICE "no CUDA device: ...", broken is
 * DG_ERR_BACKEND "CUDA device broken: ...", the same reason both ways. */
Test(gpu, no_usable_device_gives_a_clear_status) {
    char why[512];
    dg_gpu_state state = dg_gpu_probe(why, sizeof why);
    if (state == DG_GPU_PRESENT) cr_skip_test("a CUDA device answered (%s): nothing to check here", why);
    dg_backend *be = (dg_backend *)1;
    dg_status st = dg_gpu_backend_new(&be, NULL);
    cr_assert_null(be);
    cr_assert_eq(st, state == DG_GPU_ABSENT ? DG_ERR_NO_DEVICE : DG_ERR_BACKEND, "%s: %s", dg_status_name(st),
                 dg_last_error());
    const char *head = state == DG_GPU_ABSENT ? "no CUDA device: " : "CUDA device broken: ";
    cr_assert(strncmp(why, head, strlen(head)) == 0, "probe: %s", why);
    cr_assert_str_eq(dg_last_error(), why, "the constructor and the probe give different reasons");
}

/* cuBLAS is loaded when the first backend is made (gpu_cublas.cu), not
 * linked: its version, read through the loaded entry points, is in
 * dg_gpu_info (0 there when the query failed) */
Test(gpu, cublas_loaded_at_run_time) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    char info[256];
    dg_gpu_info(gpu, info, sizeof info);
    const char *v = strstr(info, "cuBLAS ");
    cr_assert(v && atoi(v + strlen("cuBLAS ")) > 0, "dg_gpu_info: %s", info);
    dg_backend_free(gpu);
}

/* ---- devices, declined nodes, events, per-plan TF32 ---- */

/* "NVIDIA H200, 132 SMs": the part of dg_gpu_info naming the device model */
static void model_of(const dg_backend *be, char *buf, size_t n) {
    dg_gpu_info(be, buf, n);
    char *cut = strstr(buf, " SMs");
    if (cut) *cut = '\0';
}

/* Backends on one device and on two live in one process: their plans of one
 * training graph, run in turns (each run switches the current device where
 * the backends' devices differ), give the same losses and weights. */
Test(gpu, backends_on_several_devices_in_one_process) {
    gpu_usable_or_skip();
    int count = dg_gpu_device_count();
    enum { MAX_BE = 3, STEPS = 8 };
    dg_backend *be[MAX_BE] = {gpu_open_or_skip(&(dg_gpu_opts){.device = 0}),
                              gpu_open_or_skip(&(dg_gpu_opts){.device = 0}), NULL};
    int n_be = 2;
    if (count > 1) be[n_be++] = gpu_open_or_skip(&(dg_gpu_opts){.device = 1});
    for (int i = 0; i < n_be; i++)
        cr_assert_eq(dg_gpu_device(be[i]), i < 2 ? 0 : 1, "backend %d reports device %d", i, dg_gpu_device(be[i]));
    cr_log_info("%d CUDA device(s); backends on devices 0, 0%s", count, n_be > 2 ? ", 1" : "");

    blobs data;
    cr_assert_eq(blobs_new(&data, BATCH, widths[0], widths[3], test_seed()), 0);
    dg_optim o = optim_of(DG_OPTIM_ADAM);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, widths, 4, BATCH, &o, 7));
    dg_plan *p[MAX_BE];
    step_run r[MAX_BE];
    for (int i = 0; i < n_be; i++) {
        ASSERT_OK(dg_plan_new(&p[i], t.g, be[i], t.step.outputs, t.step.n_outputs, NULL));
        ASSERT_OK(dg_plan_set(p[i], t.step.x, data.x, dg_node_bytes(t.step.x)));
        ASSERT_OK(dg_plan_set(p[i], t.step.y, data.y, dg_node_bytes(t.step.y)));
    }
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < n_be; i++) {
            ASSERT_OK(dg_plan_run(p[i]));
            ASSERT_OK(dg_plan_get(p[i], t.step.loss, &r[i].loss[s], sizeof(float)));
        }
    for (int i = 0; i < n_be; i++) get_params(p[i], &t, &r[i]);
    char m0[256], mi[256];
    model_of(be[0], m0, sizeof m0);
    for (int i = 1; i < n_be; i++) {
        model_of(be[i], mi, sizeof mi);
        if (strcmp(m0, mi) == 0) { /* the same kernels on the same model: bit for bit */
            cr_assert(memcmp(r[0].loss, r[i].loss, sizeof r[0].loss) == 0, "backend %d: losses differ from backend 0's", i);
            cr_assert(memcmp(r[0].params, r[i].params, r[0].n_params * sizeof(float)) == 0,
                      "backend %d: weights differ from backend 0's", i);
        } else { /* another model may pick other cuBLAS kernels and reduction splits */
            cmp_stats st = cmp_f32_f32(r[i].params, r[0].params, (int64_t)r[0].n_params);
            cr_assert_leq(st.nmse, 1e-8, "backend %d (%s) vs 0 (%s): weights nmse %.3g", i, mi, m0, st.nmse);
        }
    }
    for (int i = 0; i < n_be; i++) {
        free(r[i].params);
        dg_plan_free(p[i]);
        dg_backend_free(be[i]);
    }
    train_graph_free(&t);
    blobs_free(&data);

    /* an index past the last device, or negative, is refused with both numbers */
    const int bad[2] = {count, -1};
    for (int i = 0; i < 2; i++) {
        dg_backend *none = (dg_backend *)1;
        cr_assert_eq(dg_gpu_backend_new(&none, &(dg_gpu_opts){.device = bad[i]}), DG_ERR_INVALID,
                     "device %d: %s", bad[i], dg_last_error());
        cr_assert_null(none);
        char idx[32], cnt[32];
        snprintf(idx, sizeof idx, "index %d", bad[i]);
        snprintf(cnt, sizeof cnt, "%d CUDA device", count);
        cr_assert(strstr(dg_last_error(), idx) && strstr(dg_last_error(), cnt), "message: %s", dg_last_error());
    }
}

#define GPU_SCRATCH_FLOATS ((int64_t)4 << 20) /* gpu_backend.cu's SCRATCH_FLOATS */

/* a plan of output n on gpu is refused up front (DG_ERR_UNSUPPORTED, no
 * plan), the message naming n */
static void assert_plan_refused_naming(dg_backend *gpu, dg_graph *g, dg_node *n) {
    dg_plan *p = (dg_plan *)1;
    cr_assert_eq(dg_plan_new(&p, g, gpu, &n, 1, NULL), DG_ERR_UNSUPPORTED, "got %s", dg_last_error());
    cr_assert_null(p);
    cr_assert(strstr(dg_last_error(), n->name), "message lacks '%s': %s", n->name, dg_last_error());
}

/* softmax_cross_entropy keeps one loss per row in the backend's scratch: a
 * node with more rows is declined by supports, so dg_plan_new refuses the
 * graph with the node's name instead of a run failing */
Test(gpu, softmax_ce_beyond_the_scratch_is_declined_up_front) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    dg_graph *g = dg_graph_new();
    const int64_t rows[2] = {GPU_SCRATCH_FLOATS, GPU_SCRATCH_FLOATS + 1};
    dg_node *loss[2];
    for (int i = 0; i < 2; i++) {
        dg_node *x = dg_input(g, "logits", DG_SHAPE(rows[i], 1)), *y = dg_input_i32(g, "labels", DG_SHAPE(rows[i]));
        loss[i] = dg_softmax_cross_entropy(g, x, y);
    }
    ASSERT_OK(dg_graph_status(g));
    cr_assert(dg_backend_supports(gpu, loss[0]), "%lld rows fill the scratch exactly", (long long)rows[0]);
    cr_assert_not(dg_backend_supports(gpu, loss[1]), "%lld rows exceed the scratch", (long long)rows[1]);
    assert_plan_refused_naming(gpu, g, loss[1]);
    dg_graph_free(g);
    dg_backend_free(gpu);
}

/* batch norm keeps 2 floats a (channel, slice) and 2 a channel of its
 * backward's merged sums in the same scratch (gpu_norm.cu): at most
 * scratch / 4 channels. One more is declined by supports (the forward and
 * both backward ops), so dg_plan_new refuses the graph with the node's
 * name instead of the step failing in a run. */
Test(gpu, batch_norm_beyond_the_scratch_is_declined_up_front) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    dg_graph *g = dg_graph_new();
    const int64_t ch[2] = {GPU_SCRATCH_FLOATS / 4, GPU_SCRATCH_FLOATS / 4 + 1};
    dg_node *bn[2], *grads[2];
    for (int i = 0; i < 2; i++) {
        dg_node *x = dg_input(g, "x", DG_SHAPE(2, ch[i]));
        dg_node *scale = dg_param(g, "scale", DG_SHAPE(ch[i]), (dg_init){DG_INIT_FILL, 1, 0, 0});
        dg_node *shift = dg_param(g, "shift", DG_SHAPE(ch[i]), (dg_init){DG_INIT_FILL, 0, 0, 0});
        bn[i] = dg_batch_norm(g, x, scale, shift, 1e-5f);
        dg_node *loss = dg_sum(g, dg_mul(g, bn[i], bn[i]), DG_ALL_AXES, false), *wrt[2] = {x, scale};
        ASSERT_OK(dg_grad(g, loss, wrt, 2, grads));
    }
    ASSERT_OK(dg_graph_status(g));
    int backward = 0;
    for (int id = 0; id < dg_graph_size(g); id++) {
        const dg_node *n = dg_graph_node(g, id);
        if (n->op != DG_OP_BATCH_NORM && n->op != DG_OP_BATCH_NORM_BACKWARD &&
            n->op != DG_OP_BATCH_NORM_BACKWARD_SCALE)
            continue;
        int64_t c = n->in[n->op == DG_OP_BATCH_NORM ? 0 : 1]->shape.d[1];
        backward += n->op != DG_OP_BATCH_NORM;
        cr_assert_eq(dg_backend_supports(gpu, n), c <= ch[0], "%s of %lld channels (%lld fit the scratch)",
                     dg_op_name(n->op), (long long)c, (long long)ch[0]);
    }
    cr_assert_eq(backward, 4, "dx and dscale of each batch norm: %d backward nodes", backward);
    assert_plan_refused_naming(gpu, g, bn[1]);
    dg_graph_free(g);
    dg_backend_free(gpu);
}

/* A [n,n] x [n,n] matmul graph with uniform [-1, 1) inputs uploaded. */
typedef struct mm_graph {
    dg_graph *g;
    dg_node  *a, *b, *c;
    float    *A, *B;
    int       n;
} mm_graph;

static void mm_graph_new(mm_graph *m, int n, uint64_t seed) {
    m->n = n;
    m->g = dg_graph_new();
    m->a = dg_input(m->g, "a", DG_SHAPE(n, n));
    m->b = dg_input(m->g, "b", DG_SHAPE(n, n));
    m->c = dg_matmul(m->g, m->a, m->b, false, false);
    ASSERT_OK(dg_graph_status(m->g));
    m->A = malloc(sizeof(float) * n * n);
    m->B = malloc(sizeof(float) * n * n);
    dg_rng r = dg_rng_new(seed);
    for (int i = 0; i < n * n; i++) m->A[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    for (int i = 0; i < n * n; i++) m->B[i] = (float)(2 * dg_rng_uniform(&r) - 1);
}

static dg_plan *mm_plan(mm_graph *m, dg_backend *be, const dg_plan_opts *po) {
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, m->g, be, &m->c, 1, po));
    ASSERT_OK(dg_plan_set(p, m->a, m->A, dg_node_bytes(m->a)));
    ASSERT_OK(dg_plan_set(p, m->b, m->B, dg_node_bytes(m->b)));
    return p;
}

static void mm_graph_free(mm_graph *m) {
    free(m->A);
    free(m->B);
    dg_graph_free(m->g);
}

/* device events through the core's dg_event_*: a 1024^3 matmul plan takes
 * a positive time; events of two backends cannot be compared */
Test(gpu, events_time_a_plan_on_the_device) {
    dg_backend *gpu = gpu_open_or_skip(NULL), *other = gpu_open_or_skip(NULL);
    mm_graph m;
    mm_graph_new(&m, 1024, test_seed());
    dg_plan *p = mm_plan(&m, gpu, NULL);
    ASSERT_OK(dg_plan_run(p)); /* warm-up: the first run captures the CUDA graph */
    dg_event *e0, *e1, *f;
    ASSERT_OK(dg_event_new(gpu, &e0));
    ASSERT_OK(dg_event_new(gpu, &e1));
    ASSERT_OK(dg_event_new(other, &f));
    ASSERT_OK(dg_event_record(e0));
    ASSERT_OK(dg_plan_run(p));
    ASSERT_OK(dg_event_record(e1));
    ASSERT_OK(dg_event_record(f));
    double ms = -1;
    ASSERT_OK(dg_event_elapsed(e0, e1, &ms));
    cr_log_info("1024^3 matmul plan run: %.4f ms (%.1f GFLOP/s)", ms, 2.0 * 1024 * 1024 * 1024 / (ms * 1e6));
    cr_assert(ms > 0 && ms < 1e4, "elapsed %.6f ms", ms);
    cr_assert_eq(dg_event_elapsed(e0, f, &ms), DG_ERR_INVALID, "events of two backends: %s", dg_last_error());
    dg_event_free(e0);
    dg_event_free(e1);
    dg_event_free(f);
    dg_plan_free(p);
    mm_graph_free(&m);
    dg_backend_free(other);
    dg_backend_free(gpu);
}

#define FP32_TOL 1e-5 /* max |err| / max |ref|, k = 512, full fp32       */
#define TF32_TOL 5e-3 /* 10-bit mantissa inputs: ~4e-4 expected here    */

/* TF32 is per plan (and per dg_gpu_sgemm call), not per backend: a TF32 plan
 * and an fp32 plan of one 512^3 matmul on one backend, run in turns, each
 * match float64 within their own tolerance, and TF32 really took effect
 * (its error is well above what fp32 reaches). With and without replay, so
 * both the captured and the node-by-node matmul set the math mode. */
Test(gpu, tf32_is_a_plan_option) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    const int n = 512;
    uint64_t seed = test_seed();
    mm_graph m;
    mm_graph_new(&m, n, seed);
    double *R = malloc(sizeof(double) * n * n);
    ref_sgemm(false, false, n, n, n, m.A, m.B, R);
    float *C[2] = {malloc(sizeof(float) * n * n), malloc(sizeof(float) * n * n)};
    for (int no_replay = 0; no_replay < 2; no_replay++) {
        dg_plan *p[2]; /* [0] fp32, [1] tf32 */
        for (int tf = 0; tf < 2; tf++)
            p[tf] = mm_plan(&m, gpu, &(dg_plan_opts){.no_replay = no_replay, .tf32 = tf});
        for (int rep = 0; rep < 2; rep++) /* tf32 first: a mode left behind would show in fp32 */
            for (int tf = 1; tf >= 0; tf--) ASSERT_OK(dg_plan_run(p[tf]));
        for (int tf = 0; tf < 2; tf++) ASSERT_OK(dg_plan_get(p[tf], m.c, C[tf], dg_node_bytes(m.c)));
        cmp_stats s32 = cmp_f32(C[0], R, (int64_t)n * n), s19 = cmp_f32(C[1], R, (int64_t)n * n);
        char name[64];
        snprintf(name, sizeof name, "%d^3 plan, no_replay=%d", n, no_replay);
        cr_log_info("%s: max rel err fp32 %.3g, tf32 %.3g", name, s32.max_rel, s19.max_rel);
        ASSERT_CLOSE(s32, FP32_TOL, "fp32 plan vs float64", name, seed);
        ASSERT_CLOSE(s19, TF32_TOL, "tf32 plan vs float64", name, seed);
        cr_assert_gt(s19.max_rel, 3 * FP32_TOL, "%s: the tf32 plan is as exact as fp32 (%.3g): TF32 not in effect",
                     name, s19.max_rel);
        cr_assert(memcmp(C[0], C[1], sizeof(float) * n * n) != 0, "%s: tf32 and fp32 results are identical", name);
        for (int tf = 0; tf < 2; tf++) dg_plan_free(p[tf]);
    }
    /* dg_gpu_sgemm's tf32 argument, on the same backend, in turns */
    dg_plan *p = mm_plan(&m, gpu, NULL);
    void *dC;
    size_t bytes = sizeof(float) * n * n;
    ASSERT_OK(dg_backend_alloc(gpu, bytes, &dC));
    for (int tf = 1; tf >= 0; tf--) {
        ASSERT_OK(dg_gpu_sgemm(gpu, DG_GPU_GEMM_CUBLAS, tf, false, false, n, n, n, dg_plan_data(p, m.a),
                               dg_plan_data(p, m.b), dC));
        ASSERT_OK(dg_backend_download(gpu, C[tf], dC, bytes));
    }
    cmp_stats s32 = cmp_f32(C[0], R, (int64_t)n * n), s19 = cmp_f32(C[1], R, (int64_t)n * n);
    ASSERT_CLOSE(s32, FP32_TOL, "dg_gpu_sgemm fp32 vs float64", "512^3", seed);
    ASSERT_CLOSE(s19, TF32_TOL, "dg_gpu_sgemm tf32 vs float64", "512^3", seed);
    cr_assert_gt(s19.max_rel, 3 * FP32_TOL, "dg_gpu_sgemm tf32=true is as exact as fp32 (%.3g)", s19.max_rel);
    dg_backend_release(gpu, dC);
    dg_plan_free(p);
    free(C[0]);
    free(C[1]);
    free(R);
    mm_graph_free(&m);
    dg_backend_free(gpu);
}

/* dg_gpu_gemm_ex: the bf16 and f16 product by cuBLAS GemmEx (the gemm
 * sweep's rows and a low-precision matmul node both run it) against a
 * float64 product of the rounded operands, every transposition, odd sizes.
 * The operands are exact in the dtype and so are their products in float32:
 * the error is the float32 accumulation's, at most ~ k u sum|a b| (u =
 * 2^-24, 2u for sums truncated rather than rounded, as tensor cores may);
 * the test allows 4 k u sum|a b|. A transposition ignored or the operands
 * read as the other 2-byte type fail it by orders of magnitude. */
Test(gpu, gemm_ex_bf16_f16_match_float64_of_the_rounded_operands) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    const int sizes[][3] = {{67, 45, 129}, {256, 256, 256}, {8, 300, 1000}};
    const dg_dtype dts[] = {DG_BF16, DG_F16};
    dg_rng r = dg_rng_new(41);
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 3; s++)
            for (int t = 0; t < 4; t++) {
                bool ta = t & 1, tb = t & 2;
                int m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
                size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
                uint16_t *lA = malloc(na * 2), *lB = malloc(nb * 2);
                float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4);
                cr_assert(lA && lB && A && B && C);
                for (size_t i = 0; i < na; i++) {
                    float v = (float)(2 * dg_rng_uniform(&r) - 1);
                    lA[i] = dts[d] == DG_BF16 ? dg__f32_to_bf16(v) : dg__f32_to_f16(v);
                    A[i] = dts[d] == DG_BF16 ? dg__bf16_to_f32(lA[i]) : dg__f16_to_f32(lA[i]);
                }
                for (size_t i = 0; i < nb; i++) {
                    float v = (float)(2 * dg_rng_uniform(&r) - 1);
                    lB[i] = dts[d] == DG_BF16 ? dg__f32_to_bf16(v) : dg__f32_to_f16(v);
                    B[i] = dts[d] == DG_BF16 ? dg__bf16_to_f32(lB[i]) : dg__f16_to_f32(lB[i]);
                }
                void *dA, *dB, *dC;
                ASSERT_OK(dg_backend_alloc(gpu, na * 2, &dA));
                ASSERT_OK(dg_backend_alloc(gpu, nb * 2, &dB));
                ASSERT_OK(dg_backend_alloc(gpu, nc * 4, &dC));
                ASSERT_OK(dg_backend_upload(gpu, dA, lA, na * 2));
                ASSERT_OK(dg_backend_upload(gpu, dB, lB, nb * 2));
                ASSERT_OK(dg_gpu_gemm_ex(gpu, dts[d], ta, tb, m, n, k, dA, dB, dC));
                ASSERT_OK(dg_backend_download(gpu, C, dC, nc * 4));
                double worst = 0;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++) {
                        double sum = 0, abs_sum = 0;
                        for (int p = 0; p < k; p++) {
                            double a = ta ? A[(size_t)p * m + i] : A[(size_t)i * k + p];
                            double b = tb ? B[(size_t)j * k + p] : B[(size_t)p * n + j];
                            sum += a * b;
                            abs_sum += fabs(a * b);
                        }
                        double bound = 4.0 * k * 0x1p-24 * abs_sum + 1e-30;
                        double e = fabs(C[(size_t)i * n + j] - sum) / bound;
                        worst = isnan(e) ? INFINITY : fmax(worst, e);
                    }
                cr_assert(worst <= 1, "%s %dx%dx%d ta %d tb %d: error %.3g of the bound", dg_dtype_name(dts[d]), m, n,
                          k, ta, tb, worst);
                dg_backend_release(gpu, dA);
                dg_backend_release(gpu, dB);
                dg_backend_release(gpu, dC);
                free(lA); free(lB); free(A); free(B); free(C);
            }
    /* what it refuses */
    cr_assert_eq(dg_gpu_gemm_ex(gpu, DG_I32, false, false, 4, 4, 4, &r, &r, (float *)&r), DG_ERR_UNSUPPORTED);
    cr_assert_eq(dg_gpu_gemm_ex(gpu, DG_BF16, false, false, 4, 4, 4, NULL, &r, (float *)&r), DG_ERR_INVALID);
    cr_assert_eq(dg_gpu_gemm_ex(gpu, DG_F16, false, false, 0, 4, 4, &r, &r, (float *)&r), DG_ERR_INVALID);
    dg_backend_free(gpu);
}

/* the line of `csv` that starts with key (after a newline), or a failed
 * assertion naming it */
static void csv_line(const char *csv, const char *key, char *line, size_t n) {
    const char *row = strstr(csv, key);
    cr_assert_not_null(row, "no row %s in:\n%s", key + 1, csv);
    const char *end = strchr(row + 1, '\n');
    snprintf(line, n, "%.*s", (int)(end ? end - row - 1 : (long)strlen(row + 1)), row + 1);
}

/* The gemm sweep's GPU rows in every precision, through the bench: the
 * fp32 kernels and copies as before, gpu-cublas and gpu-tiled at tf32 (the
 * former gpu-cublas-tf32 and gpu-tiled-tf32), gpu-cublas at bf16 and fp16
 * (dg_gpu_gemm_ex) and gpu-tiled there (the own wgmma kernel,
 * dg_gpu_gemm_ex_tiled), each checked against its precision's tolerance;
 * where that kernel does not run, its rows skipped saying why; no naive
 * row in bf16 or fp16, no copies row outside fp32. */
Test(gpu, gemm_sweep_rows_in_every_precision_pass_their_check, .timeout = 300) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    bool own16 = dg_gpu_has_tiled16(gpu, NULL, 0);
    dg_backend_free(gpu);
    char dir[] = "/tmp/dg-gpu-gemm-XXXXXX", out[4096], err[4096], path[600];
    tmp_dir(dir);
    const char *args[] = {"--sweep", "gemm", "--dtype", "all", "--backends", "gpu", "--shapes",
                          "256x256x256,96x200x1000:TN", "--reps", "3", "--min-time", "0", "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 240), 0, "%s", err);
    snprintf(path, sizeof path, "%s/gemm.csv", dir);
    char *csv = read_file(path);
    static const char *const want[] = {
        "gpu-naive,gpu,fp32,", "gpu-tiled,gpu,fp32,", "gpu-cublas,gpu,fp32,", "gpu-tiled,gpu,tf32,",
        "gpu-cublas,gpu,tf32,", "gpu-cublas,gpu,bf16,", "gpu-cublas,gpu,fp16,"};
    static const char *const cases[] = {"user-NN", "user-TN"};
    for (int c = 0; c < 2; c++)
        for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
            char key[96];
            snprintf(key, sizeof key, "\ngemm,%s,%s", cases[c], want[i]);
            const char *row = strstr(csv, key);
            cr_assert_not_null(row, "no row %s in:\n%s", key + 1, csv);
            const char *end = strchr(row + 1, '\n');
            char line[1024];
            snprintf(line, sizeof line, "%.*s", (int)(end ? end - row - 1 : 1000), row + 1);
            cr_assert(strstr(line, ",ok,") || strstr(line, ",noisy,"),
                      "not checked and timed: %s", line);
        }
    static const char *const tiled16[] = {"gpu-tiled,gpu,bf16,", "gpu-tiled,gpu,fp16,"};
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 2; i++) {
            char key[96], line[1024];
            snprintf(key, sizeof key, "\ngemm,%s,%s", cases[c], tiled16[i]);
            csv_line(csv, key, line, sizeof line);
            if (own16)
                cr_assert(strstr(line, ",ok,") || strstr(line, ",noisy,"), "not checked and timed: %s", line);
            else
                cr_assert(strstr(line, ",skipped,") && strstr(line, "own bf16/fp16 GEMM"), "not skipped: %s", line);
        }
    static const char *const never[] = {"gpu-naive,gpu,bf16,", "gpu-naive,gpu,fp16,", "gpu-naive,gpu,tf32,",
                                        "gpu-cublas-tf32", "gpu-cublas-pinned,gpu,bf16,"};
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        cr_assert(!strstr(csv, never[i]), "a row %s in:\n%s", never[i], csv);
    free(csv);
    remove_dir(dir);
}

/* The attention sweep's GPU rows in every precision, through the bench:
 * the composed form (node by node and replayed, fwd and fwdbwd) checked
 * and timed in fp32, tf32 (cuBLAS's TF32 products), bf16 and fp16 (the
 * products' operands cast, cuBLAS's 16-bit GemmEx), each against its
 * precision's tolerance (att_tol); the fused form in fp32, bf16 and fp16
 * (gpu_attention16.cu's tensor-core kernels), and skipped with its reason
 * in tf32 (its 3xTF32 products are fp32-accurate whatever TF32). Then the
 * char-LM step (transformer sweep) in every precision, fused and composed,
 * replayed and not, each checked against the float64 step at its
 * tolerances. */
Test(gpu, attention_and_transformer_rows_in_every_precision_pass_their_check, .timeout = 500) {
    dg_backend_free(gpu_open_or_skip(NULL));
    char dir[] = "/tmp/dg-gpu-att-XXXXXX", out[4096], err[4096], path[600], key[128], line[2048];
    tmp_dir(dir);
    const char *args[] = {"--sweep", "attention", "--dtype", "all", "--backends", "gpu", "--sizes", "attention=256",
                          "--case", "full,causal", "--reps", "3", "--min-time", "0", "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, args, out, err, 240), 0, "%s", err);
    snprintf(path, sizeof path, "%s/attention.csv", dir);
    char *csv = read_file(path);
    static const char *const precs[] = {"fp32", "tf32", "bf16", "fp16"}, *const cases[] = {"full", "causal"};
    static const char *const backends[] = {"gpu", "gpu-graph"}, *const forms[] = {"composed", "fused"},
                             *const passes[] = {"fwd", "fwdbwd"};
    for (int c = 0; c < 2; c++)
        for (int p = 0; p < 4; p++)
            for (int b = 0; b < 2; b++)
                for (int f = 0; f < 2; f++)
                    for (int s = 0; s < 2; s++) {
                        snprintf(key, sizeof key, "\nattention,%s,%s-%s-%s,gpu,%s,", cases[c], backends[b], forms[f],
                                 passes[s], precs[p]);
                        csv_line(csv, key, line, sizeof line);
                        if (f == 1 && p == 1)
                            cr_assert(strstr(line, ",skipped,") && strstr(line, "fused"), "not refused: %s", line);
                        else
                            cr_assert(strstr(line, ",ok,") || strstr(line, ",noisy,"), "not checked and timed: %s",
                                      line);
                        if (f == 0 && p >= 2)
                            cr_assert(strstr(line, p == 2 ? "gpu-cublas-bf16" : "gpu-cublas-f16"), "%s", line);
                    }
    free(csv);
    const char *lm[] = {"--sweep", "transformer", "--dtype", "all", "--backends", "gpu", "--quick", "--sizes",
                        "transformer=64", "--reps", "3", "--min-time", "0", "--out", dir, NULL};
    cr_assert_eq(run_bench(dir, lm, out, err, 240), 0, "%s", err);
    snprintf(path, sizeof path, "%s/transformer.csv", dir);
    csv = read_file(path);
    static const char *const lm_forms_[] = {"fused", "composed"};
    for (int f = 0; f < 2; f++)
        for (int p = 0; p < 4; p++)
            for (int b = 0; b < 2; b++) {
                snprintf(key, sizeof key, "\ntransformer,charlm-%s-b8,%s,gpu,%s,", lm_forms_[f], backends[b], precs[p]);
                csv_line(csv, key, line, sizeof line);
                cr_assert(strstr(line, ",ok,") || strstr(line, ",noisy,"), "not checked and timed: %s", line);
            }
    free(csv);
    remove_dir(dir);
}
