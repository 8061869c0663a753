/* ranks.c: see ranks.h. */
#include "cli/ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/status.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

/* the command line as one text: what the ranks must agree on */
static void command_line(int argc, char **argv, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 1; i < argc && at < n; i++) {
        int w = snprintf(buf + at, n - at, "%s%s", i > 1 ? " " : "", argv[i]);
        at += w > 0 ? (size_t)w : 0;
    }
}

bool bench_ranks_fit(int local_ranks, int devices, const char *host, char *why, size_t n) {
    if (local_ranks <= devices) return true;
    snprintf(why, n, "%d rank%s on host %s, which has %d CUDA device%s: the GPU rows take one GPU per rank (at "
             "most %d per host)", local_ranks, local_ranks == 1 ? "" : "s", host, devices, devices == 1 ? "" : "s",
             devices);
    return false;
}

/* Under MPI with a GPU wanted: every rank has one or none (the GPU rows'
 * collectives take every rank), no more ranks on a host than it has GPUs,
 * and ctx->gpu on the local rank's device. 0, or 1 with the reason on
 * stderr (rank 0 names a rank without a GPU; every rank of a host with
 * too few says so). */
static int gpu_ranks(bench_ctx *ctx, const bench_mpi *m) {
    double least, most;
    int without;
    if (bench_mpi_spread(m, ctx->gpu ? 0 : 1, &least, &most, &without) != DG_OK) {
        fprintf(stderr, "bench: rank %d: %s\n", m->rank, dg_last_error());
        return 1;
    }
    if (least != most) {
        if (m->rank == 0)
            fprintf(stderr, "bench: rank %d has no GPU (its reason above) while other ranks have one: under MPI "
                    "every rank runs the same rows, the GPU rows one GPU per rank (--backends cpu for the CPU "
                    "rows alone)\n", without);
        return 1;
    }
    if (!ctx->gpu) return 0;
#ifdef DG_HAVE_CUDA
    char host[256] = "", why[512];
    gethostname(host, sizeof host - 1);
    if (!bench_ranks_fit(m->local_ranks, dg_gpu_device_count(), host, why, sizeof why)) {
        fprintf(stderr, "bench: rank %d: %s\n", m->rank, why);
        return 1;
    }
    if (m->local_rank == dg_gpu_device(ctx->gpu)) return 0;
    dg_backend_free(ctx->gpu); /* the bench opened device 0: this rank's is its local rank's */
    if (dg_gpu_backend_new(&ctx->gpu, &(dg_gpu_opts){.device = m->local_rank}) != DG_OK) {
        fprintf(stderr, "bench: rank %d: gpu backend on device %d (its local rank) of host %s: %s\n", m->rank,
                m->local_rank, host, dg_last_error());
        ctx->gpu = NULL;
        return 1;
    }
#endif
    return 0;
}

int bench_ranks_start(bench_ctx *ctx, const bench_choice *ch, const bench_mpi *m, int argc, char **argv, char *tmp,
                      size_t n) {
    tmp[0] = '\0';
    if (!m->on) return 0;
    if (ch->n_sweeps != 1 || strcmp(ch->sweeps[0]->name, "scaling"))
        return bench_usage_error("bench", "under MPI only the scaling sweep runs (--sweep scaling): each other sweep "
                                 "measures one process");
    char config[4096], hosts[4096], device[64];
    command_line(argc, argv, config, sizeof config);
    dg_status st = bench_mpi_agree(m, config);
    int rc = st == DG_OK ? gpu_ranks(ctx, m) : 0;
    if (rc) return rc;
    if (ctx->gpu) snprintf(device, sizeof device, "%sgpu %d", ctx->cpu ? "cpu and " : "", m->local_rank);
    else snprintf(device, sizeof device, "cpu");
    if (st == DG_OK) st = bench_mpi_hosts(m, device, hosts, sizeof hosts);
    if (st != DG_OK) {
        fprintf(stderr, "bench: rank %d: %s\n", m->rank, dg_last_error());
        return 1;
    }
    size_t len = strlen(ctx->meta);
    if (len < sizeof ctx->meta)
        snprintf(ctx->meta + len, sizeof ctx->meta - len, "# ranks: %d (MPI, one process each): %s\n", m->ranks, hosts);
    ctx->mpi = m;
    if (m->rank == 0) return 0;
    snprintf(tmp, n, "%s/bench-rank%d-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", m->rank);
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "bench: rank %d: cannot create %s for its discarded files\n", m->rank, tmp);
        tmp[0] = '\0';
        return 1;
    }
    ctx->out_dir = tmp;
    ctx->discard = true;
    return 0;
}

void bench_ranks_end(const char *tmp) {
    if (tmp[0]) rmdir(tmp);
}
