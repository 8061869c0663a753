/* backends.h: opening backends by name for the CLI. */
#ifndef DG_BENCH_BACKENDS_H
#define DG_BENCH_BACKENDS_H

#include "core/backend.h"

/* "cpu" or "gpu". A GPU that is not built or does not answer gives
 * DG_ERR_NO_DEVICE with the reason in dg_last_error(). */
dg_status bench_backend_open(const char *name, int threads, dg_backend **out);

#endif
