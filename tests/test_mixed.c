/* test_mixed.c: the training step's precision policy (core/nn/train_step.h)
 * and fp16 dynamic loss scaling, on the CPU backend and (where one answers)
 * the GPU's: training parity across precisions, the casts the policy puts
 * in every model's graph, one mixed step's gradients against float32's,
 * and a forced overflow skipped on the device. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check/ref.h"
#include "core/nn/cnn.h"
#include "core/nn/lm_trainer.h"
#include "core/nn/resnet.h"
#include "core/nn/trainer.h"
#include "core/nn/transformer.h"
#include "gpu_util.h"
#include "test_util.h"
#include "train_util.h"

/* a model's step under a precision, on a graph of its own */
typedef struct mixed_step {
    dg_graph     *g;
    dg_model      m;
    dg_train_step ts;
} mixed_step;

static void mixed_step_new(mixed_step *s, dg_model_new_fn make, const void *cfg, int batch, const dg_optim *o,
                           const dg_train_step_opts *opts, uint64_t seed) {
    s->g = dg_graph_new();
    cr_assert_not_null(s->g);
    ASSERT_OK(make(s->g, cfg, seed, &s->m));
    ASSERT_OK(dg_train_step_build_opts(s->g, &s->m, batch, o, opts, &s->ts));
}

static void mixed_step_free(mixed_step *s) { dg_graph_free(s->g); }

static dg_status mlp_of(dg_graph *g, const int *widths, int n, uint64_t seed, dg_model *m) {
    dg_mlp_cfg cfg = {.n_widths = n};
    memcpy(cfg.widths, widths, (size_t)n * sizeof *widths);
    return dg_mlp_new(g, &cfg, seed, m);
}

/* ---- (a) parity: an MLP learns the same in every precision ---- */

/* the CPU (false) and the GPU (true): each test below runs on both */
static struct criterion_test_params both_backends(void) {
    static bool gpu[] = {false, true};
    return cr_make_param_array(bool, gpu, 2);
}

/* Momentum SGD, full batch, on 256 Gaussian blobs in 8 dims (4 classes):
 * test_train's set, where float32 reaches >= 95% in 200 steps. Each
 * precision must reach 95% too, and lie within 2 points of float32's
 * accuracy and within 0.05 of its final loss: bf16's operands carry 8
 * significant bits, so a step's direction differs from float32's by about
 * 2^-8 relatively, far inside the band; a policy that loses the gradient
 * (an f16 update that does not divide by the scale, a cast that drops the master's
 * update) does not train and leaves it. */
ParameterizedTestParameters(mixed, parity) { return both_backends(); }

ParameterizedTest(bool *gpu, mixed, parity) {
    dg_backend *be = test_backend_open(*gpu);
    const int n = 256, d = 8, c = 4, widths[] = {8, 32, 4}, steps = 200;
    uint64_t seed = test_seed();
    blobs data;
    cr_assert_eq(blobs_new(&data, n, d, c, seed), 0);
    dg_optim o = dg_optim_default(DG_OPTIM_MOMENTUM, 0.05f);
    double acc[DG_PREC_COUNT];
    float loss[DG_PREC_COUNT];
    float *logits = malloc((size_t)n * c * sizeof(float));
    cr_assert_not_null(logits);
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        dg_graph *g = dg_graph_new();
        dg_model m;
        dg_train_step ts;
        ASSERT_OK(mlp_of(g, widths, 3, seed, &m));
        ASSERT_OK(dg_train_step_build_opts(g, &m, n, &o, &(dg_train_step_opts){.precision = (dg_precision)p}, &ts));
        dg_plan_opts po = {0};
        dg_precision_plan_opts((dg_precision)p, &po);
        dg_plan *step, *eval;
        ASSERT_OK(dg_plan_new(&step, g, be, ts.outputs, ts.n_outputs, &po));
        po.share_leaves = step;
        ASSERT_OK(dg_plan_new(&eval, g, be, &ts.logits, 1, &po));
        ASSERT_OK(dg_plan_set(step, ts.x, data.x, (size_t)n * d * sizeof(float)));
        ASSERT_OK(dg_plan_set(step, ts.y, data.y, (size_t)n * sizeof(int32_t)));
        for (int s = 0; s < steps; s++) ASSERT_OK(dg_plan_run(step));
        ASSERT_OK(dg_plan_get(step, ts.loss, &loss[p], sizeof(float)));
        ASSERT_OK(dg_plan_set(eval, ts.x, data.x, (size_t)n * d * sizeof(float)));
        ASSERT_OK(dg_plan_run(eval));
        ASSERT_OK(dg_plan_get(eval, ts.logits, logits, (size_t)n * c * sizeof(float)));
        acc[p] = accuracy(logits, data.y, n, c);
        cr_log_info("%s %s: accuracy %.1f%%, loss %.4f after %d steps", *gpu ? "gpu" : "cpu",
                    dg_precision_name((dg_precision)p), 100 * acc[p], (double)loss[p], steps);
        dg_plan_free(eval);
        dg_plan_free(step);
        dg_graph_free(g);
    }
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        const char *name = dg_precision_name((dg_precision)p);
        cr_expect_geq(acc[p], 0.95, "%s: accuracy %.3f < 0.95 (seed %llu)", name, acc[p], (unsigned long long)seed);
        cr_expect_leq(fabs(acc[p] - acc[DG_PREC_FP32]), 0.02, "%s: accuracy %.3f, fp32's %.3f: more than 2 points "
                      "apart (seed %llu)", name, acc[p], acc[DG_PREC_FP32], (unsigned long long)seed);
        cr_expect_leq(fabsf(loss[p] - loss[DG_PREC_FP32]), 0.05f, "%s: loss %.4f, fp32's %.4f (seed %llu)", name,
                      (double)loss[p], (double)loss[DG_PREC_FP32], (unsigned long long)seed);
    }
    free(logits);
    blobs_free(&data);
    dg_backend_free(be);
}

