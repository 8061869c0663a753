/* core/testing.h: the core's hooks for the tests and the bench: the
 * allocation counter and fault injection of every backend's allocator.
 * Part of <duograd/testing.h>, which says what these hooks are (and are
 * not); no header of the user API includes this one. */
#ifndef DG_CORE_TESTING_H
#define DG_CORE_TESTING_H

#include <stddef.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocations made through dg_backend_alloc so far (a plan that allocates
 * during a run shows up here); 0 for a NULL backend. */
size_t dg_backend_n_allocs(const dg_backend *be);
/* The n-th next allocation fails with DG_ERR_OOM (n <= 0: none); nothing
 * for a NULL backend. */
void   dg_backend_fail_alloc_after(dg_backend *be, int n);

#ifdef __cplusplus
}
#endif
#endif
