/* test_dtype.c: bfloat16 and binary16 through the stack. The host
 * conversions against the compiler's own (binary16) and an exact double
 * oracle (bfloat16), every 16-bit pattern round-tripped; the graph's dtype
 * rules and their messages; then the precision table (casts read back,
 * bf16 and f16 products, the storage ops: elementwise, sums, softmax,
 * layer norm, products of bf16/f16 output; forward and gradients) on every
 * backend against the float64 reference of the same graph, and the GPU
 * against the CPU; the arena a bf16 layer saves. GPU tests skip (or fail under
 * DG_REQUIRE_GPU=1) where no device answers. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check/ref.h"
#include "core/check/round.h"
#include "core/dtype_convert.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"
#include "gpu_util.h"
#include "test_util.h"

/* ---- host conversions ---------------------------------------------- */

/* the nearest bfloat16 of f by exact arithmetic: the two candidates that
 * truncation and its successor give, the nearer kept, a tie to the even */
static uint16_t bf16_oracle(float f) {
    uint32_t u = dg__f32_bits(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    if ((u & 0xffffu) == 0) return lo;
    double x = fabs((double)f), dl = fabs((double)dg__bf16_to_f32(lo)), dh = fabs((double)dg__bf16_to_f32(hi));
    if ((hi & 0x7fffu) == 0x7f80u) dh = 0x1p128; /* past the largest: inf stands where 2^128 would (IEEE 754) */
    if (x - dl < dh - x) return lo;
    if (x - dl > dh - x) return hi;
    return lo & 1u ? hi : lo;
}

Test(dtype_convert, bf16_rounds_to_nearest_even) {
    cr_assert_eq(dg__f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(dg__f32_to_bf16(dg__f32_of_bits(0x3f808000u)), 0x3f80, "a tie to the even below");
    cr_assert_eq(dg__f32_to_bf16(dg__f32_of_bits(0x3f818000u)), 0x3f82, "a tie to the even above");
    cr_assert_eq(dg__f32_to_bf16(dg__f32_of_bits(0x3f808001u)), 0x3f81, "past the tie: up");
    cr_assert_eq(dg__f32_to_bf16(FLT_MAX), 0x7f80, "FLT_MAX rounds to inf");
    cr_assert_eq(dg__f32_to_bf16(-INFINITY), 0xff80);
    cr_assert(isnan(dg__bf16_to_f32(dg__f32_to_bf16(NAN))), "NaN stays NaN");
    cr_assert(isnan(dg__bf16_to_f32(dg__f32_to_bf16(dg__f32_of_bits(0x7f800001u)))), "a NaN whose top bits are inf's");
    cr_assert_eq(dg__f32_to_bf16(dg__f32_of_bits(1u)), 0, "the least subnormal rounds to 0");
    dg_rng r = dg_rng_new(test_seed());
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)dg_rng_u64(&r);
        if ((u & 0x7f800000u) == 0x7f800000u) continue; /* inf and NaN: above */
        float f = dg__f32_of_bits(u);
        cr_assert_eq(dg__f32_to_bf16(f), bf16_oracle(f), "%a (0x%08x): 0x%04x, want 0x%04x", (double)f, u,
                     dg__f32_to_bf16(f), bf16_oracle(f));
    }
}

Test(dtype_convert, f16_rounds_as_the_compiler_does) {
    cr_assert_eq(dg__f32_to_f16(1.0f), 0x3c00);
    cr_assert_eq(dg__f32_to_f16(65504.0f), 0x7bff, "the largest half");
    cr_assert_eq(dg__f32_to_f16(65520.0f), 0x7c00, "the tie past it rounds to inf");
    cr_assert_eq(dg__f32_to_f16(0x1p-24f), 0x0001, "the least subnormal");
    cr_assert_eq(dg__f32_to_f16(0x1p-25f), 0x0000, "half of it ties to the even 0");
    cr_assert_eq(dg__f32_to_f16(0x1.8p-25f), 0x0001);
    cr_assert_eq(dg__f32_to_f16(0x1p-14f), 0x0400, "the least normal");
    cr_assert_eq(dg__f32_to_f16(-0.0f), 0x8000);
    cr_assert(isnan(dg__f16_to_f32(dg__f32_to_f16(NAN))));
    dg_rng r = dg_rng_new(test_seed() + 1);
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)dg_rng_u64(&r);
        /* exponents where binary16 is finite, subnormal or overflows, most of the time */
        if (i % 2) u = (u & 0x807fffffu) | (uint32_t)(100 + dg_rng_u64(&r) % 50) << 23;
        float f = dg__f32_of_bits(u);
        if (isnan(f)) continue;
        _Float16 h = (_Float16)f;
        uint16_t want;
        memcpy(&want, &h, sizeof want);
        cr_assert_eq(dg__f32_to_f16(f), want, "%a (0x%08x): 0x%04x, want 0x%04x", (double)f, u, dg__f32_to_f16(f), want);
    }
}

