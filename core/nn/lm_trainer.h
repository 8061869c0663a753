/* lm_trainer.h: trains the character-level language model (transformer.h)
 * on a text (data/text.h): the first 90% of the characters for training,
 * the last 10% held out. Each step takes `batch` windows of context + 1
 * characters at seeded random places in the training part (inputs: the
 * first context characters, targets: the next character at each place);
 * the held-out loss is the mean over fixed, evenly spaced windows. */
#ifndef DG_NN_LM_TRAINER_H
#define DG_NN_LM_TRAINER_H

#include "../backend.h"
#include "../data/text.h"
#include "../autodiff.h"
#include "../precision.h"
#include "transformer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_lm_train_opts {
    dg_charlm_cfg model;     /* vocab is taken from the text                 */
    dg_optim      optim;
    int           steps, batch;
    int           eval_every;   /* steps between held-out evaluations        */
    int           eval_batches; /* held-out batches of `batch` windows each  */
    uint64_t      seed;         /* initial weights and the windows' places   */
    dg_precision  precision;    /* the step's policy (train_step.h), also the
                                   held-out forward's; fp32 (the zero value) */
} dg_lm_train_opts;

typedef struct dg_lm_stats {
    int    step;        /* steps done                                       */
    double train_loss;  /* mean loss of the steps since the last evaluation */
    double val_loss;    /* mean held-out loss (nats per character)          */
    double train_s;     /* training time so far (wall, synchronised; the
                           evaluations excluded)                            */
} dg_lm_stats;

typedef void (*dg_lm_fn)(const dg_lm_stats *s, void *arg);

/* Trains; cb (may be NULL) after every evaluation; *last (may be NULL) the
 * final figures, *first_loss (may be NULL) the first step's loss.
 * DG_ERR_INVALID for NULL arguments, steps, batch, eval_every or
 * eval_batches < 1, or a text whose parts are too short for a window;
 * dg_charlm_new checks the model's configuration. */
dg_status dg_lm_train(dg_backend *be, const dg_lm_train_opts *o, const dg_text *text, dg_lm_fn cb, void *arg,
                      dg_lm_stats *last, double *first_loss);

#ifdef __cplusplus
}
#endif
#endif
