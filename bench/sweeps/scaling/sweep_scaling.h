/* sweep_scaling.h: what the scaling sweep (sweep_scaling.c) and its report
 * (sweep_scaling_report.c) share. */
#ifndef DG_BENCH_SWEEP_SCALING_H
#define DG_BENCH_SWEEP_SCALING_H

#include "runner/sweep.h"
#include "sweeps/scaling/scaling_step.h"

/* the GPU counts swept, those the machine has */
#define SCALING_N_COUNTS 4
extern const int scaling_counts[SCALING_N_COUNTS]; /* 1, 2, 4, 8 */

/* the CPU rows: data parallelism over MPI ranks (sweep_scaling_mpi.c) */
dg_status sweep_scaling_ranks(bench_ctx *ctx);

/* CUDA builds alone define these two (declared whatever the build: this
 * header may be read before the one that says whether CUDA is in it) */
/* the GPU models of the sweep (the one-process rows' and the GPU ranks'):
 * their count, into m[0..3) */
int       scaling_gpu_models(dp_model *m);
/* the GPU rows under MPI: one GPU per rank (sweep_scaling_mpi_gpu.c) */
dg_status sweep_scaling_gpu_ranks(bench_ctx *ctx);

#endif