/* every 16-bit pattern widens exactly and narrows back to itself (NaNs to
 * a NaN) */
Test(dtype_convert, every_pattern_round_trips) {
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t h = (uint16_t)b;
        float f16 = dg__f16_to_f32(h), fb = dg__bf16_to_f32(h);
        _Float16 ref;
        memcpy(&ref, &h, sizeof ref);
        if (isnan(f16)) {
            cr_assert(isnan((float)ref) && isnan(dg__f16_to_f32(dg__f32_to_f16(f16))));
        } else {
            cr_assert_eq(dg__f32_bits(f16), dg__f32_bits((float)ref), "f16 0x%04x widens to %a, want %a", h, (double)f16,
                         (double)(float)ref);
            cr_assert_eq(dg__f32_to_f16(f16), h, "f16 0x%04x", h);
        }
        if (isnan(fb)) cr_assert(isnan(dg__bf16_to_f32(dg__f32_to_bf16(fb))));
        else cr_assert_eq(dg__f32_to_bf16(fb), h, "bf16 0x%04x", h);
    }
}

/* ---- the graph's rules ----------------------------------------------- */

Test(dtype_graph, casts_and_products_and_their_refusals) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(4, 6)), *w = dg_input(g, "w", DG_SHAPE(6, 3));
    dg_node *xb = dg_cast(g, x, DG_BF16), *wb = dg_cast(g, w, DG_BF16);
    cr_assert(xb && xb->dtype == DG_BF16 && xb->op == DG_OP_CAST);
    cr_assert_eq(dg_node_bytes(xb), 4 * 6 * 2, "two bytes an element");
    cr_assert_eq(dg_cast(g, xb, DG_BF16), xb, "a cast to its own dtype adds nothing");
    dg_node *y = dg_matmul(g, xb, wb, false, false);
    cr_assert(y && y->dtype == DG_F32, "a bf16 product is float32");
    cr_assert_eq(dg_graph_status(g), DG_OK);
    dg_graph_free(g);

    /* an update reads float32 gradients: a bf16 one is refused by name */
    g = dg_graph_new();
    dg_node *p = dg_param(g, "p", DG_SHAPE(4, 6), (dg_init){DG_INIT_FILL, 1, 0, 0});
    dg_node *gb = dg_cast(g, dg_input(g, "dp", DG_SHAPE(4, 6)), DG_BF16), *upd;
    dg_optim sgd = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    cr_assert_eq(dg_optim_apply(g, &sgd, &p, &gb, 1, &upd), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "updates take float32"), "%s", dg_last_error());
    dg_graph_free(g);

    struct { const char *what, *msg; } bad[] = {
        {"mixed", "both f32, both bf16 or both f16"},
        {"add of bf16 and f16", "one dtype, or f32 with bf16 or f16"},
        {"bf16 to f16", "casts go from f32"},
        {"i32", "casts go from f32"},
    };
    for (int i = 0; i < 4; i++) {
        g = dg_graph_new();
        x = dg_input(g, "x", DG_SHAPE(4, 6));
        w = dg_input(g, "w", DG_SHAPE(6, 3));
        dg_node *r = NULL;
        switch (i) {
        case 0: r = dg_matmul(g, dg_cast(g, x, DG_BF16), dg_cast(g, w, DG_F16), false, false); break;
        case 1: r = dg_add(g, dg_cast(g, x, DG_F16), dg_cast(g, x, DG_BF16)); break;
        case 2: r = dg_cast(g, dg_cast(g, x, DG_BF16), DG_F16); break;
        case 3: r = dg_cast(g, dg_input_i32(g, "ids", DG_SHAPE(4)), DG_BF16); break;
        }
        cr_assert_null(r, "%s was accepted", bad[i].what);
        cr_assert_eq(dg_graph_status(g), DG_ERR_INVALID, "%s", bad[i].what);
        cr_assert(strstr(dg_last_error(), bad[i].msg), "%s: '%s'", bad[i].what, dg_last_error());
        dg_graph_free(g);
    }
}

/* A cast's gradient is float32 (the one exception to a node's gradient
 * having its dtype) and equals its float32 source's (a cast passes the
 * gradient through) */
