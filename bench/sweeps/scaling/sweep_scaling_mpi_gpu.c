/* sweep_scaling_mpi_gpu.c: the scaling sweep's GPU rows under MPI
 * (`mpirun -np N bench --sweep scaling --backends gpu`): one process per
 * rank, each on one GPU, the device of its local rank (cli/ranks.c refuses
 * more ranks on a host than it has GPUs). The rows of sweep_scaling_mpi.c
 * (scaling_ranks.h) with the models of the one-process GPU rows
 * (sweep_scaling.c: the MLP, ResNet-18 and the char-LM, at their batches
 * per GPU), so that the two modes compare row by row.
 *
 * impl "gpu-mpi": the first n ranks' GPU backends joined by NCCL
 * (bench_mpi_join_first_gpu: rank 0's unique id broadcast over MPI, the
 * communicator bench train's GPU ranks make), each rank's step a plan on
 * its backend, replayed as a CUDA graph, its all_reduce nodes averaging
 * over the n ranks in buckets of up to DG_GPU_BUCKET_BYTES_DEFAULT on the
 * comm stream while the backward goes on: the all-reduce of the one
 * process's dg_dp rows, across processes. The note says whether the plan
 * replays a captured graph. Rows, checks, timings and faults as
 * sweep_scaling_mpi.c states them; the checks' one process runs on a GPU
 * backend of rank 0's device. A build without CUDA has none of this. */
#include <duograd/version.h> /* DG_HAVE_CUDA, for a bench built against the installed package too */
#ifdef DG_HAVE_CUDA
#include <stdio.h>

#include "core/status.h"
#include "gpu_backend/gpu_backend.h"
#include "sweeps/scaling/scaling_ranks.h"
#include "sweeps/scaling/sweep_scaling.h"

static const bench_impl gpu_impls[] = {{.name = "gpu-mpi", .gpu = true}};

static bool gpu_applies(const bench_impl *im, int n) {
    (void)im, (void)n;
    return true;
}

static dg_status gpu_alone(const bench_ctx *ctx, const bench_mpi *m, dg_backend **be) {
    (void)ctx;
    dg_status st = dg_gpu_backend_new(be, &(dg_gpu_opts){.device = m->local_rank});
    if (st == DG_OK) return DG_OK;
    char why[512];
    snprintf(why, sizeof why, "%s", dg_last_error());
    return dg_fail(st, "gpu backend on device %d (its local rank): %s", m->local_rank, why);
}

static dg_status gpu_open(const bench_ctx *ctx, const bench_mpi *m, const bench_impl *im, int n, dg_backend **be) {
    (void)im;
    *be = NULL;
    dg_status st = m->rank < n ? gpu_alone(ctx, m, be) : DG_OK;
    if (st == DG_OK && n > 1) st = bench_mpi_join_first_gpu(m, *be, n);
    return st;
}

static void gpu_note(const bench_impl *im, int n, dg_precision prec, const dg_plan *p, char *buf, size_t len) {
    (void)im, (void)prec;
    int at = snprintf(buf, len, "%s", p && dg_plan_captured(p) ? ", replayed as a CUDA graph" : "");
    if (n > 1 && at >= 0 && (size_t)at < len)
        snprintf(buf + at, len - (size_t)at, ", NCCL across %d processes in buckets of up to %lld KiB", n,
                 DG_GPU_BUCKET_BYTES_DEFAULT >> 10);
}

static const ranks_kind gpu_ranks = {
    .gpu = true, .impls = gpu_impls, .n_impls = 1, .models = scaling_gpu_models, .applies = gpu_applies,
    .open = gpu_open, .alone = gpu_alone, .note = gpu_note,
};

dg_status sweep_scaling_gpu_ranks(bench_ctx *ctx) { return sweep_scaling_ranks_of(ctx, &gpu_ranks); }
#endif
