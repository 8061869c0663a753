/* test_attention.c: the transformer and the character-level language
 * model end to end: a stack of two pre-norm blocks (fused and composed
 * attention) forward and backward against float64 on both backends, the
 * char-LM's first steps bit-identical run to run and equal across
 * backends, and bad input refused with a message before anything runs.
 * (Each new op alone is checked by the op-case tables: test_ops,
 * test_ref_grad, test_gpu.) */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/check/ref.h"
#include "core/data/text.h"
#include "core/nn/lm_trainer.h"
#include "core/nn/train_step.h"
#include "core/plan.h"
#include "core/rng.h"
#include "gpu_util.h"
#include "test_util.h"

/* ---- two blocks against float64 ----
 * charlm with vocab 7, context 6, width 8, 2 heads (Dh 4), 2 layers;
 * loss = softmax_ce(logits [2,6,7], next ids) and the gradient of every
 * one of its 38 parameters, all against the float64 evaluation of the same
 * graph, each tensor to 2e-4 of its largest value (float32 sums of at most
 * 32 terms through two layer norms and softmaxes). Catches a wrong head
 * split or merge (permute), mask, scale, layer norm, embedding or GELU
 * anywhere in the block, forward or backward. */
static void check_blocks(bool gpu, bool composed) {
    uint64_t seed = test_seed();
    dg_backend *be = test_backend_open(gpu);
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_charlm_cfg cfg = {.vocab = 7, .context = 6, .width = 8, .heads = 2, .layers = 2, .composed = composed};
    ASSERT_OK(dg_charlm_new(g, &cfg, seed, &m));
    cr_assert_eq(m.n_params, 2 + 16 * 2 + 4);
    /* weights far larger than GPT-2's 0.02, so the attention is far from
     * uniform and every gradient is well above float32's rounding of the
     * others; layer norm scales away from 1 and biases away from 0, so
     * their gradients' roles differ from the weights' */
    for (int i = 0; i < m.n_params; i++)
        m.params[i]->init = m.params[i]->shape.ndim == 1 ? (dg_init){DG_INIT_UNIFORM, 0.5f, 1.5f, seed + 50 + i}
                                                         : (dg_init){DG_INIT_UNIFORM, -0.7f, 0.7f, seed + 50 + i};
    dg_node *x = dg_input_i32(g, "x", DG_SHAPE(2, 6)), *y = dg_input_i32(g, "y", DG_SHAPE(2, 6));
    dg_node *loss = dg_softmax_cross_entropy(g, dg_model_forward(g, &m, x, NULL), y);
    dg_node *grads[DG_MODEL_MAX_PARAMS], *outputs[1 + DG_MODEL_MAX_PARAMS] = {loss};
    ASSERT_OK(dg_grad(g, loss, m.params, m.n_params, grads));
    for (int i = 0; i < m.n_params; i++) outputs[1 + i] = grads[i];
    int32_t xv[12], yv[12];
    dg_rng r = dg_rng_new(seed);
    for (int i = 0; i < 12; i++) { xv[i] = (int32_t)(dg_rng_u64(&r) % 7); yv[i] = (int32_t)(dg_rng_u64(&r) % 7); }
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, outputs, 1 + m.n_params, NULL));
    ASSERT_OK(dg_plan_set(p, x, xv, sizeof xv));
    ASSERT_OK(dg_plan_set(p, y, yv, sizeof yv));
    ASSERT_OK(dg_plan_run(p));

    int n_nodes = dg_graph_size(g);
    double **vals = calloc((size_t)n_nodes, sizeof *vals);
    for (int id = 0; id < n_nodes; id++) {
        dg_node *n = dg_graph_node(g, id);
        if (n->op != DG_OP_LEAF) continue;
        int64_t k = dg_node_numel(n);
        vals[id] = malloc((size_t)k * sizeof(double));
        if (n == x || n == y)
            for (int64_t i = 0; i < k; i++) vals[id][i] = n == x ? xv[i] : yv[i];
        else {
            float *f = malloc((size_t)k * 4);
            ASSERT_OK(dg_init_fill(n->init, f, k));
            for (int64_t i = 0; i < k; i++) vals[id][i] = f[i];
            free(f);
        }
    }
    ASSERT_OK(ref_eval(g, n_nodes, vals));
    const char *what = gpu ? (composed ? "gpu composed" : "gpu fused") : (composed ? "cpu composed" : "cpu fused");
    for (int i = 0; i < 1 + m.n_params; i++) {
        dg_node *n = outputs[i];
        int64_t k = dg_node_numel(n);
        float *got = malloc((size_t)k * 4);
        ASSERT_OK(dg_plan_get(p, n, got, (size_t)k * 4));
        const char *name = i ? m.params[i - 1]->name : "loss";
        double ref_max = 0, got_max = 0;
        for (int64_t j = 0; j < k; j++) {
            ref_max = fmax(ref_max, fabs(vals[n->id][j]));
            got_max = fmax(got_max, fabs(got[j]));
        }
        if (ref_max < 1e-9) /* the key bias: softmax ignores what q adds to a whole row of scores */
            cr_assert(got_max < 1e-6, "%s [%s]: gradient %g where float64 gives %g", what, name, got_max, ref_max);
        else
            ASSERT_CLOSE(cmp_f32(got, vals[n->id], k), 2e-4, what, name, seed);
        free(got);
    }
    ref_free(vals, n_nodes);
    free(vals);
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(be);
}