Test(dtype_graph, a_bf16_cast_has_the_float32_gradient_of_its_source) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_param(g, "x", DG_SHAPE(3, 5), (dg_init){DG_INIT_UNIFORM, -1, 1, 3});
    dg_node *w = dg_param(g, "w", DG_SHAPE(5, 2), (dg_init){DG_INIT_UNIFORM, -1, 1, 4});
    dg_node *xb = dg_cast(g, x, DG_BF16);
    dg_node *loss = dg_sum(g, dg_matmul(g, xb, dg_cast(g, w, DG_BF16), false, false), DG_ALL_AXES, false);
    dg_node *wrt[2] = {xb, x}, *gr[2];
    ASSERT_OK(dg_grad(g, loss, wrt, 2, gr));
    cr_assert(gr[0]->dtype == DG_F32 && gr[1]->dtype == DG_F32 && dg_shape_eq(gr[0]->shape, xb->shape));
    dg_backend *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 1));
    dg_plan *pl;
    ASSERT_OK(dg_plan_new(&pl, g, cpu, gr, 2, NULL));
    ASSERT_OK(dg_plan_run(pl));
    float a[15], b[15];
    ASSERT_OK(dg_plan_get(pl, gr[0], a, sizeof a));
    ASSERT_OK(dg_plan_get(pl, gr[1], b, sizeof b));
    for (int i = 0; i < 15; i++) cr_assert_eq(a[i], b[i], "element %d: %g and %g", i, a[i], b[i]);
    dg_plan_free(pl);
    dg_backend_free(cpu);
    dg_graph_free(g);
}

/* A 16-bit activation's gradient is 16-bit, as autocast's: in x [2,2,5]
 * -> cast xb -> h = xb wb (bf16 out; a 3-D product, xb folded into rows
 * by a reshape) -> a = gelu(h) -> y = a wv (float32 out) -> sum, the
 * gradients of h and a are bf16 (and so their backward nodes: the
 * products' dA written in bf16, GELU's backward on bf16 dy), those of the
 * casts xb and wb float32 (their copies' gradients go back to float32 at
 * once: a product writes dX and dW in float32, through xb's reshape too,
 * so no activation-sized cast back to float32 is made), those of x and w
 * float32. A gradient left float32 by mistake fails the dtype checks, a
 * cast's made 16-bit fails them and the count of casts back. */
Test(dtype_graph, a_16_bit_activation_has_a_16_bit_gradient) {
    float grads[2][2][5 * 6];
    for (int low = 0; low < 2; low++) {
        dg_graph *g = dg_graph_new();
        dg_node *x = dg_param(g, "x", DG_SHAPE(2, 2, 5), (dg_init){DG_INIT_UNIFORM, -1, 1, 3});
        dg_node *w = dg_param(g, "w", DG_SHAPE(5, 6), (dg_init){DG_INIT_UNIFORM, -1, 1, 4});
        dg_node *v = dg_param(g, "v", DG_SHAPE(6, 3), (dg_init){DG_INIT_UNIFORM, -1, 1, 5});
        dg_dtype t = low ? DG_BF16 : DG_F32;
        dg_node *xb = dg_cast(g, x, t), *wb = dg_cast(g, w, t);
        dg_node *h = dg_matmul_ex(g, xb, wb, false, false, t), *a = dg_gelu(g, h);
        dg_node *loss = dg_sum(g, dg_matmul(g, a, dg_cast(g, v, t), false, false), DG_ALL_AXES, false);
        dg_node *unused = dg_gelu(g, xb); /* no path to the loss: a zero gradient, of its dtype too */
        dg_node *wrt[7] = {h, a, xb, wb, x, w, unused}, *gr[7];
        ASSERT_OK(dg_grad(g, loss, wrt, 7, gr));
        const dg_dtype want[7] = {t, t, DG_F32, DG_F32, DG_F32, DG_F32, t};
        for (int i = 0; i < 7; i++)
            cr_assert_eq(gr[i]->dtype, want[i], "%s: the gradient of %s is %s, want %s", dg_dtype_name(t),
                         wrt[i]->name, dg_dtype_name(gr[i]->dtype), dg_dtype_name(want[i]));
        int casts_back = 0; /* 16-bit values of x's size cast to float32 in the backward */
        for (int id = loss->id + 1; id < dg_graph_size(g); id++) {
            const dg_node *n = dg_graph_node(g, id);
            casts_back += n->op == DG_OP_CAST && n->dtype == DG_F32 && dg_node_numel(n) == dg_node_numel(x);
        }
        cr_assert_eq(casts_back, 0, "%s: %d casts of x's gradient back to float32", dg_dtype_name(t), casts_back);
        dg_backend *cpu;
        ASSERT_OK(dg_cpu_backend_new(&cpu, 1));
        dg_plan *pl;
        dg_node *outs[2] = {gr[4], gr[5]};
        ASSERT_OK(dg_plan_new(&pl, g, cpu, outs, 2, NULL));
        ASSERT_OK(dg_plan_run(pl));
        ASSERT_OK(dg_plan_get(pl, gr[4], grads[low][0], 4 * 5 * sizeof(float)));
        ASSERT_OK(dg_plan_get(pl, gr[5], grads[low][1], 5 * 6 * sizeof(float)));
        dg_plan_free(pl);
        dg_backend_free(cpu);
        dg_graph_free(g);
    }
    /* against the float32 step: the bf16 one rounds x, w, v and h on the
     * way forward too, so the bound is the rounding count of both ways:
     * forward 4 (x, w, h, v), backward 2 (a's gradient stored in bf16,
     * then h's through GELU; dy's copy is exact, ones), 2u each product
     * term at most: 12u normwise; and it must differ (it was rounded) */
    const int64_t n[2] = {4 * 5, 5 * 6};
    for (int k = 0; k < 2; k++) {
        double num = 0, den = 0;
        for (int64_t i = 0; i < n[k]; i++) {
            num = fmax(num, fabs((double)grads[1][k][i] - grads[0][k][i]));
            den = fmax(den, fabs((double)grads[0][k][i]));
        }
        cr_assert(num <= 12 * 0x1p-8 * den && num > 0, "gradient %d: off by %.3g of %.3g", k, num, den);
    }
}

