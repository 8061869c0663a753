/* transformer.c: the pre-norm transformer block and the character-level
 * language model (transformer.h). Parameters are made in the order the
 * forward consumes them; the forward walks them with a cursor. */
#include "transformer.h"

#include <math.h>
#include <stdio.h>

#include "../graph_internal.h"
#include "layers.h"

#define BLOCK_PARAMS 16

/* ---- parameters ---- */

static void linear_params(dg_graph *g, dg_model *m, const char *block, const char *what, int64_t in, int64_t out,
                          float std, uint64_t seed) {
    char n[32];
    snprintf(n, sizeof n, "%.20s.%.6s.w", block, what);
    dg_normal_param(g, m, n, DG_SHAPE(in, out), std, seed);
    snprintf(n, sizeof n, "%.20s.%.6s.b", block, what);
    dg_fill_param(g, m, n, DG_SHAPE(out), 0.0f);
}

static void layer_norm_params(dg_graph *g, dg_model *m, const char *block, const char *what, int64_t c) {
    char n[32];
    snprintf(n, sizeof n, "%.18s.%.6s.scale", block, what);
    dg_fill_param(g, m, n, DG_SHAPE(c), 1.0f);
    snprintf(n, sizeof n, "%.18s.%.6s.shift", block, what);
    dg_fill_param(g, m, n, DG_SHAPE(c), 0.0f);
}

/* 16 parameters: ln1, q, k, v, o, ln2, fc1, fc2 (scale/shift or w/b each) */
static void block_params(dg_graph *g, dg_model *m, int index, int64_t c, int layers, uint64_t seed) {
    char b[16];
    snprintf(b, sizeof b, "block%d", index);
    const float std = 0.02f, residual_std = 0.02f / sqrtf(2.0f * (float)layers);
    seed += 16u * (uint64_t)index;
    layer_norm_params(g, m, b, "ln1", c);
    linear_params(g, m, b, "q", c, c, std, seed + 1);
    linear_params(g, m, b, "k", c, c, std, seed + 2);
    linear_params(g, m, b, "v", c, c, std, seed + 3);
    linear_params(g, m, b, "o", c, c, residual_std, seed + 4);
    layer_norm_params(g, m, b, "ln2", c);
    linear_params(g, m, b, "fc1", c, 4 * c, std, seed + 5);
    linear_params(g, m, b, "fc2", 4 * c, c, residual_std, seed + 6);
}

/* ---- forward ---- */

/* the parameters in order, and the forward's mode (the products' precision) */
typedef struct cursor { const dg_model *m; int i; const dg_forward_mode *mode; } cursor;

static dg_node *next(cursor *c) { return c->m->params[c->i++]; }

/* x [..., in] W [in, out] + b [out], in the forward's precision: 16 bits
 * out in a 16-bit step, read as they are by the permutes, GELU, the next
 * product and the float32 residual sum (dg_model_linear) */
static dg_node *linear(dg_graph *g, cursor *c, dg_node *x) {
    dg_node *w = next(c), *b = next(c);
    return dg_model_linear(g, c->mode, x, w, b);
}

/* the head: logits [..., vocab] in float32 for the loss, whatever the
 * products' precision */
static dg_node *linear_logits(dg_graph *g, cursor *c, dg_node *x) {
    dg_node *w = next(c), *b = next(c);
    return dg_add(g, dg_model_matmul(g, c->mode, x, w, false, false), b);
}

static dg_node *layer_norm(dg_graph *g, cursor *c, dg_node *x) {
    dg_node *scale = next(c), *shift = next(c);
    return dg_layer_norm(g, x, scale, shift, DG_LN_EPS);
}

/* [B,T,C] -> [B,H,T,Dh] */
static dg_node *split_heads(dg_graph *g, dg_node *x, int heads) {
    if (!x) return NULL;
    const dg_shape s = x->shape;
    static const int to_heads[4] = {0, 2, 1, 3};
    return dg_permute(g, dg_reshape(g, x, DG_SHAPE(s.d[0], s.d[1], heads, s.d[2] / heads)), to_heads);
}

/* [B,H,T,Dh] -> [B,T,C] */
static dg_node *merge_heads(dg_graph *g, dg_node *x) {
    if (!x) return NULL;
    const dg_shape s = x->shape;
    static const int from_heads[4] = {0, 2, 1, 3};
    return dg_reshape(g, dg_permute(g, x, from_heads), DG_SHAPE(s.d[0], s.d[2], s.d[1] * s.d[3]));
}

