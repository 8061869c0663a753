/* sweep_transformer.h: what the transformer sweep (sweep_transformer.c)
 * and its report (sweep_transformer_report.c) share. */
#ifndef DG_BENCH_SWEEP_TRANSFORMER_H
#define DG_BENCH_SWEEP_TRANSFORMER_H

#include <stdbool.h>

/* the char-LM of every row: dg_charlm_cfg's vocabulary, width, heads, layers */
#define LM_VOCAB  96
#define LM_WIDTH  256
#define LM_HEADS  4
#define LM_LAYERS 4
/* the check's step: this batch, context min(T, LM_CHECK_CONTEXT) */
#define LM_CHECK_BATCH   2
#define LM_CHECK_CONTEXT 64
/* The largest relative L2 error of the check step's gradients (all
 * parameters as one vector) an ok row may have. Measured: 7e-7 on a 2-core
 * Xeon (CPU backend, T' 16 and 64); a layer norm backward that drops its
 * mean term: 2.7e-3. */
#define LM_GRAD_TOL 1e-4

#define LM_N_BATCHES 2
#define LM_N_IMPLS   3
typedef struct lm_impl { const char *name; bool gpu, replay; } lm_impl;
extern const int        lm_batches[LM_N_BATCHES]; /* --quick: the first only */
extern const char *const lm_forms[2];              /* "fused", "composed"     */
extern const lm_impl    lm_impls[LM_N_IMPLS];      /* cpu, gpu, gpu-graph     */

#endif