/* A 16-bit bias copy's gradient is the column sum of the 16-bit dy,
 * summed straight into float32 (autodiff.c's reduce_to): a sum node of
 * dtype f32 reading the 16-bit dy, and no cast of a [N] gradient between
 * the sum and the master bias. */
Test(dtype_graph, a_bias_copy_sums_its_16_bit_gradient_into_float32) {
    const dg_dtype lows[2] = {DG_BF16, DG_F16};
    for (int k = 0; k < 2; k++) {
        dg_graph *g = dg_graph_new();
        dg_node *x = dg_input(g, "x", DG_SHAPE(8, 4, 6));
        dg_node *b = dg_param(g, "b", DG_SHAPE(6), (dg_init){DG_INIT_FILL, 0, 0, 0});
        dg_node *y = dg_gelu(g, dg_add(g, dg_cast(g, x, lows[k]), dg_cast(g, b, lows[k])));
        dg_node *loss = dg_sum(g, dg_cast(g, y, DG_F32), DG_ALL_AXES, false), *gb;
        ASSERT_OK(dg_grad(g, loss, &b, 1, &gb));
        cr_assert_eq(gb->dtype, DG_F32);
        const dg_node *s = gb;
        while (s->op == DG_OP_RESHAPE) s = s->in[0];
        cr_assert_eq(s->op, DG_OP_SUM, "%s: the bias gradient is a %s node", dg_dtype_name(lows[k]),
                     dg_op_name(s->op));
        cr_assert(s->dtype == DG_F32 && s->in[0]->dtype == lows[k], "%s: a sum of %s into %s", dg_dtype_name(lows[k]),
                  dg_dtype_name(s->in[0]->dtype), dg_dtype_name(s->dtype));
        int small_casts = 0;
        for (int id = loss->id + 1; id < dg_graph_size(g); id++) {
            const dg_node *n = dg_graph_node(g, id);
            small_casts += n->op == DG_OP_CAST && dg_node_numel(n) == 6;
        }
        cr_assert_eq(small_casts, 0, "%s: %d casts of the bias gradient", dg_dtype_name(lows[k]), small_casts);
        dg_graph_free(g);
    }
}

/* ---- the precision table on every backend ---------------------------- */

#define MAX_DTYPE_ROWS 256

static struct criterion_test_params dtype_indices(void) {
    static int idx[MAX_DTYPE_ROWS];
    int n = dg_n_dtype_cases < MAX_DTYPE_ROWS ? dg_n_dtype_cases : MAX_DTYPE_ROWS;
    for (int i = 0; i < n; i++) idx[i] = i;
    return cr_make_param_array(int, idx, (size_t)n);
}

/* the parameter array holds every row of the table */
Test(dtype, the_table_fits_its_parameters) {
    cr_assert_leq(dg_n_dtype_cases, MAX_DTYPE_ROWS, "raise MAX_DTYPE_ROWS to %d", dg_n_dtype_cases);
}

