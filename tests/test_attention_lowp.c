/* test_attention_lowp.c: the fused attention in bf16 and f16, forward and
 * backward, on each backend against the float64 evaluation of the same
 * graph from the same rounded inputs (ref_eval_stored: every 16-bit node's
 * value rounded as the graph stores it), at att_check_tol (attention_check.h
 * derives it: 3 units of roundoff over float32's tolerance). The graph:
 * q, k, v, w float32 [1, 2, T, Dh], rounded to the dtype before either side
 * sees them; o = cast(attention(cast(q), cast(k), cast(v)), f32); the loss
 * sum(o w), so dO = w; the outputs o, dq, dk, dv. T 1, 17, 100, 257 (a
 * single key; tiles cut short; more than four tiles of 64), Dh 32, 64, 80
 * (padded to 128 on the GPU), 128, causal and not. Catches a tile whose P
 * is not rescaled when a row's maximum grows, a masked key let in, a wrong
 * rounding or dtype on load or store; and the graph's dtype rule (mixes
 * refused, the output, lse and gradients' dtypes and bytes) and the model
 * builders' use of the 16-bit fused op. The GPU tests skip here without a
 * device (they run on the GPU machine). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/autodiff.h"
#include "core/check/attention_check.h"
#include "core/check/error.h"
#include "core/check/ref.h"
#include "core/check/round.h"
#include "core/nn/model.h"
#include "core/nn/transformer.h"
#include "core/plan.h"
#include "core/rng.h"
#include "gpu_util.h"
#include "test_util.h"

#define LP_B 1
#define LP_H 2

/* float64 of every node from the leaves' values (the inputs from host,
 * the others, dg_grad's seed, from their init spec) */
static double **reference(dg_graph *g, dg_node *const *in, float *const *host) {
    int nodes = dg_graph_size(g);
    double **v = calloc((size_t)nodes, sizeof *v);
    cr_assert(v);
    for (int id = 0; id < nodes; id++) {
        const dg_node *nd = dg_graph_node(g, id);
        if (nd->op != DG_OP_LEAF) continue;
        int64_t cnt = dg_node_numel(nd);
        float *src = NULL, *tmp = NULL;
        for (int i = 0; i < 4; i++)
            if (nd == in[i]) src = host[i];
        if (!src) {
            src = tmp = malloc((size_t)cnt * sizeof *tmp);
            ASSERT_OK(dg_init_fill(nd->init, tmp, cnt));
        }
        v[id] = malloc((size_t)cnt * sizeof(double));
        for (int64_t j = 0; j < cnt; j++) v[id][j] = src[j];
        free(tmp);
    }
    ASSERT_OK(ref_eval_stored(g, nodes, v));
    return v;
}

static double max_err(const float *x, const double *ref, int64_t n, double scale) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)x[i] - ref[i]);
        num = fmax(num, isnan(e) ? INFINITY : e);
        den = fmax(den, fabs(ref[i]));
    }
    return dg_check_rel_err(num, den, scale);
}

/* the worst error of o, dq, dk, dv of one case on be */
static double lowp_case(dg_backend *be, dg_dtype t, int64_t T, int64_t dh, bool causal, uint64_t seed) {
    const int64_t n = LP_B * LP_H * T * dh;
    const float scale = 1.0f / sqrtf((float)dh);
    dg_graph *g = dg_graph_new();
    static const char *const names[4] = {"q", "k", "v", "w"};
    dg_node *in[4];
    for (int i = 0; i < 4; i++) in[i] = dg_input(g, names[i], DG_SHAPE(LP_B, LP_H, T, dh));
    dg_node *att = dg_attention(g, dg_cast(g, in[0], t), dg_cast(g, in[1], t), dg_cast(g, in[2], t), scale, causal);
    dg_node *o = dg_cast(g, att, DG_F32);
    dg_node *loss = dg_sum(g, dg_mul(g, o, in[3]), DG_ALL_AXES, false);
    dg_node *out[4] = {o};
    ASSERT_OK(dg_grad(g, loss, in, 3, out + 1));
    cr_assert_eq(att->dtype, t);

    float *host[4], *got = malloc((size_t)n * sizeof *got);
    dg_rng r = dg_rng_new(seed);
    for (int i = 0; i < 4; i++) { /* q, k wider than v, w: softmaxes far from flat */
        host[i] = malloc((size_t)n * sizeof(float));
        float span = i < 2 ? 2.5f : 1.0f;
        for (int64_t j = 0; j < n; j++) host[i][j] = span * (float)(2 * dg_rng_uniform(&r) - 1);
        dg_check_round(t, host[i], NULL, (size_t)n);
    }
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, out, 4, NULL));
    for (int i = 0; i < 4; i++) ASSERT_OK(dg_plan_set(p, in[i], host[i], (size_t)n * sizeof(float)));
    ASSERT_OK(dg_plan_run(p));
    ASSERT_OK(dg_backend_sync(be));
    double **ref = reference(g, in, host);
    att_dims d = {LP_B, LP_H, T, dh, scale, causal};
    double sc[ATT_N_OUT], worst = 0;
    att_scales(&d, host[0], host[1], host[2], host[3], n, sc);
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(dg_plan_get(p, out[i], got, (size_t)n * sizeof *got));
        worst = fmax(worst, max_err(got, ref[out[i]->id], n, sc[ATT_O + i]));
    }
    ref_free(ref, dg_graph_size(g));
    free(ref);
    dg_plan_free(p);
    dg_graph_free(g);
    for (int i = 0; i < 4; i++) free(host[i]);
    free(got);
    return worst;
}