/* The trainer under each precision (its step and its evaluation forward in
 * the policy, the plan's TF32 flag from it): an MLP 784-128-10, one epoch
 * on 6000 Fashion-MNIST images, Adam, evaluated on the 10000 test images.
 * Float32 reaches 75% to 80% by seed; every precision must lie within 1.5
 * points of it (the test set's sampling noise there is 0.4 points; a
 * policy that loses the updates or evaluates with another model does not
 * come near), and bf16's and fp16's training losses must differ from
 * float32's: a trainer that dropped the precision would train in float32
 * and match it bit for bit. Skips where the data set is not installed
 * (DG_FASHION_DIR names another folder). */
ParameterizedTestParameters(mixed, fashion_trainer) { return both_backends(); }

ParameterizedTest(bool *gpu, mixed, fashion_trainer) {
    /* the GPU machine carries the files elsewhere (scripts/gpu-run.sh) */
    const char *dir = getenv("DG_FASHION_DIR") ? getenv("DG_FASHION_DIR") : DG_FASHION_MNIST_DIR;
    if (access(dir, R_OK) != 0) cr_skip_test("%s not installed (apt-get install dataset-fashion-mnist)", dir);
    dg_backend *be = test_backend_open(*gpu);
    dg_dataset train, test;
    ASSERT_OK(dg_dataset_load(dir, "train", &train));
    ASSERT_OK(dg_dataset_load(dir, "t10k", &test));
    const dg_mlp_cfg mlp = {{784, 128, 10}, 3};
    double acc[DG_PREC_COUNT], loss[DG_PREC_COUNT];
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        dg_train_opts o = {.model = dg_mlp_new, .model_cfg = &mlp, .optim = dg_optim_default(DG_OPTIM_ADAM, 1e-3f),
                           .epochs = 1, .batch = 64, .seed = test_seed(), .loss_every = 1, .subset = 6000,
                           .precision = (dg_precision)p};
        dg_epoch_stats st;
        ASSERT_OK(dg_train(be, &o, &train, &test, NULL, NULL, &st));
        acc[p] = st.test_acc;
        loss[p] = st.train_loss;
        cr_log_info("%s %s: test accuracy %.2f%%, loss %.4f", *gpu ? "gpu" : "cpu",
                    dg_precision_name((dg_precision)p), 100 * st.test_acc, st.train_loss);
    }
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        const char *name = dg_precision_name((dg_precision)p);
        cr_expect_leq(fabs(acc[p] - acc[DG_PREC_FP32]), 0.015, "%s: test accuracy %.4f, fp32's %.4f", name, acc[p],
                      acc[DG_PREC_FP32]);
        if (dg_precision_dtype((dg_precision)p) != DG_F32)
            cr_expect_neq(loss[p], loss[DG_PREC_FP32], "%s: the training loss is fp32's, %.9g: no cast ran", name,
                          loss[p]);
    }
    dg_dataset_free(&train);
    dg_dataset_free(&test);
    dg_backend_free(be);
}

/* The char-LM's held-out loss curve under each precision against fp32's:
 * one block, composed attention (its two products cast too), 80 Adam
 * steps on GPL-3's text, evaluated every 20. Each point must lie within
 * 0.05 nats of fp32's (the curve falls from about 3.5 to about 3.0 nats;
 * rounding the products' operands to 8 significant bits moves a step by
 * about 2^-8 relatively, and over 80 steps the runs drift apart by about
 * a thousandth of a nat: the band leaves room for other seeds and the
 * GPU, and a policy that trains nothing stays near 3.5),
 * and bf16's and fp16's curves must not be fp32's (the policy reached the
 * LM trainer). Skips where the text is not installed. */
typedef struct lm_curve { double val[8]; int n; } lm_curve;

static void lm_record(const dg_lm_stats *s, void *arg) {
    lm_curve *c = arg;
    if (c->n < 8) c->val[c->n++] = s->val_loss;
}

ParameterizedTestParameters(mixed, charlm_curve) { return both_backends(); }

ParameterizedTest(bool *gpu, mixed, charlm_curve) {
    if (access(DG_TEXT_DEFAULT, R_OK) != 0) cr_skip_test("%s not installed (base-files)", DG_TEXT_DEFAULT);
    dg_backend *be = test_backend_open(*gpu);
    dg_text text;
    ASSERT_OK(dg_text_load(DG_TEXT_DEFAULT, &text));
    lm_curve c[DG_PREC_COUNT];
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        dg_lm_train_opts o = {.model = {.context = 32, .width = 32, .heads = 2, .layers = 1, .composed = true},
                              .steps = 80, .batch = 8, .eval_every = 20, .eval_batches = 4, .seed = test_seed(),
                              .precision = (dg_precision)p};
        o.optim = dg_optim_default(DG_OPTIM_ADAM, 3e-3f);
        c[p] = (lm_curve){{0}, 0};
        ASSERT_OK(dg_lm_train(be, &o, &text, lm_record, &c[p], NULL, NULL));
        cr_assert_eq(c[p].n, 4, "%d evaluations", c[p].n);
        cr_log_info("%s %s: held-out %.4f %.4f %.4f %.4f", *gpu ? "gpu" : "cpu", dg_precision_name((dg_precision)p),
                    c[p].val[0], c[p].val[1], c[p].val[2], c[p].val[3]);
    }
    for (int p = 0; p < DG_PREC_COUNT; p++) {
        const char *name = dg_precision_name((dg_precision)p);
        bool same = true;
        for (int i = 0; i < 4; i++) {
            cr_expect_leq(fabs(c[p].val[i] - c[DG_PREC_FP32].val[i]), 0.05, "%s: held-out loss %.4f at evaluation "
                          "%d, fp32's %.4f", name, c[p].val[i], i, c[DG_PREC_FP32].val[i]);
            same &= c[p].val[i] == c[DG_PREC_FP32].val[i];
        }
        if (dg_precision_dtype((dg_precision)p) != DG_F32)
            cr_expect(!same, "%s: the curve is fp32's bit for bit: no cast ran", name);
    }
    dg_text_free(&text);
    dg_backend_free(be);
}

/* ---- (b) the casts are where the policy says, in every model ---- */

typedef struct cast_census {
    int matmuls, convs, attentions, casts, f32_permutes, low_other, f32_grads;
} cast_census;