static void check_dtype_case(int row, bool gpu) {
    const op_case *c = &dg_dtype_cases[row];
    dg_backend *be = test_backend_open(gpu);
    uint64_t seed = test_seed();
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, c, seed));
    case_result r;
    case_ref ref;
    ASSERT_OK(case_run(&cg, be, &r));
    ASSERT_OK(case_ref_run(&cg, &ref));
    const char *side = gpu ? "gpu" : "cpu";
    /* a stored bf16 or f16 output: element by element above the row's floor */
    cmp_stats s = c->floor > 0 ? cmp_f32_floor(r.out, ref.out, r.n_out, c->floor) : cmp_f32(r.out, ref.out, r.n_out);
    cr_log_info("%s %s forward %.3g (tol %.3g)", side, c->name, s.max_rel, c->tol);
    ASSERT_CLOSE(s, c->tol, gpu ? "gpu forward" : "cpu forward", c->name, seed);
    double grad_tol = c->grad_tol > 0 ? c->grad_tol : c->tol;
    for (int i = 0; i < c->n_in; i++) {
        if (!cg.grad[i]) continue;
        s = cmp_f32(r.grad[i], ref.grad[i], r.n_grad[i]);
        cr_log_info("%s %s grad %d %.3g (tol %.3g)", side, c->name, i, s.max_rel, grad_tol);
        ASSERT_CLOSE(s, grad_tol, gpu ? "gpu gradient" : "cpu gradient", c->name, seed);
    }
    case_result_free(&r);
    case_ref_free(&ref);
    case_graph_free(&cg);
    dg_backend_free(be);
}

ParameterizedTestParameters(dtype, cpu_cases) { return dtype_indices(); }
ParameterizedTest(int *row, dtype, cpu_cases) { check_dtype_case(*row, false); }

ParameterizedTestParameters(dtype, gpu_cases) { return dtype_indices(); }
ParameterizedTest(int *row, dtype, gpu_cases) { check_dtype_case(*row, true); }

/* dg_cpu_gemm_ex of bf16 and f16 operands, each transposition, against the
 * float64 product of the same rounded values: the operands are exact once
 * rounded, so only float32 accumulation separates the two (k = 129 terms of
 * |a b| <= 1: 129 * 2^-24 relative to the largest sum is far under 1e-5).
 * Catches an operand widened as the other dtype, a transposition ignored,
 * or the widening buffer reused shorter than a later, larger product. */
Test(dtype_cpu_gemm_ex, bf16_and_f16_products_of_every_transposition) {
    dg_backend *cpu = NULL;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 2));
    const dg_dtype types[] = {DG_BF16, DG_F16};
    const int sizes[][3] = {{3, 5, 7}, {37, 19, 129}}; /* the second grows the buffer */
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < 2; s++)
            for (int tr = 0; tr < 4; tr++) {
                int m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
                bool ta = tr & 1, tb = tr & 2;
                uint16_t *A = malloc(sizeof *A * m * k), *B = malloc(sizeof *B * k * n);
                float *C = malloc(sizeof *C * m * n);
                double *a = malloc(sizeof *a * m * k), *b = malloc(sizeof *b * k * n);
                dg_rng r = dg_rng_new(7 + (uint64_t)tr);
                for (int i = 0; i < m * k; i++) {
                    float v = (float)(dg_rng_uniform(&r) * 2 - 1);
                    A[i] = types[t] == DG_BF16 ? dg__f32_to_bf16(v) : dg__f32_to_f16(v);
                    a[i] = types[t] == DG_BF16 ? dg__bf16_to_f32(A[i]) : dg__f16_to_f32(A[i]);
                }
                for (int i = 0; i < k * n; i++) {
                    float v = (float)(dg_rng_uniform(&r) * 2 - 1);
                    B[i] = types[t] == DG_BF16 ? dg__f32_to_bf16(v) : dg__f32_to_f16(v);
                    b[i] = types[t] == DG_BF16 ? dg__bf16_to_f32(B[i]) : dg__f16_to_f32(B[i]);
                }
                ASSERT_OK(dg_cpu_gemm_ex(cpu, DG_CPU_GEMM_OPENBLAS, types[t], ta, tb, m, n, k, A, B, C));
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++) {
                        double want = 0;
                        for (int p = 0; p < k; p++)
                            want += a[ta ? p * m + i : i * k + p] * b[tb ? j * k + p : p * n + j];
                        cr_assert(fabs(C[i * n + j] - want) <= 1e-5, "%s %dx%dx%d ta=%d tb=%d C[%d,%d] = %g, want %g",
                                  dg_dtype_name(types[t]), m, n, k, ta, tb, i, j, C[i * n + j], want);
                    }
                free(A); free(B); free(C); free(a); free(b);
            }
    cr_assert_eq(dg_cpu_gemm_ex(cpu, DG_CPU_GEMM_OPENBLAS, DG_I32, false, false, 2, 2, 2, &(int[4]){0}, &(int[4]){0},
                                (float[4]){0}),
                 DG_ERR_UNSUPPORTED);
    /* an implementation outside the enum: refused, not a silent no-op */
    cr_assert_eq(dg_cpu_gemm_ex(cpu, (dg_cpu_gemm)9, DG_F32, false, false, 2, 2, 2, (float[4]){0}, (float[4]){0},
                                (float[4]){0}),
                 DG_ERR_INVALID);
    cr_assert_eq(dg_cpu_sgemm(cpu, (dg_cpu_gemm)9, false, false, 2, 2, 2, (float[4]){0}, (float[4]){0}, (float[4]){0}),
                 DG_ERR_INVALID);
    dg_backend_free(cpu);
}