static void check_lowp(bool gpu, dg_dtype t) {
    static const int64_t ts[] = {1, 17, 100, 257}, dhs[] = {32, 64, 80, 128};
    dg_backend *be = test_backend_open(gpu);
    const double tol = att_check_tol(t);
    double worst = 0;
    uint64_t seed = test_seed();
    for (int c = 0; c < 2; c++)
        for (size_t a = 0; a < sizeof ts / sizeof *ts; a++)
            for (size_t b = 0; b < sizeof dhs / sizeof *dhs; b++) {
                double e = lowp_case(be, t, ts[a], dhs[b], c, seed++);
                cr_expect(e <= tol, "%s %s T %lld Dh %lld %s: error %.3g > %.3g (%.2f u)", dg_backend_name(be),
                          dg_dtype_name(t), (long long)ts[a], (long long)dhs[b], c ? "causal" : "full", e, tol,
                          e / (t == DG_BF16 ? 0x1p-8 : 0x1p-11));
                worst = fmax(worst, e);
            }
    cr_log_info("%s %s: worst error %.3g (%.2f u), tolerance %.3g", dg_backend_name(be), dg_dtype_name(t), worst,
                worst / (t == DG_BF16 ? 0x1p-8 : 0x1p-11), tol);
    dg_backend_free(be);
}

Test(attention_lowp, cpu_bf16_forward_backward_match_float64) { check_lowp(false, DG_BF16); }
Test(attention_lowp, cpu_f16_forward_backward_match_float64) { check_lowp(false, DG_F16); }
Test(attention_lowp, gpu_bf16_forward_backward_match_float64) { check_lowp(true, DG_BF16); }
Test(attention_lowp, gpu_f16_forward_backward_match_float64) { check_lowp(true, DG_F16); }

/* ---- the graph's dtype rule ---- */

Test(attention_lowp_graph, a_mix_of_dtypes_is_refused_naming_them) {
    dg_graph *g = dg_graph_new();
    dg_shape s = DG_SHAPE(1, 2, 8, 16);
    dg_node *q = dg_cast(g, dg_input(g, "q", s), DG_BF16), *k = dg_cast(g, dg_input(g, "k", s), DG_F16);
    cr_assert_null(dg_attention(g, q, k, q, 0.25f, false));
    const char *e = dg_last_error();
    cr_assert(strstr(e, "attention") && strstr(e, "bf16") && strstr(e, "f16"), "message: %s", e);
    dg_graph_free(g);
}

Test(attention_lowp_graph, outputs_and_gradients_take_the_inputs_dtype_and_lse_stays_float32) {
    dg_graph *g = dg_graph_new();
    dg_shape s = DG_SHAPE(2, 3, 5, 16);
    dg_node *x[3];
    for (int i = 0; i < 3; i++) x[i] = dg_input(g, i == 0 ? "q" : i == 1 ? "k" : "v", s);
    dg_node *o = dg_attention(g, dg_cast(g, x[0], DG_F16), dg_cast(g, x[1], DG_F16), dg_cast(g, x[2], DG_F16),
                              0.25f, true);
    cr_assert_not_null(o, "%s", dg_last_error());
    cr_assert_eq(o->dtype, DG_F16);
    cr_assert_eq(dg_node_bytes(o), (size_t)(2 * 3 * 5 * 16) * 2);
    cr_assert_eq(o->side[0]->dtype, DG_F32);
    cr_assert_eq(dg_node_bytes(o->side[0]), (size_t)(2 * 3 * 5) * 4);
    dg_node *grads[3];
    ASSERT_OK(dg_grad(g, dg_sum(g, dg_cast(g, o, DG_F32), DG_ALL_AXES, false), x, 3, grads));
    const dg_node *bw = NULL;
    for (int id = 0; id < dg_graph_size(g); id++)
        if (dg_graph_node(g, id)->op == DG_OP_ATTENTION_BACKWARD) bw = dg_graph_node(g, id);
    cr_assert_not_null(bw);
    cr_assert_eq(bw->in[0]->dtype, DG_F16, "dout rounded to the forward's dtype");
    cr_assert_eq(bw->dtype, DG_F16);
    cr_assert_eq(bw->side[0]->dtype, DG_F16);
    cr_assert_eq(bw->side[1]->dtype, DG_F16);
    cr_assert_eq(dg_node_bytes(bw->side[1]), (size_t)(2 * 3 * 5 * 16) * 2);
    for (int i = 0; i < 3; i++) cr_assert_eq(grads[i]->dtype, DG_F32, "gradient %d cast back to float32", i);
    dg_graph_free(g);
}

/* the char-LM with the fused attention, its forward in bf16: one bf16
 * attention per layer (the policy reaches the fused op, no float32 one) */
Test(attention_lowp_graph, a_bf16_forward_of_the_fused_charlm_runs_a_bf16_attention) {
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_charlm_cfg cfg = {.vocab = 7, .context = 6, .width = 16, .heads = 2, .layers = 2, .composed = false};
    ASSERT_OK(dg_charlm_new(g, &cfg, 1, &m));
    dg_forward_mode mode = {.compute = DG_BF16};
    cr_assert_not_null(dg_model_forward(g, &m, dg_input_i32(g, "x", DG_SHAPE(3, 6)), &mode), "%s", dg_last_error());
    int bf16 = 0, other = 0;
    for (int id = 0; id < dg_graph_size(g); id++) {
        const dg_node *n = dg_graph_node(g, id);
        if (n->op == DG_OP_ATTENTION) *(n->dtype == DG_BF16 ? &bf16 : &other) += 1;
    }
    cr_assert_eq(bf16, 2);
    cr_assert_eq(other, 0);
    dg_graph_free(g);
}
