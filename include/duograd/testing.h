/* testing.h: hooks for duograd's own tests and its bench harness, not for
 * programs that use the library. No stability promise: any of these may
 * change or go in any release, minor or patch, without notice (SQLite keeps
 * its sqlite3_test_control apart from its API for the same reason).
 *
 * They make failures happen on purpose (an allocation that fails, a device
 * that faults), count what a run did (allocations), and give the bench its
 * reference points (the L2 cache's size and a flush of it, the driver's
 * own copies and all-reduce, the device's PCI bus id for NVML). The
 * umbrella <duograd/duograd.h> does not include this header, and no header
 * of the user API does: a program sees these only by asking for them.
 * They are exported by libduograd.so like the rest (the installed bench
 * and a test linking the shared library need them), and installed beside
 * the umbrella so the bench builds against the installed package.
 *
 *   core/testing.h             allocation counter and allocation failures
 *   gpu_backend/gpu_testing.h  fault injection, L2 size and flush, PCI bus
 *                              id, reference copies and all-reduce (where
 *                              the CUDA backend was built) */
#ifndef DG_TESTING_H
#define DG_TESTING_H

#include <duograd/version.h>

#include "core/testing.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_testing.h"
#endif

#endif
