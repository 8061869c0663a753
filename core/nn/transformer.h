/* transformer.h: a pre-norm transformer block (layer norm, multi-head
 * self-attention, residual, layer norm, MLP with GELU, residual), stackable,
 * and the character-level language model built from it, as a dg_model:
 *
 *   ids [B,T] int32 -> embedding (table [V,C]) + positions ([T,C], a
 *   parameter added to every sequence) -> layers x block -> layer norm ->
 *   logits [B,T,V] = h W_head + b_head
 *
 * Block, on h [B,T,C] with H heads of Dh = C/H:
 *   a = layer_norm(h); q, k, v = a W_q + b_q, ... each reshaped to [B,T,H,Dh]
 *   and permuted to [B,H,T,Dh]; o = attention(q, k, v) with scale 1/sqrt(Dh)
 *   and the causal mask, either fused (dg_attention: one op, the score
 *   matrix never stored) or composed (matmul, dg_softmax_ex, matmul: the
 *   [B,H,T,T] scores and probabilities are tensors); h += o permuted back
 *   to [B,T,C] times W_o + b_o; h += gelu(layer_norm(h) W_1 + b_1) W_2 + b_2
 *   with W_1 [C, 4C].
 *
 * Initialisation (seeded, the same on every backend): weights N(0, 0.02),
 * the residual projections W_o and W_2 N(0, 0.02/sqrt(2 layers)), biases 0,
 * layer norm scale 1 and shift 0, as GPT-2 does. */
#ifndef DG_NN_TRANSFORMER_H
#define DG_NN_TRANSFORMER_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_LN_EPS 1e-5f
#define DG_TRANSFORMER_MAX_LAYERS 6   /* 16 parameters a block, within DG_MODEL_MAX_PARAMS */

typedef struct dg_charlm_cfg {
    int  vocab;     /* V: distinct characters, the logits' width             */
    int  context;   /* T: characters per sequence (the positional table)     */
    int  width;     /* C                                                      */
    int  heads;     /* H, dividing C; C/H at most DG_ATTENTION_MAX_HEAD     */
    int  layers;    /* blocks, 1..DG_TRANSFORMER_MAX_LAYERS                  */
    bool composed;  /* attention as matmul + softmax + matmul (else fused)   */
} dg_charlm_cfg;

/* A dg_model_new_fn: "charlm", in_shape [context], in_dtype int32, one
 * target per position. DG_ERR_INVALID with a message (nothing added to g)
 * for NULL arguments or a configuration out of range: heads that do not
 * divide the width, a head size above DG_ATTENTION_MAX_HEAD, ... */
dg_status dg_charlm_new(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out);

/* The blocks alone on h [B,T,C] (the model's parameters from index first,
 * 16 per block); what the transformer sweep and the tests build on. */
dg_node *dg_transformer_blocks(dg_graph *g, const dg_model *m, int first, int layers, int heads, bool composed,
                               dg_node *h);

#ifdef __cplusplus
}
#endif
#endif
