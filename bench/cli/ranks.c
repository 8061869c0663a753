/* ranks.c: see ranks.h. */
#include "cli/ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/status.h"

/* the command line as one text: what the ranks must agree on */
static void command_line(int argc, char **argv, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 1; i < argc && at < n; i++) {
        int w = snprintf(buf + at, n - at, "%s%s", i > 1 ? " " : "", argv[i]);
        at += w > 0 ? (size_t)w : 0;
    }
}

int bench_ranks_start(bench_ctx *ctx, const bench_choice *ch, const bench_mpi *m, int argc, char **argv, char *tmp,
                      size_t n) {
    tmp[0] = '\0';
    if (!m->on) return 0;
    if (ch->n_sweeps != 1 || strcmp(ch->sweeps[0]->name, "scaling"))
        return bench_usage_error("bench", "under MPI only the scaling sweep runs (--sweep scaling): each other sweep "
                                 "measures one process");
    if (ctx->gpu)
        return bench_usage_error("bench", "under MPI the scaling sweep runs CPU ranks: --backends cpu (its GPU rows "
                                 "are one process driving every GPU of the host: run it without mpirun)");
    char config[4096], hosts[4096];
    command_line(argc, argv, config, sizeof config);
    dg_status st = bench_mpi_agree(m, config);
    if (st == DG_OK) st = bench_mpi_hosts(m, "cpu", hosts, sizeof hosts);
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