/* n, seen through reshape views (dg_matmul folds a [B,T,C] operand into
 * [B*T,C] with one), is a cast to low of a float32 node */
static bool low_cast(const dg_node *n, dg_dtype low) {
    while (n->op == DG_OP_RESHAPE) n = n->in[0];
    return n->op == DG_OP_CAST && n->dtype == low && n->in[0]->dtype == DG_F32;
}

/* n is in the low dtype: a cast to it of a float32 node, or (where the
 * model keeps activations between products in 16 bits: dg_model_linear)
 * a 16-bit activation */
static bool low_operand(const dg_node *n, dg_dtype low, bool low_activations) {
    return low_cast(n, low) || (low_activations && n->dtype == low);
}

/* The forward of a step (nodes from x up to the backward): every matmul
 * and every convolution takes two operands in the low dtype, casts made
 * from float32 nodes or, in a model that keeps its activations in 16 bits,
 * 16-bit activations; every fused attention three (fp32, tf32: float32
 * operands); a matmul returns float32 or (a linear layer of such a model)
 * the low dtype; a convolution returns the low dtype, read by a cast back
 * to float32 alone; the other 16-bit nodes (bias sums, permutes, GELU)
 * are counted; every parameter's gradient is float32. */
static cast_census census(const mixed_step *s, dg_dtype low, bool low_activations) {
    cast_census c = {0};
    for (int id = s->ts.x->id; id < s->ts.first_backward_id; id++) {
        const dg_node *n = dg_graph_node(s->g, id);
        if (n->op == DG_OP_MATMUL) {
            c.matmuls++;
            for (int i = 0; i < 2; i++)
                cr_expect(low == DG_F32 ? n->in[i]->dtype == DG_F32 : low_operand(n->in[i], low, low_activations),
                          "%s: matmul '%s' operand %d is '%s' (%s, %s), not a cast to %s of a float32 node%s",
                          s->m.name, n->name, i, n->in[i]->name, dg_op_name(n->in[i]->op),
                          dg_dtype_name(n->in[i]->dtype), dg_dtype_name(low),
                          low_activations ? " nor a 16-bit activation" : "");
            cr_expect(n->dtype == DG_F32 || (low_activations && n->dtype == low), "%s: matmul '%s' returns %s",
                      s->m.name, n->name, dg_dtype_name(n->dtype));
        } else if (n->op == DG_OP_CONV2D || n->op == DG_OP_ATTENTION) {
            const char *op = dg_op_name(n->op);
            *(n->op == DG_OP_CONV2D ? &c.convs : &c.attentions) += 1;
            for (int i = 0; i < n->n_in; i++)
                cr_expect(low == DG_F32 ? n->in[i]->dtype == DG_F32 : low_operand(n->in[i], low, low_activations),
                          "%s: %s '%s' operand %d is '%s' (%s, %s), not in %s", s->m.name, op, n->name, i,
                          n->in[i]->name, dg_op_name(n->in[i]->op), dg_dtype_name(n->in[i]->dtype),
                          dg_dtype_name(low));
            cr_expect_eq(n->dtype, low, "%s: %s '%s' returns %s", s->m.name, op, n->name, dg_dtype_name(n->dtype));
            for (int j = n->id + 1; n->op == DG_OP_CONV2D && j < s->ts.first_backward_id; j++) {
                const dg_node *r = dg_graph_node(s->g, j);
                for (int i = 0; i < r->n_in; i++)
                    if (r->in[i] == n && r->op != DG_OP_SIDE_OUTPUT)
                        cr_expect(low == DG_F32 || (r->op == DG_OP_CAST && r->dtype == DG_F32),
                                  "%s: %s '%s' is read by '%s' (%s)", s->m.name, op, n->name, r->name,
                                  dg_op_name(r->op));
            }
        } else if (n->op == DG_OP_CAST) {
            c.casts++;
        } else if (n->dtype != DG_F32 && n->dtype != DG_I32 && !low_cast(n, low)) {
            c.low_other++;
        }
        if (n->op == DG_OP_PERMUTE && n->dtype == DG_F32) c.f32_permutes++;
    }
    for (int i = 0; i < s->m.n_params; i++) c.f32_grads += s->ts.grads[i]->dtype == DG_F32;
    return c;
}

typedef struct model_case {
    const char     *name;
    dg_model_new_fn make;
    const void     *cfg;
    int             matmuls;  /* in the forward */
    int             convs;
    int             attentions;   /* fused */
    int             casts16;      /* casts in a 16-bit step's forward */
    int             f32_permutes; /* float32 permutes in a 16-bit step's forward */
    bool            low_activations; /* activations kept in 16 bits (dg_model_linear) */
} model_case;