static dg_node *self_attention(dg_graph *g, cursor *c, dg_node *a, int heads, bool composed) {
    a = dg_cast(g, a, c->mode ? c->mode->compute : DG_F32); /* once for q, k and v */
    dg_node *q = split_heads(g, linear(g, c, a), heads);
    dg_node *k = split_heads(g, linear(g, c, a), heads);
    dg_node *v = split_heads(g, linear(g, c, a), heads);
    if (!q || !k || !v) return NULL;
    float scale = 1.0f / sqrtf((float)q->shape.d[3]);
    /* both forms follow the policy: the composed one's products, the
     * fused one's q, k, v and output */
    dg_node *o = composed ? dg_model_matmul(g, c->mode,
                                            dg_softmax_ex(g, dg_model_matmul(g, c->mode, q, k, false, true), scale,
                                                          true),
                                            v, false, false)
                          : dg_model_attention(g, c->mode, q, k, v, scale, true);
    return linear(g, c, merge_heads(g, o));
}

static dg_node *blocks(dg_graph *g, const dg_model *m, int first, int layers, int heads, bool composed,
                       const dg_forward_mode *mode, dg_node *h) {
    cursor c = {m, first, mode};
    for (int l = 0; l < layers && h; l++) {
        h = dg_add(g, h, self_attention(g, &c, layer_norm(g, &c, h), heads, composed));
        dg_node *a = layer_norm(g, &c, h);
        h = dg_add(g, h, linear(g, &c, dg_gelu(g, linear(g, &c, a))));
    }
    return h;
}

dg_node *dg_transformer_blocks(dg_graph *g, const dg_model *m, int first, int layers, int heads, bool composed,
                               dg_node *h) {
    return blocks(g, m, first, layers, heads, composed, NULL, h);
}

static dg_node *charlm_forward(dg_graph *g, const dg_model *m, dg_node *x, dg_forward_mode *mode) {
    /* no batch statistics: training and evaluation agree; mode gives the
     * products' precision */
    if (!x) return NULL;
    const dg_node *pos = m->params[1];
    char sx[96];
    if (x->shape.ndim != 2 || x->shape.d[1] > pos->shape.d[0] || x->shape.d[1] < pos->shape.d[0])
        return dg__graph_fail(g, DG_ERR_SHAPE,
                              "charlm: ids %s must be [batch, %lld]: the positional table holds exactly %lld "
                              "positions", dg_shape_str(x->shape, sx, sizeof sx), (long long)pos->shape.d[0],
                              (long long)pos->shape.d[0]);
    const int heads = (int)m->settings[0], layers = (int)m->settings[1];
    const bool composed = m->settings[2] != 0;
    dg_node *h = dg_add(g, dg_embedding(g, m->params[0], x), m->params[1]);
    h = blocks(g, m, 2, layers, heads, composed, mode, h);
    cursor c = {m, 2 + BLOCK_PARAMS * layers, mode};
    return linear_logits(g, &c, layer_norm(g, &c, h));
}

dg_status dg_charlm_new(dg_graph *g, const void *cfg_, uint64_t seed, dg_model *out) {
    const dg_charlm_cfg *cfg = cfg_;
    if (!g || !cfg || !out)
        return dg__fail(DG_ERR_INVALID, "charlm: NULL %s", !g ? "graph" : !cfg ? "configuration" : "model");
    if (cfg->vocab < 2 || cfg->context < 1 || cfg->width < 1 || cfg->heads < 1)
        return dg__fail(DG_ERR_INVALID, "charlm: vocabulary %d (>= 2), context %d, width %d and heads %d (>= 1)",
                        cfg->vocab, cfg->context, cfg->width, cfg->heads);
    if (cfg->width % cfg->heads)
        return dg__fail(DG_ERR_INVALID, "charlm: %d heads do not divide the width %d", cfg->heads, cfg->width);
    if (cfg->width / cfg->heads > DG_ATTENTION_MAX_HEAD)
        return dg__fail(DG_ERR_INVALID, "charlm: head size %d (width %d / %d heads) is more than %d",
                        cfg->width / cfg->heads, cfg->width, cfg->heads, DG_ATTENTION_MAX_HEAD);
    if (cfg->layers < 1 || cfg->layers > DG_TRANSFORMER_MAX_LAYERS)
        return dg__fail(DG_ERR_INVALID, "charlm: %d layers (1 to %d)", cfg->layers, DG_TRANSFORMER_MAX_LAYERS);
    if (dg_graph_status(g) != DG_OK) return dg__graph_refuse(g, "charlm");
    *out = (dg_model){.name = "charlm", .in_shape = DG_SHAPE(cfg->context), .in_dtype = DG_I32,
                      .targets = cfg->context, .classes = cfg->vocab, .forward = charlm_forward,
                      .settings = {cfg->heads, cfg->layers, cfg->composed}};
    const int64_t c = cfg->width;
    dg_normal_param(g, out, "tok_emb", DG_SHAPE(cfg->vocab, c), 0.02f, seed);
    dg_normal_param(g, out, "pos_emb", DG_SHAPE(cfg->context, c), 0.01f, seed + 1);
    for (int l = 0; l < cfg->layers; l++) block_params(g, out, l, c, cfg->layers, seed + 2);
    layer_norm_params(g, out, "final", "ln", c);
    linear_params(g, out, "head", "out", c, cfg->vocab, 0.02f, seed + 1000);
    return dg_graph_status(g);
}