Test(transformer, cpu_fused_blocks_match_float64) { check_blocks(false, false); }
Test(transformer, cpu_composed_blocks_match_float64) { check_blocks(false, true); }
Test(transformer, gpu_fused_blocks_match_float64) { check_blocks(true, false); }
Test(transformer, gpu_composed_blocks_match_float64) { check_blocks(true, true); }

/* ---- the char-LM's steps ---- */

static char text_dir[] = "/tmp/dg_test_text_XXXXXX";
static bool text_dir_made; /* mkdtemp's random suffix may itself end in 'X' */

static const char *write_file(const char *name, const void *bytes, size_t n) {
    static char path[256];
    if (!text_dir_made) {
        cr_assert_not_null(mkdtemp(text_dir));
        text_dir_made = true;
    }
    snprintf(path, sizeof path, "%s/%s", text_dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
    return path;
}

static void load_sample_text(dg_text *t) {
    char buf[6000];
    size_t n = 0;
    for (int i = 0; n + 64 < sizeof buf; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "the %d quick brown foxes jump over %d lazy dogs.\n", i,
                              i * 7 % 13);
    ASSERT_OK(dg_text_load(write_file("sample.txt", buf, n), t));
}

typedef struct curve { double val[8]; int n; } curve;

static void record(const dg_lm_stats *s, void *arg) {
    curve *c = arg;
    if (c->n < 8) c->val[c->n++] = s->val_loss;
}

static void lm_steps(dg_backend *be, const dg_text *t, double *first, curve *c) {
    dg_lm_train_opts o = {.model = {.context = 16, .width = 16, .heads = 2, .layers = 1}, .steps = 3, .batch = 4,
                          .eval_every = 1, .eval_batches = 1, .seed = test_seed()};
    o.optim = dg_optim_default(DG_OPTIM_ADAM, 3e-3f);
    *c = (curve){{0}, 0};
    ASSERT_OK(dg_lm_train(be, &o, t, record, c, NULL, first));
    cr_assert_eq(c->n, 3);
}

/* The same seed twice on one backend: every figure equal to the bit (the
 * reductions, the embedding's scatter and the attention's backward all run
 * in a fixed order). Then the other backend from the same seed: the first
 * step's loss equal to float rounding, the same initial weights and
 * windows. */
static void check_lm_steps(bool gpu) {
    dg_backend *be = test_backend_open(gpu);
    dg_text t;
    load_sample_text(&t);
    double f1, f2;
    curve c1, c2;
    lm_steps(be, &t, &f1, &c1);
    lm_steps(be, &t, &f2, &c2);
    cr_assert(memcmp(&f1, &f2, sizeof f1) == 0, "first step loss %.17g then %.17g", f1, f2);
    for (int i = 0; i < 3; i++)
        cr_assert(memcmp(&c1.val[i], &c2.val[i], sizeof(double)) == 0, "held-out loss after step %d: %.17g then %.17g",
                  i + 1, c1.val[i], c2.val[i]);
    cr_assert(fabs(f1 - log((double)t.vocab)) < 0.1, "first loss %g, near ln(vocab) = %g for small weights", f1,
              log((double)t.vocab));
    if (gpu) {
        dg_backend *cpu = test_backend_open(false);
        double fc;
        curve cc;
        lm_steps(cpu, &t, &fc, &cc);
        cr_assert(fabs(fc - f1) <= 1e-5 * fabs(fc), "first step loss: cpu %.9g, gpu %.9g", fc, f1);
        dg_backend_free(cpu);
    }
    dg_text_free(&t);
    dg_backend_free(be);
}

Test(charlm, cpu_steps_bit_identical_run_to_run) { check_lm_steps(false); }
Test(charlm, gpu_steps_bit_identical_run_to_run_and_first_loss_equals_cpu) { check_lm_steps(true); }

/* ---- bad input ---- */

static void assert_error_mentions(const char *what) {
    cr_assert(strstr(dg_last_error(), what), "error '%s' does not mention '%s'", dg_last_error(), what);
}

Test(charlm_input, heads_that_do_not_divide_the_width_are_refused) {
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_charlm_cfg cfg = {.vocab = 5, .context = 4, .width = 10, .heads = 3, .layers = 1};
    cr_assert_eq(dg_charlm_new(g, &cfg, 1, &m), DG_ERR_INVALID);
    assert_error_mentions("3 heads do not divide the width 10");
    cfg = (dg_charlm_cfg){.vocab = 5, .context = 4, .width = 260, .heads = 2, .layers = 1};
    cr_assert_eq(dg_charlm_new(g, &cfg, 1, &m), DG_ERR_INVALID);
    assert_error_mentions("head size 130");
    dg_graph_free(g);
}

Test(charlm_input, a_sequence_longer_than_the_positional_table_is_refused) {
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_charlm_cfg cfg = {.vocab = 5, .context = 4, .width = 8, .heads = 2, .layers = 1};
    ASSERT_OK(dg_charlm_new(g, &cfg, 1, &m));
    cr_assert_null(dg_model_forward(g, &m, dg_input_i32(g, "x", DG_SHAPE(2, 5)), NULL));
    cr_assert_eq(dg_graph_status(g), DG_ERR_SHAPE);
    assert_error_mentions("positional table holds exactly 4 positions");
    dg_graph_free(g);
}

Test(charlm_input, attention_shapes_that_differ_are_refused) {
    dg_graph *g = dg_graph_new();
    dg_node *q = dg_input(g, "q", DG_SHAPE(1, 2, 5, 4)), *k = dg_input(g, "k", DG_SHAPE(1, 2, 6, 4));
    cr_assert_null(dg_attention(g, q, k, q, 0.5f, false));
    assert_error_mentions("must have the same shape");
    dg_graph_free(g);
    g = dg_graph_new();
    dg_node *w = dg_input(g, "w", DG_SHAPE(1, 1, 2, 129));
    cr_assert_null(dg_attention(g, w, w, w, 0.5f, false));
    assert_error_mentions("head size 129");
    dg_graph_free(g);
}

/* an id outside the table: dg_plan_set refuses it and copies nothing, so
 * no kernel ever reads past the table */
Test(charlm_input, ids_outside_the_table_are_refused_before_any_kernel_runs) {
    dg_backend *be = test_backend_open(false);
    dg_graph *g = dg_graph_new();
    dg_node *table = dg_param(g, "table", DG_SHAPE(5, 3), (dg_init){DG_INIT_FILL, 1, 0, 0});
    dg_node *ids = dg_input_i32(g, "ids", DG_SHAPE(4));
    dg_node *e = dg_embedding(g, table, ids);
    dg_plan *p;
    ASSERT_OK(dg_plan_new(&p, g, be, &e, 1, NULL));
    int32_t good[4] = {0, 4, 2, 2}, high[4] = {0, 1, 5, 2}, low[4] = {-1, 0, 0, 0};
    ASSERT_OK(dg_plan_set(p, ids, good, sizeof good));
    cr_assert_eq(dg_plan_set(p, ids, high, sizeof high), DG_ERR_INVALID);
    assert_error_mentions("id 5 at position 2");
    cr_assert_eq(dg_plan_set(p, ids, low, sizeof low), DG_ERR_INVALID);
    assert_error_mentions("outside [0, 5)");
    int32_t back[4];
    ASSERT_OK(dg_plan_get(p, ids, back, sizeof back));
    cr_assert(memcmp(back, good, sizeof good) == 0, "a refused set left the ids changed");
    dg_plan_free(p);
    dg_graph_free(g);
    dg_backend_free(be);
}

Test(charlm_input, float_ids_are_refused) {
    dg_graph *g = dg_graph_new();
    dg_node *table = dg_input(g, "table", DG_SHAPE(5, 3)), *ids = dg_input(g, "ids", DG_SHAPE(4));
    cr_assert_null(dg_embedding(g, table, ids));
    assert_error_mentions("must be int32");
    dg_graph_free(g);
}

Test(text, files_that_are_empty_or_not_text_are_refused) {
    dg_text t;
    cr_assert_eq(dg_text_load(write_file("empty.txt", "", 0), &t), DG_ERR_IO);
    assert_error_mentions("empty");
    cr_assert_eq(dg_text_load(write_file("nul.txt", "ab\0cd", 5), &t), DG_ERR_IO);
    assert_error_mentions("NUL");
    unsigned char bin[200];
    for (int i = 0; i < 200; i++) bin[i] = (unsigned char)(i % 2 ? 'a' : 1 + i % 7);
    cr_assert_eq(dg_text_load(write_file("binary.txt", bin, sizeof bin), &t), DG_ERR_IO);
    assert_error_mentions("control characters");
    cr_assert_eq(dg_text_load(write_file("one.txt", "aaaa", 4), &t), DG_ERR_IO);
    assert_error_mentions("one distinct character");
    cr_assert_eq(dg_text_load("/nonexistent/dg.txt", &t), DG_ERR_IO);
    assert_error_mentions("cannot open");
    cr_assert_null(t.ids, "a refused file leaves the text empty");
}

Test(text, ids_vocabulary_and_entropy_follow_the_bytes) {
    dg_text t;
    ASSERT_OK(dg_text_load(write_file("abc.txt", "abacab\n", 7), &t));
    cr_assert_eq(t.vocab, 4);
    cr_assert(t.chars[0] == '\n' && t.chars[1] == 'a' && t.chars[2] == 'b' && t.chars[3] == 'c');
    const int32_t want[7] = {1, 2, 1, 3, 1, 2, 0};
    cr_assert(memcmp(t.ids, want, sizeof want) == 0);
    /* p = 3/7, 2/7, 1/7, 1/7 */
    double h = -(3.0 / 7 * log(3.0 / 7) + 2.0 / 7 * log(2.0 / 7) + 2 * (1.0 / 7 * log(1.0 / 7)));
    cr_assert(fabs(t.unigram_nats - h) < 1e-12, "entropy %.15g, want %.15g", t.unigram_nats, h);
    dg_text_free(&t);
}