Test(mixed, casts_where_the_policy_says) {
    static const dg_mlp_cfg mlp = {.n_widths = 3, .widths = {8, 16, 4}};
    static const dg_cnn_cfg cnn = {8, 8, 4, 4, 8, 3};
    /* the stem, 16 in the blocks, 3 downsampling shortcuts; the head */
    static const dg_resnet_cfg resnet = {DG_RESNET_CIFAR, 3, 8, 8, 5};
    /* per block 6 linear layers (q, k, v, out, two of the MLP) and, composed,
     * the attention's two products; then the output layer */
    static const dg_charlm_cfg lm = {.vocab = 11, .context = 8, .width = 16, .heads = 2, .layers = 2,
                                     .composed = true};
    static const dg_charlm_cfg lm_fused = {.vocab = 11, .context = 8, .width = 16, .heads = 2, .layers = 2};
    /* The casts: a product's two operands and a convolution's two and its
     * result (the MLP, the CNN, ResNet-18). The char-LM keeps activations
     * in 16 bits: per block each of the 6 layers casts its weight and
     * bias, the two layer norms' outputs are cast once each (q, k and v
     * read one copy), and, composed, the float32 softmax's probabilities
     * and the float32 product that leaves the heads (2 more); the head
     * casts its weight and the final norm's output; nothing is cast back
     * (the residual sums read 16 bits). Its permutes are 16-bit, but
     * composed the heads' merge of the float32 product (one per block). */
    const model_case cases[] = {
        {"mlp", dg_mlp_new, &mlp, 2, 0, 0, 2 * 2, 0, false},
        {"cnn", dg_cnn_new, &cnn, 2, 2, 0, 2 * 2 + 3 * 2, 0, false},
        {"resnet18 cifar", dg_resnet18_new, &resnet, 1, 20, 0, 2 * 1 + 3 * 20, 0, false},
        {"charlm composed", dg_charlm_new, &lm, 2 * 8 + 1, 0, 0, 2 * (6 * 2 + 2 + 2) + 2, 2, true},
        {"charlm fused", dg_charlm_new, &lm_fused, 2 * 6 + 1, 0, 2, 2 * (6 * 2 + 2) + 2, 0, true},
    };
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-3f);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const model_case *mc = &cases[k];
        for (int p = 0; p < DG_PREC_COUNT; p++) {
            mixed_step s;
            mixed_step_new(&s, mc->make, mc->cfg, 4, &o, &(dg_train_step_opts){.precision = (dg_precision)p}, 1);
            dg_dtype low = dg_precision_dtype((dg_precision)p);
            cast_census c = census(&s, low, mc->low_activations);
            bool low16 = low != DG_F32;
            cr_expect_eq(c.matmuls, mc->matmuls, "%s %s: %d matmuls in the forward, want %d", mc->name,
                         dg_precision_name((dg_precision)p), c.matmuls, mc->matmuls);
            cr_expect_eq(c.convs, mc->convs, "%s %s: %d convolutions in the forward, want %d", mc->name,
                         dg_precision_name((dg_precision)p), c.convs, mc->convs);
            cr_expect_eq(c.attentions, mc->attentions, "%s %s: %d fused attentions in the forward, want %d",
                         mc->name, dg_precision_name((dg_precision)p), c.attentions, mc->attentions);
            cr_expect_eq(c.casts, low16 ? mc->casts16 : 0, "%s %s: %d casts in the forward, want %d", mc->name,
                         dg_precision_name((dg_precision)p), c.casts, low16 ? mc->casts16 : 0);
            /* 16-bit bias sums, permutes and GELUs where the model keeps
             * its activations in 16 bits, none elsewhere */
            cr_expect_eq(c.low_other > 0, low16 && mc->low_activations, "%s %s: %d low-precision nodes that are "
                         "no casts", mc->name, dg_precision_name((dg_precision)p), c.low_other);
            if (low16)
                cr_expect_eq(c.f32_permutes, mc->f32_permutes, "%s %s: %d float32 permutes, want %d", mc->name,
                             dg_precision_name((dg_precision)p), c.f32_permutes, mc->f32_permutes);
            cr_expect_eq(c.f32_grads, s.m.n_params, "%s %s: %d of %d gradients float32", mc->name,
                         dg_precision_name((dg_precision)p), c.f32_grads, s.m.n_params);
            /* loss scaling's nodes: fp16 alone */
            bool fp16 = p == DG_PREC_FP16;
            cr_expect_eq(s.ts.loss_scale != NULL, fp16, "%s %s: loss scale %s", mc->name,
                         dg_precision_name((dg_precision)p), s.ts.loss_scale ? "present" : "absent");
            mixed_step_free(&s);
        }
    }
}

/* ---- (c) one mixed step's gradients against float32's ---- */

/* max |a - b| / max |b| */
static double normwise_err(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return den > 0 ? num / den : num;
}

/* The gradients of every parameter of a 3-layer MLP (batch 64) from one
 * forward and backward, under precision p on be, into grads[i] (malloc'd). */
static void step_grads(dg_backend *be, dg_precision p, const blobs *data, uint64_t seed, float **grads, int *n_params) {
    static const dg_mlp_cfg cfg = {.n_widths = 4, .widths = {8, 64, 64, 4}};
    mixed_step s;
    dg_optim o = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    mixed_step_new(&s, dg_mlp_new, &cfg, data->n, &o, &(dg_train_step_opts){.precision = p}, seed);
    dg_plan *plan;
    ASSERT_OK(dg_plan_new(&plan, s.g, be, s.ts.grads, s.m.n_params, NULL));
    ASSERT_OK(dg_plan_set(plan, s.ts.x, data->x, (size_t)data->n * data->d * sizeof(float)));
    ASSERT_OK(dg_plan_set(plan, s.ts.y, data->y, (size_t)data->n * sizeof(int32_t)));
    /* fp16's gradients are of loss * scale (its updates divide): the
     * scale this step runs under, read before its update can move it */
    float scale = 1;
    if (s.ts.loss_scale) ASSERT_OK(dg_plan_get(plan, s.ts.loss_scale, &scale, sizeof scale));
    ASSERT_OK(dg_plan_run(plan));
    for (int i = 0; i < s.m.n_params; i++) {
        size_t bytes = dg_node_bytes(s.ts.grads[i]);
        grads[i] = malloc(bytes);
        cr_assert_not_null(grads[i]);
        ASSERT_OK(dg_plan_get(plan, s.ts.grads[i], grads[i], bytes));
        for (int64_t j = 0; j < dg_node_numel(s.ts.grads[i]); j++) grads[i][j] /= scale;
    }
    *n_params = s.m.n_params;
    dg_plan_free(plan);
    mixed_step_free(&s);
}

/* Each operand of each product is rounded once to the low dtype (unit
 * roundoff u: 2^-8 for bf16's 8 significant bits, 2^-11 for f16's 11):
 * forward, a layer's activation and weight; backward, the incoming
 * gradient and the other operand. A product of two operands each within u
 * is within 2u + u^2 relatively, term by term, and float32 accumulation
 * adds nothing at this size. Through 3 layers forward and back, a
 * gradient gathers at most 2 roundings of each of 3 forward and 3 backward
 * products: 12u, normwise (max error over max magnitude, so cancellation
 * in one element does not count). fp16's gradients, of the loss times
 * its scale 2^16, are divided by the scale before they are compared (the
 * step's updates divide by it themselves: test_optim's scaled cases and
 * fp16_step_against_float64 below hold them to it). And the mixed step must differ from float32's (more than
 * u/64): a policy that casts nothing passes no product through the low
 * dtype and fails. */
ParameterizedTestParameters(mixed, gradients_near_fp32) { return both_backends(); }