/* ---- storage ops: the graph's rules ------------------------------------ */

/* Elementwise, reductions, softmax and layer norm keep their input's dtype;
 * a binary op of f32 and bf16 is f32; everything else mixed is refused
 * naming the op and both dtypes. */
Test(dtype_graph, storage_ops_keep_their_dtype_and_refuse_what_they_do_not_define) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(4, 6)), *s = dg_input(g, "s", DG_SHAPE(6));
    dg_node *xb = dg_cast(g, x, DG_BF16), *xh = dg_cast(g, x, DG_F16), *sb = dg_cast(g, s, DG_BF16);
    cr_assert_eq(dg_gelu(g, xb)->dtype, DG_BF16);
    cr_assert_eq(dg_add(g, xh, xh)->dtype, DG_F16);
    cr_assert_eq(dg_add(g, xb, sb)->dtype, DG_BF16, "a broadcast bias add");
    cr_assert_eq(dg_mul(g, x, xb)->dtype, DG_F32, "f32 with bf16: f32");
    cr_assert_eq(dg_sum(g, xh, 0x1u, false)->dtype, DG_F16);
    cr_assert_eq(dg_sum_ex(g, xh, 0x1u, false, DG_F32)->dtype, DG_F32, "an f16 sum into float32");
    cr_assert_eq(dg_softmax(g, xb)->dtype, DG_BF16);
    dg_node *ln = dg_layer_norm(g, xb, sb, sb, 1e-5f);
    cr_assert(ln && ln->dtype == DG_BF16 && ln->side[0]->dtype == DG_F32, "layer norm's stats stay f32");
    dg_node *y = dg_matmul_ex(g, xb, dg_cast(g, dg_input(g, "w", DG_SHAPE(6, 3)), DG_BF16), false, false, DG_BF16);
    cr_assert(y && y->dtype == DG_BF16 && dg_node_bytes(y) == 4 * 3 * 2, "a bf16 product output");
    cr_assert_eq(dg_graph_status(g), DG_OK, "%s", dg_last_error());
    dg_graph_free(g);

    struct { const char *what, *msg; } bad[] = {
        {"layer_norm of bf16 x and f32 scale", "layer_norm: inputs 'cast_"},
        {"a f16 output of bf16 operands", "matmul: a f16 output of bf16 operands"},
        {"softmax_cross_entropy of bf16 logits", "softmax_cross_entropy takes float32"},
        {"all_reduce of bf16", "all_reduce takes float32"},
        {"relu of int32", "relu takes f32, bf16 or f16"},
        {"sub of f16 and bf16", "sub: operands"},
        {"a bf16 sum into f16", "sum: a bf16 input summed into f16"},
    };
    for (int i = 0; i < 7; i++) {
        g = dg_graph_new();
        x = dg_input(g, "x", DG_SHAPE(4, 6));
        s = dg_input(g, "s", DG_SHAPE(6));
        xb = dg_cast(g, x, DG_BF16);
        dg_node *r = NULL;
        switch (i) {
        case 0: r = dg_layer_norm(g, xb, s, s, 1e-5f); break;
        case 1: r = dg_matmul_ex(g, xb, dg_cast(g, dg_input(g, "w", DG_SHAPE(6, 3)), DG_BF16), false, false, DG_F16);
                break;
        case 2: r = dg_softmax_cross_entropy(g, xb, dg_input_i32(g, "labels", DG_SHAPE(4))); break;
        case 3: r = dg_all_reduce(g, xb); break;
        case 4: r = dg_relu(g, dg_input_i32(g, "ids", DG_SHAPE(4))); break;
        case 5: r = dg_sub(g, dg_cast(g, x, DG_F16), xb); break;
        case 6: r = dg_sum_ex(g, xb, 0x1u, false, DG_F16); break;
        }
        cr_assert_null(r, "%s was accepted", bad[i].what);
        cr_assert_eq(dg_graph_status(g), DG_ERR_INVALID, "%s", bad[i].what);
        cr_assert(strstr(dg_last_error(), bad[i].msg), "%s: '%s'", bad[i].what, dg_last_error());
        dg_graph_free(g);
    }
}

