/* train_csv.c: what both trainers (train.c, train_charlm.c) open and
 * close around a training run: the backend, the result folder and its CSV
 * with the run's metadata. */
#include "train/train_csv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/backends.h"
#include "machine/env.h"
#include "runner/sweep.h"
#include "writers/csv.h"

FILE *bench_train_open(const char *backend, int threads, const char *out, const char *name, const char *header,
                       const char *ranks, int argc, char **argv, dg_backend **be) {
    if (!*be && bench_backend_open(backend, threads, be) != DG_OK) {
        fprintf(stderr, "bench train: %s backend: %s\n", backend, dg_last_error());
        return NULL;
    }
    FILE *csv = NULL;
    /* the whole path, as the sweeps make theirs: a fresh checkout has no reports/ */
    if (bench_mkdir_p(out)) {
        fprintf(stderr, "bench train: cannot create %s: %s\n", out, strerror(errno));
    } else {
        char meta[4096];
        dg_backend *gpu = !strcmp(backend, "gpu") ? *be : NULL;
        bench_env_meta(meta, sizeof meta, threads, gpu);
        bench_env_meta_more(meta, sizeof meta, argc, argv, gpu);
        size_t used = strlen(meta);
        if (ranks) snprintf(meta + used, sizeof meta - used, "# ranks: %s\n", ranks);
        /* written as NAME.csv.partial: an earlier NAME.csv is replaced only by a finished run */
        if (!(csv = bench_csv_open(out, name, meta, header))) fprintf(stderr, "bench train: %s\n", dg_last_error());
    }
    if (!csv) {
        dg_backend_free(*be);
        *be = NULL;
    }
    return csv;
}

dg_status bench_train_close(FILE *csv, const char *out, const char *name, dg_status st) {
    if (st != DG_OK) fprintf(stderr, "bench train: %s\n", dg_last_error());
    dg_status fin = bench_csv_finish(csv, out, name, st == DG_OK);
    if (fin != DG_OK) fprintf(stderr, "bench train: %s\n", dg_last_error());
    return st != DG_OK ? st : fin;
}