ParameterizedTest(bool *gpu, mixed, gradients_near_fp32) {
    dg_backend *be = test_backend_open(*gpu);
    uint64_t seed = test_seed();
    blobs data;
    cr_assert_eq(blobs_new(&data, 64, 8, 4, seed), 0);
    float *ref[DG_MODEL_MAX_PARAMS], *low[DG_MODEL_MAX_PARAMS];
    int n_ref, n_low;
    step_grads(be, DG_PREC_FP32, &data, seed, ref, &n_ref);
    const dg_precision lows[] = {DG_PREC_BF16, DG_PREC_FP16};
    const double u[] = {0x1p-8, 0x1p-11};
    static const int64_t sizes[] = {8 * 64, 64, 64 * 64, 64, 64 * 4, 4};
    for (int k = 0; k < 2; k++) {
        step_grads(be, lows[k], &data, seed, low, &n_low);
        cr_assert_eq(n_low, n_ref);
        for (int i = 0; i < n_ref; i++) {
            double err = normwise_err(low[i], ref[i], sizes[i]);
            cr_log_info("%s gradient %d: normwise error %.3g (%.2f u)", dg_precision_name(lows[k]), i, err,
                        err / u[k]);
            cr_expect_leq(err, 12 * u[k], "%s gradient %d: normwise error %.3g > 12u = %.3g (seed %llu)",
                          dg_precision_name(lows[k]), i, err, 12 * u[k], (unsigned long long)seed);
            /* the biases' gradients too pass through low-precision products */
            cr_expect_gt(err, u[k] / 64, "%s gradient %d equals fp32's (error %.3g): nothing was rounded",
                         dg_precision_name(lows[k]), i, err);
            free(low[i]);
        }
    }
    for (int i = 0; i < n_ref; i++) free(ref[i]);
    blobs_free(&data);
    dg_backend_free(be);
}

/* ---- (d) fp16: an overflow is skipped on the device, the scale halves ---- */

/* every parameter and optimizer-state leaf's bytes, concatenated, but the
 * loss scale's own two (checked apart) */
typedef struct snapshot { unsigned char *bytes; size_t n; } snapshot;

static snapshot take(dg_plan *p, const mixed_step *s) {
    snapshot sn = {0};
    for (int id = 0; id < dg_graph_size(s->g); id++) {
        const dg_node *n = dg_graph_node(s->g, id);
        if ((n->leaf != DG_LEAF_PARAM && n->leaf != DG_LEAF_STATE) || n == s->ts.loss_scale ||
            n == s->ts.scale_clean)
            continue;
        size_t b = dg_node_bytes(n);
        sn.bytes = realloc(sn.bytes, sn.n + b);
        cr_assert_not_null(sn.bytes);
        ASSERT_OK(dg_plan_get(p, n, sn.bytes + sn.n, b));
        sn.n += b;
    }
    return sn;
}

static float read1(dg_plan *p, const dg_node *n) {
    float v;
    ASSERT_OK(dg_plan_get(p, n, &v, sizeof v));
    return v;
}

static void run_step(dg_plan *p, const mixed_step *s, const float *x, const int32_t *y, int batch, int d) {
    ASSERT_OK(dg_plan_set(p, s->ts.x, x, (size_t)batch * d * sizeof(float)));
    ASSERT_OK(dg_plan_set(p, s->ts.y, y, (size_t)batch * sizeof(int32_t)));
    ASSERT_OK(dg_plan_run(p));
}

/* Adam (parameters, both moments and the step counter all move on a step
 * that is taken), growth interval 3. A clean step; then a batch of 1e6
 * (past f16's 65504: the forward's casts overflow, the loss and every
 * gradient are inf or NaN): that step leaves every parameter and moment
 * bit for bit, and halves the scale; three clean steps then each update,
 * and the third doubles the scale back. */
ParameterizedTestParameters(mixed, fp16_overflow_skips_the_step) { return both_backends(); }

ParameterizedTest(bool *gpu, mixed, fp16_overflow_skips_the_step) {
    dg_backend *be = test_backend_open(*gpu);
    const int batch = 32, d = 8, widths[] = {8, 16, 4};
    uint64_t seed = test_seed();
    blobs data;
    cr_assert_eq(blobs_new(&data, batch, d, 4, seed), 0);
    float *huge = malloc((size_t)batch * d * sizeof(float));
    cr_assert_not_null(huge);
    for (int i = 0; i < batch * d; i++) huge[i] = 1e6f;
    dg_mlp_cfg cfg = {.n_widths = 3};
    memcpy(cfg.widths, widths, sizeof widths);
    dg_optim o = dg_optim_default(DG_OPTIM_ADAM, 1e-2f);
    mixed_step s;
    mixed_step_new(&s, dg_mlp_new, &cfg, batch, &o,
                   &(dg_train_step_opts){.precision = DG_PREC_FP16, .scale_interval = 3}, seed);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, s.g, be, s.ts.outputs, s.ts.n_outputs, NULL));
    cr_expect_eq(read1(p, s.ts.loss_scale), 65536.0f, "initial scale %g", (double)read1(p, s.ts.loss_scale));

    run_step(p, &s, data.x, data.y, batch, d);
    cr_expect_eq(read1(p, s.ts.scale_clean), 1.0f, "one clean step counted");
    snapshot before = take(p, &s);
    run_step(p, &s, huge, data.y, batch, d);
    snapshot after = take(p, &s);
    cr_assert_eq(before.n, after.n);
    cr_expect(memcmp(before.bytes, after.bytes, before.n) == 0,
              "the overflowing step changed a parameter or optimizer state (seed %llu)", (unsigned long long)seed);
    cr_expect_eq(read1(p, s.ts.loss_scale), 32768.0f, "scale after the overflow: %g, want 32768",
                 (double)read1(p, s.ts.loss_scale));
    cr_expect_eq(read1(p, s.ts.scale_clean), 0.0f, "clean steps after the overflow: %g",
                 (double)read1(p, s.ts.scale_clean));
    free(before.bytes);
    free(after.bytes);

    for (int k = 1; k <= 3; k++) {
        before = take(p, &s);
        run_step(p, &s, data.x, data.y, batch, d);
        after = take(p, &s);
        cr_expect(memcmp(before.bytes, after.bytes, before.n) != 0, "clean step %d after the overflow updated "
                  "nothing", k);
        free(before.bytes);
        free(after.bytes);
    }
    cr_expect_eq(read1(p, s.ts.loss_scale), 65536.0f, "scale after 3 clean steps: %g, want 65536 (doubled)",
                 (double)read1(p, s.ts.loss_scale));
    cr_expect_eq(read1(p, s.ts.scale_clean), 0.0f, "clean steps after the doubling: %g",
                 (double)read1(p, s.ts.scale_clean));
    float loss;
    ASSERT_OK(dg_plan_get(p, s.ts.loss, &loss, sizeof loss));
    cr_expect(isfinite(loss), "loss %g after the clean steps", (double)loss);
    dg_plan_free(p);
    mixed_step_free(&s);
    free(huge);
    blobs_free(&data);
    dg_backend_free(be);
}