/* ---- storage ops: memory ------------------------------------------------ */

/* relu(x w) + b with a bf16 product output, relu and add against the same
 * in float32: the activations [M, N] dominate the arena (K small), two of
 * them alive at a time, so the bf16 plan's arena is about half the f32
 * one's (on the CPU the widened operands and the product's float32 chunk
 * are the rest: under 1 MiB against 4). Fails if a bf16 node were sized as f32 or
 * the product's output went through a float32 tensor of its full size. */
static size_t mlp_arena_bytes(dg_dtype t, bool gpu) {
    enum { M = 1024, K = 16, N = 1024 };
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_input(g, "x", DG_SHAPE(M, K));
    dg_node *w = dg_param(g, "w", DG_SHAPE(K, N), (dg_init){DG_INIT_UNIFORM, -1, 1, 1});
    dg_node *b = dg_param(g, "b", DG_SHAPE(N), (dg_init){DG_INIT_FILL, 0, 0, 0});
    dg_node *y = dg_matmul_ex(g, dg_cast(g, x, t), dg_cast(g, w, t), false, false, t);
    dg_node *out = dg_add(g, dg_relu(g, y), dg_cast(g, b, t));
    cr_assert(out && out->dtype == t, "%s", dg_last_error());
    dg_backend *be = test_backend_open(gpu);
    dg_plan_stats st;
    ASSERT_OK(dg_plan_estimate(g, be, &out, 1, NULL, &st));
    cr_log_info("%s %s: arena %zu bytes, live %zu", gpu ? "gpu" : "cpu", dg_dtype_name(t), st.arena_bytes,
                st.live_bytes);
    dg_backend_free(be);
    dg_graph_free(g);
    return st.arena_bytes;
}

static void check_half_arena(bool gpu) {
    size_t f32 = mlp_arena_bytes(DG_F32, gpu), bf16 = mlp_arena_bytes(DG_BF16, gpu);
    size_t f16 = mlp_arena_bytes(DG_F16, gpu);
    cr_assert(bf16 <= 0.55 * f32 && bf16 >= 0.45 * f32, "%s: bf16 arena %zu against f32 %zu", gpu ? "gpu" : "cpu",
              bf16, f32);
    cr_assert_eq(f16, bf16, "f16 and bf16 take the same bytes");
}

Test(dtype_memory, a_bf16_mlp_layer_has_about_half_the_arena_of_f32) { check_half_arena(false); }
/* the GPU's product writes its 16-bit C directly, with no scratch */
Test(dtype_memory, gpu_a_bf16_mlp_layer_has_about_half_the_arena_of_f32) { check_half_arena(true); }

/* ---- storage ops: the GPU against the CPU ------------------------------ */

