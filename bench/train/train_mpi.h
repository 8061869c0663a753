/* train_mpi.h: `bench train` and the scaling sweep's CPU ranks
 * (sweeps/scaling/sweep_scaling_mpi.c) launched by an MPI launcher (mpirun, srun):
 * one process per rank, each training its slice of the global batch on its
 * own backend: a CPU one, whose all_reduce nodes sum over the ranks by
 * MPI (dg_cpu_set_all_reduce, or overlapped with the backward:
 * dg_cpu_set_all_reduce_overlap), or a GPU one, the local rank's device,
 * whose all_reduce nodes run over an NCCL communicator made from a unique
 * id rank 0 broadcasts over MPI (dg_gpu_join_ranks). MPI_Init and
 * MPI_Finalize are the bench's, not the library's; nothing here names
 * MPI's types, so the trainer includes this whether or not the build has
 * MPI (DG_MPI). Built without it, a launch by MPI is refused with that
 * reason.
 *
 * Faults: whatever fails on one rank (a bad option, a mismatched build or
 * configuration, an error in a step) is printed there and ends the whole
 * job through MPI_Abort with a non-zero status: no rank is left waiting in
 * a collective for one that is gone. */
#ifndef DG_BENCH_TRAIN_MPI_H
#define DG_BENCH_TRAIN_MPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"

typedef struct bench_mpi {
    bool on;          /* launched by MPI and MPI_Init done */
    int  rank, ranks; /* 0 and 1 when not launched by MPI  */
    int  local_rank;  /* among the ranks of this host: its GPU */
    int  local_ranks; /* the ranks of this host (1 when not launched by MPI) */
} bench_mpi;

/* Whether this build can run ranks (DG_MPI). */
bool bench_mpi_built(void);
/* Whether an MPI launcher started this process: Open MPI's mpirun sets
 * OMPI_COMM_WORLD_SIZE, PMIx launchers PMIX_RANK, Slurm's srun and MPICH's
 * launchers PMI_SIZE. *var gets the variable's name. */
bool bench_mpi_launched(const char **var);
/* MPI_Init where launched by MPI (m->on), else a lone rank 0 of 1. 1 with
 * the reason on stderr where launched but built without MPI or MPI_Init
 * fails; 0 otherwise. */
int  bench_mpi_start(bench_mpi *m);
/* The same build on the same configuration on every rank: a hash of
 * config (a text naming every option that shapes the training) and the
 * build's commit and flags, compared over the ranks at start.
 * DG_ERR_INVALID on every rank where one differs, naming the first rank
 * that differs from rank 0. */
dg_status bench_mpi_agree(const bench_mpi *m, const char *config);
/* be's all_reduce nodes average over the ranks: a CPU backend's by
 * MPI_Allreduce in each node (summed in place, then divided by the rank
 * count), or (overlap, 2 ranks or more) by MPI_Iallreduce per bucket
 * overlapping the backward, as bench_mpi_join_first's; a GPU backend's by
 * NCCL (rank 0's unique id broadcast, dg_gpu_join_ranks; overlap
 * unused: NCCL's buckets overlap already). Every rank calls it. */
dg_status bench_mpi_join(const bench_mpi *m, dg_backend *be, bool overlap);
/* be's all_reduce nodes average over the first n ranks (1 < n <= ranks),
 * on a communicator of their own: by MPI_Allreduce in each node, or
 * (overlap) by MPI_Iallreduce per bucket overlapping the backward
 * (dg_cpu_set_all_reduce_overlap). Every rank calls it, the ranks from n
 * on with be NULL (they join nothing): the first call for a count is a
 * collective that makes its communicator. */
dg_status bench_mpi_join_first(const bench_mpi *m, dg_backend *be, int n, bool overlap);
/* be's all_reduce nodes (a GPU backend's) average over the first n ranks
 * (1 < n <= ranks) by NCCL: rank 0 draws a unique id, MPI broadcasts it to
 * every rank, and the first n join a communicator of their own with it
 * (dg_gpu_join_ranks, as bench_mpi_join's GPU ranks). Every rank calls it,
 * the ranks from n on with be NULL (they take the id and join nothing). */
dg_status bench_mpi_join_first_gpu(const bench_mpi *m, dg_backend *be, int n);
/* Over the ranks where active (rank 0 among them): the least of v[0]
 * into *least, the rank with the most into *slowest, and that rank's
 * v[0..n_v) into every rank's v. */
dg_status bench_mpi_slowest(const bench_mpi *m, bool active, double *v, int n_v, double *least, int *slowest);
/* Whether x is the same on every rank where active (a hash of each
 * rank's parameters): *same on every rank. */
dg_status bench_mpi_same(const bench_mpi *m, bool active, uint64_t x, bool *same);
/* rank 0's v[0..n) into every rank's */
dg_status bench_mpi_share(const bench_mpi *m, double *v, int n);
/* The least and the most of x over the ranks and the rank with the most
 * (every rank gets them). */
dg_status bench_mpi_spread(const bench_mpi *m, double x, double *min, double *max, int *slowest);
/* Every rank's host and device: "rank 0 HOST DEVICE, rank 1 HOST DEVICE,
 * ..." into buf (every rank gets it; cut at n); device: this rank's ("cpu",
 * "gpu 1"). */
dg_status bench_mpi_hosts(const bench_mpi *m, const char *device, char *buf, size_t n);
/* The run's end with exit status rc: MPI_Finalize and rc where rc is 0;
 * otherwise MPI_Abort(rc), which ends every rank and does not return. Not
 * launched by MPI: rc. The communicators of bench_mpi_join_first are freed
 * before MPI_Finalize. */
int  bench_mpi_end(const bench_mpi *m, int rc);

#endif
