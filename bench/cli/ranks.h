/* ranks.h: `bench --sweep scaling` launched by MPI (mpirun, srun): one
 * process per rank, each a CPU backend, a GPU (its local rank's device)
 * or both; the scaling sweep's rows of ranks
 * (sweeps/scaling/sweep_scaling_mpi.c, sweep_scaling_mpi_gpu.c) run their
 * steps on the first 1, 2, 4, ... of them. Rank 0 alone keeps its files; the others write into a
 * folder of their own (not the shared --out, which may be on a file system
 * that every host sees) and discard what they wrote. */
#ifndef DG_BENCH_CLI_RANKS_H
#define DG_BENCH_CLI_RANKS_H

#include <stdbool.h>
#include <stddef.h>

#include "cli/options.h"
#include "train/train_mpi.h"

/* Under MPI (m->on), once the backends are open and ctx->meta written:
 * refuses a run that is not the scaling sweep, compares the ranks' builds
 * and command lines (argv), refuses GPUs on some ranks and not others and
 * more ranks on a host than it has GPUs (naming both counts), moves
 * ctx->gpu to the local rank's device, writes every rank's host and device
 * into ctx->meta, and on ranks other than 0 points
 * ctx->out_dir at a new folder (tmp, n bytes) whose files are discarded.
 * 0, or the exit status with the reason on stderr. Not under MPI: 0. */
int  bench_ranks_start(bench_ctx *ctx, const bench_choice *ch, const bench_mpi *m, int argc, char **argv, char *tmp,
                       size_t n);
/* Whether local_ranks ranks on one host (host: its name) find a GPU each
 * among its devices; if not, why (n bytes) names both counts. */
bool bench_ranks_fit(int local_ranks, int devices, const char *host, char *why, size_t n);
/* the folder of bench_ranks_start removed (tmp "" : none) */
void bench_ranks_end(const char *tmp);

#endif