/* The other overflow: a scale so large (2^40) that the backward's f16
 * copies of the scaled gradient overflow while the forward is finite. The
 * step is skipped and the scale halved; each later such step halves it
 * again until the gradients fit. */
ParameterizedTestParameters(mixed, fp16_scale_overflow_in_the_backward) { return both_backends(); }

ParameterizedTest(bool *gpu, mixed, fp16_scale_overflow_in_the_backward) {
    dg_backend *be = test_backend_open(*gpu);
    const int batch = 16, d = 8, widths[] = {8, 16, 4};
    uint64_t seed = test_seed();
    blobs data;
    cr_assert_eq(blobs_new(&data, batch, d, 4, seed), 0);
    dg_mlp_cfg cfg = {.n_widths = 3};
    memcpy(cfg.widths, widths, sizeof widths);
    dg_optim o = dg_optim_default(DG_OPTIM_MOMENTUM, 0.05f);
    mixed_step s;
    mixed_step_new(&s, dg_mlp_new, &cfg, batch, &o,
                   &(dg_train_step_opts){.precision = DG_PREC_FP16, .loss_scale = 0x1p40f}, seed);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, s.g, be, s.ts.outputs, s.ts.n_outputs, NULL));
    snapshot before = take(p, &s);
    run_step(p, &s, data.x, data.y, batch, d);
    snapshot after = take(p, &s);
    float loss;
    ASSERT_OK(dg_plan_get(p, s.ts.loss, &loss, sizeof loss));
    cr_expect(isfinite(loss), "the forward overflowed too (loss %g): not the case under test", (double)loss);
    cr_expect(memcmp(before.bytes, after.bytes, before.n) == 0, "the step whose gradients overflowed was taken");
    cr_expect_eq(read1(p, s.ts.loss_scale), 0x1p39f, "scale %g, want 2^39", (double)read1(p, s.ts.loss_scale));
    free(before.bytes);
    free(after.bytes);
    dg_plan_free(p);
    dg_backend_free(be);
    mixed_step_free(&s);
    blobs_free(&data);
}

/* The scale's bounds (dg_loss_scale_update): an overflow halves 2^-23 to
 * the floor 2^-24 and leaves the floor where it is (a scale halved on to 0
 * would make the updates' division of a clean step's gradients NaN); a
 * growth doubles 2^126 to 2^127 and leaves 2^127 (2^128 is inf, which
 * would halve to itself). On the backend and in the float64 reference,
 * which runs the same graph. */
ParameterizedTestParameters(mixed, loss_scale_stays_within_its_bounds) { return both_backends(); }

ParameterizedTest(bool *gpu, mixed, loss_scale_stays_within_its_bounds) {
    dg_backend *be = test_backend_open(*gpu);
    static const float start[2] = {0x1p-23f, 0x1p126f}, found[2] = {1, 0};
    static const float want[2][2] = {{0x1p-24f, 0x1p-24f}, {0x1p127f, 0x1p127f}};
    for (int c = 0; c < 2; c++) {
        dg_graph *g = dg_graph_new();
        dg_node *scale = dg_state(g, "loss_scale", DG_SHAPE(1), (dg_init){DG_INIT_FILL, start[c], 0, 0});
        dg_node *clean = dg_state(g, "loss_scale.clean", DG_SHAPE(1), (dg_init){DG_INIT_FILL, 0, 0, 0});
        dg_node *f = dg_const(g, "found", DG_SHAPE(1), found[c]);
        dg_node *u = dg_loss_scale_update(g, scale, clean, f, 1);
        cr_assert_not_null(u, "%s", dg_last_error());
        dg_plan *p;
        ASSERT_OK(dg_plan_new(&p, g, be, &u, 1, NULL));
        int n = dg_graph_size(g);
        double **v = calloc((size_t)n, sizeof *v);
        cr_assert_not_null(v);
        for (int id = 0; id < n; id++) { /* the leaves' values: scale, clean, found */
            const dg_node *nd = dg_graph_node(g, id);
            if (nd->op != DG_OP_LEAF) continue;
            v[id] = malloc(sizeof(double));
            cr_assert_not_null(v[id]);
            v[id][0] = nd == scale ? start[c] : nd == f ? found[c] : 0;
        }
        for (int step = 0; step < 2; step++) {
            ASSERT_OK(dg_plan_run(p));
            ASSERT_OK(ref_eval(g, n, v)); /* writes scale and clean in place */
            float got = read1(p, scale);
            cr_expect_eq(got, want[c][step], "from %a, found %g, step %d: scale %a, want %a", (double)start[c],
                         (double)found[c], step, (double)got, (double)want[c][step]);
            cr_expect_eq(v[scale->id][0], (double)want[c][step], "float64 reference, from %a, step %d: %a",
                         (double)start[c], step, v[scale->id][0]);
        }
        ref_free(v, n);
        free(v);
        dg_plan_free(p);
        dg_graph_free(g);
    }
    dg_backend_free(be);
}

