/* trainer.h: the training loop of any classifier (a dg_model) over any
 * labelled data set (a dg_dataset): one training-step plan and one
 * evaluation plan that share the parameters, seeded shuffling, the data set
 * resident on the backend (batches gathered there) or copied batch by batch
 * from the host; on one backend or data parallel over several. */
#ifndef DG_TRAINER_H
#define DG_TRAINER_H

#include "../autodiff.h"
#include "../backend.h"
#include "../data/dataset.h"
#include "../precision.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_train_opts {
    dg_model_new_fn model;   /* makes the model's parameters (dg_mlp_new, ...) */
    const void     *model_cfg;
    dg_optim optim;
    int      epochs, batch;
    uint64_t seed;           /* initial weights and shuffling                   */
    bool     copy_batches;   /* upload every batch from the host instead of
                                gathering it from the resident data set         */
    int      loss_every;     /* read the loss every k steps (each read syncs)   */
    int      subset;         /* > 0: only the first `subset` training examples  */
    dg_precision precision;  /* the step's policy (train_step.h), also the
                                evaluation forward's; fp32 (the zero value)     */
    /* data parallel across processes: this one is `rank` of `ranks` (0 and
     * 0 or 1: alone), each driving one backend whose all_reduce spans the
     * processes (dg_cpu_set_all_reduce on the CPU). batch stays the global
     * batch; rank r steps on rows [r*batch/ranks, (r+1)*batch/ranks) of
     * each global batch of the same seeded shuffle                         */
    int      rank, ranks;
} dg_train_opts;

typedef struct dg_epoch_stats {
    int    epoch;            /* 1-based                                         */
    double train_loss;       /* mean of the losses read during the epoch        */
    double test_acc;         /* fraction of the test set classified right       */
    double epoch_s;          /* training time of the epoch (wall, synchronised) */
    double total_s;          /* sum of epoch_s so far                           */
} dg_epoch_stats;

typedef void (*dg_epoch_fn)(const dg_epoch_stats *s, void *arg);

/* Trains; calls cb (may be NULL) after every epoch; *last (may be NULL)
 * gets the final epoch's figures. DG_ERR_INVALID for a NULL backend,
 * options or data set, a data set with no examples, sizes < 1, missing
 * arrays or test examples of another size than the training ones, no model
 * constructor, a batch outside 1..examples or epochs < 1; the model's
 * constructor and the step's builders check the rest (the model's
 * configuration, the optimizer kind). dg_train_multi(&be, 1, ...). */
dg_status dg_train(dg_backend *be, const dg_train_opts *o, const dg_dataset *train, const dg_dataset *test,
                   dg_epoch_fn cb, void *arg, dg_epoch_stats *last);
/* The same, data parallel over bes[0..n) (core/nn/data_parallel.h; one
 * backend per device, grouped: GPUs): o->batch is the global batch, each
 * replica steps on its slice of batch / n rows of the same seeded shuffle,
 * so a step sees the examples one backend would. Each replica keeps its own
 * copy of the data set (not copy_batches). The test set is evaluated on
 * bes[0]; a model's running statistics (batch norm) are replica 0's own.
 * n = 1 is dg_train. DG_ERR_INVALID as dg_train, and for n outside
 * 1..DG_DP_MAX_REPLICAS, a NULL backend among bes, a batch that n (or
 * o->ranks) does not divide, a rank outside 0..ranks-1, or ranks >= 2 with
 * n >= 2 (a rank drives one backend: an all-reduce spans the processes or
 * the replicas, not both) (checked before anything is made); what dg_dp_new refuses
 * (DG_ERR_UNSUPPORTED: backends without collectives, such as the CPU's),
 * with its status. */
dg_status dg_train_multi(dg_backend *const *bes, int n, const dg_train_opts *o, const dg_dataset *train,
                         const dg_dataset *test, dg_epoch_fn cb, void *arg, dg_epoch_stats *last);

#ifdef __cplusplus
}
#endif
#endif
