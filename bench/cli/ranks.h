/* ranks.h: `bench --sweep scaling` launched by MPI (mpirun, srun): one
 * process per rank, each a CPU backend; the scaling sweep's CPU rows
 * (sweeps/scaling/sweep_scaling_mpi.c) run their steps on the first 1, 2,
 * 4, ... of them. Rank 0 alone keeps its files; the others write into a
 * folder of their own (not the shared --out, which may be on a file system
 * that every host sees) and discard what they wrote. */
#ifndef DG_BENCH_CLI_RANKS_H
#define DG_BENCH_CLI_RANKS_H

#include <stddef.h>

#include "cli/options.h"
#include "train/train_mpi.h"

/* Under MPI (m->on), once the backends are open and ctx->meta written:
 * refuses a run that is not the scaling sweep on the CPU alone (a GPU
 * open), compares the ranks' builds and command lines (argv), writes
 * every rank's host into ctx->meta, and on ranks other than 0 points
 * ctx->out_dir at a new folder (tmp, n bytes) whose files are discarded.
 * 0, or the exit status with the reason on stderr. Not under MPI: 0. */
int  bench_ranks_start(bench_ctx *ctx, const bench_choice *ch, const bench_mpi *m, int argc, char **argv, char *tmp,
                       size_t n);
/* the folder of bench_ranks_start removed (tmp "" : none) */
void bench_ranks_end(const char *tmp);

#endif
