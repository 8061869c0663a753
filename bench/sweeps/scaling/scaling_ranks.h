/* scaling_ranks.h: the scaling sweep's rows of MPI ranks, one process per
 * rank (cli/ranks.h), whatever a rank's device: sweep_scaling_mpi.c runs
 * the rows (points, checks, the slowest rank's times) for a kind of rank,
 * which says what its models and implementations are and how a rank's
 * backend is made and joined to the others': the CPU ranks there, the GPU
 * ranks in sweep_scaling_mpi_gpu.c. */
#ifndef DG_BENCH_SCALING_RANKS_H
#define DG_BENCH_SCALING_RANKS_H

#include "runner/runner.h"
#include "sweeps/scaling/scaling_step.h"
#include "train/train_mpi.h"

enum { RANKS_MAX_MODELS = 3 };

typedef struct ranks_kind {
    bool              gpu;         /* its rows' device: a GPU per rank, or a CPU */
    const bench_impl *impls;
    int               n_impls;
    /* its models into m[0..RANKS_MAX_MODELS) (optimizer set), their count */
    int (*models)(dp_model *m);
    /* whether impl im has rows on n ranks */
    bool (*applies)(const bench_impl *im, int n);
    /* this rank's backend for im's rows on the first n ranks (*be NULL on
     * the ranks from n on), its all_reduce nodes averaging over them where
     * n > 1: a collective, every rank calls it for every group in the
     * same order */
    dg_status (*open)(const bench_ctx *ctx, const bench_mpi *m, const bench_impl *im, int n, dg_backend **be);
    /* a backend of this rank's device alone: the one process of the check */
    dg_status (*alone)(const bench_ctx *ctx, const bench_mpi *m, dg_backend **be);
    /* what follows "G gradients, X MB per step" in the note of im's row
     * in precision prec on n ranks, timing plan p (buf, len bytes) */
    void (*note)(const bench_impl *im, int n, dg_precision prec, const dg_plan *p, char *buf, size_t len);
} ranks_kind;

/* the rows of kind's ranks (ctx->mpi; not under MPI: one rank's) */
dg_status sweep_scaling_ranks_of(bench_ctx *ctx, const ranks_kind *kind);

#endif