/* One found_inf node over seven tensors of 1 to 3,000,000 elements (the
 * largest past what the GPU's grid covers in one pass, four blocks of
 * 2048 elements an SM on up to 180 SMs: its loop over chunks is tested,
 * and chunks of a tensor that starts mid-grid): a single +inf, -inf or
 * NaN at the first, middle or last element of any one of them adds 1 to
 * the count, and clean tensors leave it. Catches a test that reads only
 * the first tensor, maps a chunk to the wrong tensor, stops at the first
 * pass of a large one, or checks the value instead of its exponent bits
 * (NaN != NaN, -inf < 0). */
ParameterizedTestParameters(mixed, found_inf_over_many_tensors) { return both_backends(); }

ParameterizedTest(bool *gpu, mixed, found_inf_over_many_tensors) {
    dg_backend *be = test_backend_open(*gpu);
    static const int64_t sizes[DG_FOUND_INF_MAX] = {1, 3, 1000, 70001, 5, 3000000, 2049};
    dg_graph *g = dg_graph_new();
    dg_node *found = dg_input(g, "found", DG_SHAPE(1)), *xs[DG_FOUND_INF_MAX];
    float *data[DG_FOUND_INF_MAX];
    for (int i = 0; i < DG_FOUND_INF_MAX; i++) {
        char name[8];
        snprintf(name, sizeof name, "x%d", i);
        xs[i] = dg_input(g, name, DG_SHAPE(sizes[i]));
        data[i] = malloc((size_t)sizes[i] * sizeof(float));
        cr_assert_not_null(data[i]);
        for (int64_t j = 0; j < sizes[i]; j++) data[i][j] = (float)(j % 17) * 1e30f - 8e30f; /* large, finite */
    }
    dg_node *test = dg_found_inf_n(g, found, DG_FOUND_INF_MAX, xs);
    cr_assert_not_null(test, "%s", dg_last_error());
    cr_assert_eq(test->n_in, 1 + DG_FOUND_INF_MAX);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &test, 1, NULL));
    const float two = 2.0f;
    ASSERT_OK(dg_plan_set(p, found, &two, sizeof two));
    for (int i = 0; i < DG_FOUND_INF_MAX; i++)
        ASSERT_OK(dg_plan_set(p, xs[i], data[i], (size_t)sizes[i] * sizeof(float)));
    ASSERT_OK(dg_plan_run(p));
    cr_expect_eq(read1(p, test), 2.0f, "clean tensors: %g, want the count 2 unchanged", (double)read1(p, test));
    const float bad[3] = {INFINITY, -INFINITY, NAN};
    for (int i = 0; i < DG_FOUND_INF_MAX; i++)
        for (int where = 0; where < 3; where++) {
            int64_t at = where == 0 ? 0 : where == 1 ? sizes[i] / 2 : sizes[i] - 1;
            const float v = bad[(i + where) % 3], clean = data[i][at];
            data[i][at] = v;
            ASSERT_OK(dg_plan_set(p, xs[i], data[i], (size_t)sizes[i] * sizeof(float)));
            ASSERT_OK(dg_plan_run(p));
            cr_expect_eq(read1(p, test), 3.0f, "%g at element %lld of tensor %d (%lld elements): count %g, want 3",
                         (double)v, (long long)at, i, (long long)sizes[i], (double)read1(p, test));
            data[i][at] = clean;
            ASSERT_OK(dg_plan_set(p, xs[i], data[i], (size_t)sizes[i] * sizeof(float)));
        }
    ASSERT_OK(dg_plan_run(p));
    cr_expect_eq(read1(p, test), 2.0f, "clean again: %g", (double)read1(p, test));
    dg_plan_free(p);
    for (int i = 0; i < DG_FOUND_INF_MAX; i++) free(data[i]);
    dg_graph_free(g);
    dg_backend_free(be);
}

/* The builder takes 1 to DG_FOUND_INF_MAX tensors and says so otherwise. */
Test(mixed, found_inf_refuses_a_count_out_of_range) {
    dg_graph *g = dg_graph_new();
    dg_node *found = dg_input(g, "found", DG_SHAPE(1)), *xs[DG_FOUND_INF_MAX + 1];
    for (int i = 0; i <= DG_FOUND_INF_MAX; i++) xs[i] = found;
    cr_assert_null(dg_found_inf_n(g, found, DG_FOUND_INF_MAX + 1, xs));
    cr_assert(strstr(dg_last_error(), "found_inf: 8 tensors to test (1 to 7)"), "%s", dg_last_error());
    dg_graph_free(g);
    g = dg_graph_new();
    found = dg_input(g, "found", DG_SHAPE(1));
    cr_assert_null(dg_found_inf_n(g, found, 0, xs));
    cr_assert(strstr(dg_last_error(), "found_inf: 0 tensors to test"), "%s", dg_last_error());
    dg_graph_free(g);
}

/* The float64 reference (core/check/ref.c) runs the same fp16 step from
 * the same values, rounding where the graph casts: a clean step's
 * parameter changes agree with the CPU's within 1e-3 (normwise: float32
 * against float64 accumulation, and an activation that lands on the other
 * side of an f16 rounding boundary), the scale and its count exactly; an
 * overflowing step leaves the reference's parameters exactly as they were
 * and halves its scale, as the backend does. */
