/* test_gpu.c: the CUDA backend against the CPU backend and the float64
 * reference. Every test opens the device itself (Criterion runs each test
 * in its own process) and skips with the reason where none answers. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "gpu_backend/gpu_backend.h"
#include "test_util.h"
#include "train_util.h"

#define NMSE_MAX 1e-9 /* float32 kernels that differ only in rounding order */

static dg_backend *open_gpu_or_skip(const dg_gpu_opts *opts) {
    dg_backend *be = NULL;
    dg_status st = dg_gpu_backend_new(&be, opts);
    if (st == DG_ERR_NO_DEVICE) cr_skip_test("%s", dg_last_error());
    cr_assert_eq(st, DG_OK, "gpu backend: %s", dg_last_error());
    return be;
}

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
    dg_backend *gpu = open_gpu_or_skip(NULL), *cpu;
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
    dg_backend *gpu = open_gpu_or_skip(NULL);
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
                ASSERT_OK(dg_gpu_sgemm(gpu, (dg_gpu_gemm)impl, ta, tb, m, n, k, dA, dB, dC));
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

/* the backend's matmul on its own kernels: every matmul row of the op table,
 * forward and gradients, against the float64 reference */
Test(gpu, backend_matmul_with_own_kernels) {
    dg_backend *gpu = open_gpu_or_skip(NULL);
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

/* Runs `steps` training steps on be; records losses and the final weights. */
static void run_steps(dg_backend *be, dg_optim_kind kind, int steps, const blobs *data, step_run *out) {
    dg_optim o = dg_optim_default(kind, kind == DG_OPTIM_ADAM ? 1e-2f : 5e-2f);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, widths, 4, BATCH, &o, 7));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, t.g, be, t.outputs, t.n_outputs, NULL));
    ASSERT_OK(dg_plan_set(p, t.x, data->x, dg_node_bytes(t.x)));
    ASSERT_OK(dg_plan_set(p, t.y, data->y, dg_node_bytes(t.y)));
    for (int s = 0; s < steps; s++) {
        ASSERT_OK(dg_plan_run(p));
        ASSERT_OK(dg_plan_get(p, t.loss, &out->loss[s], sizeof(float)));
    }
    out->n_params = 0;
    for (int i = 0; i < t.n_params; i++) out->n_params += (size_t)dg_node_numel(t.params[i]);
    out->params = malloc(out->n_params * sizeof(float));
    size_t off = 0;
    for (int i = 0; i < t.n_params; i++) {
        ASSERT_OK(dg_plan_get(p, t.params[i], out->params + off, dg_node_bytes(t.params[i])));
        off += (size_t)dg_node_numel(t.params[i]);
    }
    dg_plan_free(p);
    train_graph_free(&t);
}

Test(gpu, mlp_training_steps_agree_with_cpu) {
    dg_backend *gpu = open_gpu_or_skip(NULL), *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 0));
    blobs data;
    cr_assert_eq(blobs_new(&data, BATCH, widths[0], widths[3], test_seed()), 0);
    for (int kind = 0; kind < 3; kind++) {
        step_run g, c;
        run_steps(gpu, (dg_optim_kind)kind, 8, &data, &g);
        run_steps(cpu, (dg_optim_kind)kind, 8, &data, &c);
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

Test(gpu, cuda_graph_replay_equals_plain_runs) {
    dg_backend *graphs = open_gpu_or_skip(&(dg_gpu_opts){.cuda_graphs = true});
    dg_backend *plain = open_gpu_or_skip(&(dg_gpu_opts){.cuda_graphs = false});
    blobs data;
    cr_assert_eq(blobs_new(&data, BATCH, widths[0], widths[3], test_seed()), 0);
    for (int kind = 0; kind < 3; kind++) {
        step_run a, b;
        run_steps(graphs, (dg_optim_kind)kind, 8, &data, &a);
        run_steps(plain, (dg_optim_kind)kind, 8, &data, &b);
        cr_assert(memcmp(a.loss, b.loss, sizeof a.loss) == 0, "%s: losses differ under graph replay",
                  dg_optim_name((dg_optim_kind)kind));
        cr_assert(a.n_params == b.n_params && memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
                  "%s: weights differ under graph replay", dg_optim_name((dg_optim_kind)kind));
        free(a.params);
        free(b.params);
    }
    blobs_free(&data);
    dg_backend_free(plain);
    dg_backend_free(graphs);
}

Test(gpu, runs_allocate_nothing) {
    dg_backend *gpu = open_gpu_or_skip(NULL);
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    train_graph t;
    ASSERT_OK(train_graph_new(&t, widths, 4, BATCH, &o, 3));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, t.g, gpu, t.outputs, t.n_outputs, NULL));
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
    dg_backend *gpu = open_gpu_or_skip(NULL);
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
    ASSERT_OK(dg_plan_new(&p, t.g, gpu, t.outputs, t.n_outputs, NULL));
    ASSERT_OK(dg_plan_run(p));
    float loss = NAN;
    ASSERT_OK(dg_plan_get(p, t.loss, &loss, sizeof loss));
    cr_assert(loss > 0 && loss < 100, "loss %g", loss);
    dg_plan_free(p);
    train_graph_free(&t);
    dg_backend_free(gpu);
}

Test(gpu, no_device_gives_a_clear_status) {
    dg_backend *be = NULL;
    dg_status st = dg_gpu_backend_new(&be, NULL);
    if (st == DG_OK) {
        dg_backend_free(be);
        cr_skip_test("a CUDA device answered: nothing to check here");
    }
    cr_assert_eq(st, DG_ERR_NO_DEVICE, "%s", dg_last_error());
    cr_assert_null(be);
    cr_assert(strncmp(dg_last_error(), "no CUDA device: ", 16) == 0, "message: %s", dg_last_error());
}