static double *widen_copy(const float *x, int64_t n) {
    double *d = malloc((size_t)n * sizeof *d);
    cr_assert_not_null(d);
    for (int64_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* Each row of the precision table on both backends from the same inputs:
 * each computes its float32 value and rounds it once, so two results
 * agree within the two bounds' sum (a float32 value either side of a
 * rounding boundary lands a step apart). Catches a GPU kernel that rounds
 * differently from the CPU's (truncation, round-half-away) or reads a
 * 16-bit tensor as float32, even where both stay near float64. */
static void check_dtype_agreement(int row) {
    const op_case *c = &dg_dtype_cases[row];
    dg_backend *gpu = test_backend_open(true), *cpu = test_backend_open(false);
    uint64_t seed = test_seed();
    case_graph cg;
    ASSERT_OK(case_graph_new(&cg, c, seed));
    case_result rg, rc;
    ASSERT_OK(case_run(&cg, gpu, &rg));
    ASSERT_OK(case_run(&cg, cpu, &rc));
    double *ref = widen_copy(rc.out, rc.n_out);
    cmp_stats s = c->floor > 0 ? cmp_f32_floor(rg.out, ref, rg.n_out, c->floor) : cmp_f32(rg.out, ref, rg.n_out);
    ASSERT_CLOSE(s, 2 * c->tol, "gpu against cpu, forward", c->name, seed);
    free(ref);
    double grad_tol = c->grad_tol > 0 ? c->grad_tol : c->tol;
    for (int i = 0; i < c->n_in; i++) {
        if (!cg.grad[i]) continue;
        ref = widen_copy(rc.grad[i], rc.n_grad[i]);
        s = cmp_f32(rg.grad[i], ref, rg.n_grad[i]);
        ASSERT_CLOSE(s, 2 * grad_tol, "gpu against cpu, gradient", c->name, seed);
        free(ref);
    }
    case_result_free(&rg);
    case_result_free(&rc);
    case_graph_free(&cg);
    dg_backend_free(cpu);
    dg_backend_free(gpu);
}

ParameterizedTestParameters(dtype, gpu_cpu_agreement) { return dtype_indices(); }
ParameterizedTest(int *row, dtype, gpu_cpu_agreement) { check_dtype_agreement(*row); }

/* A bf16 row op's step made without scratch (dg_step_of, outside a plan)
 * is refused with a message rather than writing through a NULL scratch. */
Test(dtype_cpu, a_bf16_softmax_step_without_scratch_is_refused) {
    dg_graph *g = dg_graph_new();
    dg_node *x = dg_cast(g, dg_input(g, "x", DG_SHAPE(3, 5)), DG_BF16), *y = dg_softmax(g, x);
    dg_backend *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 2));
    cr_assert(dg_backend_step_scratch_bytes(cpu, y, 0) > 0, "the bf16 softmax asks for scratch");
    uint16_t xv[15] = {0}, yv[15];
    void *data[3] = {NULL, xv, yv};
    cr_assert_eq(x->id, 1);
    dg_step s = dg_step_of(y, data, 0);
    cr_assert_eq(dg_backend_compute(cpu, &s), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "needs scratch"), "%s", dg_last_error());
    dg_backend_free(cpu);
    dg_graph_free(g);
}

/* dg_check_round without a place for the bits (lo NULL) rounds the values
 * all the same: test_cudnn's 16-bit check passed NULL and crashed on the
 * GPU machine; dg_check_widen is exact on the bits it gets. */
Test(check_round, values_without_their_bits) {
    float x[3] = {1.0f + 0x1p-9f, -3.14159f, 65504.0f}, y[3];
    uint16_t lo[3];
    memcpy(y, x, sizeof x);
    dg_check_round(DG_BF16, x, NULL, 3);
    dg_check_round(DG_BF16, y, lo, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(x[i], y[i], "element %d: %g against %g", i, (double)x[i], (double)y[i]);
        cr_assert_eq(dg_check_widen(DG_BF16, lo[i]), y[i]);
    }
    cr_assert_eq(x[0], 1.0f, "1 + 2^-9 rounds to 1 in bf16 (ties to even)");
    float h = 1.0f + 0x1p-12f;
    dg_check_round(DG_F16, &h, NULL, 1);
    cr_assert_eq(h, 1.0f);
}

/* ref_eval_stored holds a 16-bit node's values as the graph stores them:
 * bf16(x) * 1.1 in bf16 is a bf16 value there, while ref_eval keeps the
 * unrounded product (the whole-step checks of 16-bit policies rely on the
 * first: without it ResNet's bf16 step drifted from its reference by 0.52). */
Test(check_round, stored_reference_rounds_16_bit_nodes) {
    dg_graph *g = dg_graph_new();
    cr_assert_not_null(g);
    dg_node *x = dg_input(g, "x", DG_SHAPE(4));
    dg_node *y = dg_mul_scalar(g, dg_cast(g, x, DG_BF16), 1.1f);
    cr_assert_eq(y->dtype, DG_BF16);
    int n = dg_graph_size(g);
    double *plain[8] = {0}, *stored[8] = {0};
    cr_assert_leq(n, 8);
    static const double xs[4] = {1.0, 3.0, -7.0, 0.3};
    for (double **v = plain; v; v = v == plain ? stored : NULL) {
        v[x->id] = malloc(sizeof xs);
        memcpy(v[x->id], xs, sizeof xs);
    }
    ASSERT_OK(ref_eval(g, n, plain));
    ASSERT_OK(ref_eval_stored(g, n, stored));
    bool differs = false;
    for (int i = 0; i < 4; i++) {
        float f = (float)stored[y->id][i], r = f;
        dg_check_round(DG_BF16, &r, NULL, 1);
        cr_assert_eq(f, r, "element %d: %.9g is not a bf16 value", i, stored[y->id][i]);
        cr_assert_eq((double)f, stored[y->id][i]);
        differs |= plain[y->id][i] != stored[y->id][i];
    }
    cr_assert(differs, "ref_eval rounded too, or ref_eval_stored did not");
    ref_free(plain, n);
    ref_free(stored, n);
    dg_graph_free(g);
}