Test(mixed, fp16_step_against_float64) {
    const int batch = 16, d = 8, widths[] = {8, 16, 4};
    uint64_t seed = test_seed();
    blobs data;
    cr_assert_eq(blobs_new(&data, batch, d, 4, seed), 0);
    dg_mlp_cfg cfg = {.n_widths = 3};
    memcpy(cfg.widths, widths, sizeof widths);
    dg_optim o = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    mixed_step s;
    mixed_step_new(&s, dg_mlp_new, &cfg, batch, &o,
                   &(dg_train_step_opts){.precision = DG_PREC_FP16, .scale_interval = 2}, seed);
    dg_backend *be;
    ASSERT_OK(dg_cpu_backend_new(&be, 0));
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, s.g, be, s.ts.outputs, s.ts.n_outputs, NULL));
    const int size = dg_graph_size(s.g);
    double **vals = calloc((size_t)size, sizeof *vals);
    enum { BUF = 1024 }; /* floats: more than any tensor of this MLP holds */
    float *buf = malloc(BUF * sizeof(float));
    cr_assert(vals && buf);
    for (int id = 0; id < size; id++) { /* the leaves from the plan's initial values and the data */
        const dg_node *n = dg_graph_node(s.g, id);
        if (n->op != DG_OP_LEAF) continue;
        int64_t k = dg_node_numel(n);
        cr_assert_leq(k, BUF, "leaf %s", n->name);
        vals[id] = malloc((size_t)k * sizeof(double));
        if (n == s.ts.x) for (int64_t i = 0; i < k; i++) vals[id][i] = data.x[i];
        else if (n == s.ts.y) for (int64_t i = 0; i < k; i++) vals[id][i] = data.y[i];
        else {
            ASSERT_OK(dg_plan_get(p, n, buf, (size_t)k * sizeof(float)));
            for (int64_t i = 0; i < k; i++) vals[id][i] = buf[i];
        }
    }
    double *w0[DG_MODEL_MAX_PARAMS];
    for (int i = 0; i < s.m.n_params; i++) {
        int64_t k = dg_node_numel(s.m.params[i]);
        w0[i] = malloc((size_t)k * sizeof(double));
        memcpy(w0[i], vals[s.m.params[i]->id], (size_t)k * sizeof(double));
    }
    /* a clean step on both */
    ASSERT_OK(ref_eval(s.g, size, vals));
    run_step(p, &s, data.x, data.y, batch, d);
    for (int i = 0; i < s.m.n_params; i++) {
        const dg_node *w = s.m.params[i];
        int64_t k = dg_node_numel(w);
        ASSERT_OK(dg_plan_get(p, w, buf, (size_t)k * sizeof(float)));
        double num = 0, den = 0;
        for (int64_t j = 0; j < k; j++) {
            double ref = vals[w->id][j] - w0[i][j], got = (double)buf[j] - w0[i][j];
            num = fmax(num, fabs(got - ref));
            den = fmax(den, fabs(ref));
        }
        cr_expect(den > 0 && num <= 1e-3 * den, "parameter %s: update off by %.3g of its largest %.3g", w->name, num,
                  den);
    }
    cr_expect_eq(vals[s.ts.loss_scale->id][0], 65536.0, "reference scale %g", vals[s.ts.loss_scale->id][0]);
    cr_expect_eq(vals[s.ts.scale_clean->id][0], 1.0, "reference clean steps %g", vals[s.ts.scale_clean->id][0]);
    /* an overflowing step on both */
    float *huge = malloc((size_t)batch * d * sizeof(float));
    cr_assert_not_null(huge);
    for (int i = 0; i < batch * d; i++) huge[i] = vals[s.ts.x->id][i] = 1e6;
    for (int i = 0; i < s.m.n_params; i++)
        memcpy(w0[i], vals[s.m.params[i]->id], (size_t)dg_node_numel(s.m.params[i]) * sizeof(double));
    ASSERT_OK(ref_eval(s.g, size, vals));
    run_step(p, &s, huge, data.y, batch, d);
    cr_expect_gt(vals[s.ts.found_inf->id][0], 0, "the reference found no overflow");
    for (int i = 0; i < s.m.n_params; i++)
        cr_expect(memcmp(w0[i], vals[s.m.params[i]->id], (size_t)dg_node_numel(s.m.params[i]) * sizeof(double)) == 0,
                  "the reference moved %s on an overflowing step", s.m.params[i]->name);
    cr_expect_eq(vals[s.ts.loss_scale->id][0], 32768.0, "reference scale %g", vals[s.ts.loss_scale->id][0]);
    cr_expect_eq(vals[s.ts.scale_clean->id][0], 0.0, "reference clean steps %g", vals[s.ts.scale_clean->id][0]);
    cr_expect_eq(read1(p, s.ts.loss_scale), 32768.0f, "backend scale %g", (double)read1(p, s.ts.loss_scale));
    for (int i = 0; i < s.m.n_params; i++) free(w0[i]);
    ref_free(vals, size);
    free(vals);
    free(huge);
    free(buf);
    dg_plan_free(p);
    dg_backend_free(be);
    mixed_step_free(&s);
    blobs_free(&data);
}

/* What the options refuse, with a message naming the problem. */
Test(mixed, options_refused) {
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_train_step ts;
    const int widths[] = {4, 3};
    ASSERT_OK(mlp_of(g, widths, 2, 1, &m));
    dg_optim o = dg_optim_default(DG_OPTIM_SGD, 0.1f);
    cr_expect_eq(dg_train_step_build_opts(g, &m, 2, &o, &(dg_train_step_opts){.precision = (dg_precision)7}, &ts),
                 DG_ERR_INVALID);
    cr_expect(strstr(dg_last_error(), "precision 7"), "%s", dg_last_error());
    cr_expect_eq(dg_train_step_build_opts(g, &m, 2, &o,
                                          &(dg_train_step_opts){.precision = DG_PREC_FP16, .loss_scale = -1}, &ts),
                 DG_ERR_INVALID);
    cr_expect(strstr(dg_last_error(), "loss scale -1"), "%s", dg_last_error());
    /* under the floor: the updates' division by it could overflow */
    cr_expect_eq(dg_train_step_build_opts(g, &m, 2, &o,
                                          &(dg_train_step_opts){.precision = DG_PREC_FP16, .loss_scale = 0x1p-25f},
                                          &ts),
                 DG_ERR_INVALID);
    cr_expect(strstr(dg_last_error(), "needs a finite value >= 2^-24"), "%s", dg_last_error());
    cr_expect_eq(dg_train_step_build_opts(g, &m, 2, &o, &(dg_train_step_opts){.scale_interval = -2}, &ts),
                 DG_ERR_INVALID);
    cr_expect(strstr(dg_last_error(), "interval -2"), "%s", dg_last_error());
    /* past 2^24 the float32 count of clean steps stops growing: never reached */
    cr_expect_eq(dg_train_step_build_opts(g, &m, 2, &o, &(dg_train_step_opts){.scale_interval = (1 << 24) + 1}, &ts),
                 DG_ERR_INVALID);
    cr_expect(strstr(dg_last_error(), "interval 16777217"), "%s", dg_last_error());
    ASSERT_OK(dg_graph_status(g));
    dg_graph_free(g);
}
