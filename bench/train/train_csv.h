/* train_csv.h: what both trainers (train.c, train_charlm.c) open and close
 * around a run. Neither trainer's header is included here, so the two
 * share this without including each other. */
#ifndef DG_BENCH_TRAIN_CSV_H
#define DG_BENCH_TRAIN_CSV_H

#include <stdio.h>

#include "core/status.h"

struct dg_backend;
/* What both trainers open: the backend `backend` ("cpu" or "gpu") into *be
 * (unless *be is one already: kept, and freed on failure as if opened here),
 * the folder out, and out/NAME.csv(.partial) with the run's metadata and
 * header; ranks (NULL: none), a line of metadata naming the MPI ranks and
 * their hosts. NULL, with the reason on stderr and nothing left open, when
 * any of them fails. */
FILE *bench_train_open(const char *backend, int threads, const char *out, const char *name, const char *header,
                       const char *ranks, int argc, char **argv, struct dg_backend **be);
/* After the training (st its status): closes csv, keeping out/NAME.csv
 * only when st is DG_OK, and says on stderr what failed. The run's final
 * status. */
dg_status bench_train_close(FILE *csv, const char *out, const char *name, dg_status st);
#endif
