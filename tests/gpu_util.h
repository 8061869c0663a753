/* gpu_util.h: how the GPU suites get a device, or skip without one.
 *
 * Where no usable device answers, a test skips with the reason, which
 * says whether the device is absent ("no CUDA device: ...") or broken
 * ("CUDA device broken: ...", as dg_gpu_probe and dg_gpu_backend_new word
 * it). With DG_REQUIRE_GPU=1 in the environment (scripts/gpu-run.sh sets
 * it on the GPU machine) the same test fails instead: there a missing GPU
 * is a fault, not a reason to prove nothing. */
#ifndef DG_TEST_GPU_UTIL_H
#define DG_TEST_GPU_UTIL_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend/cpu_backend.h"
#include "gpu_backend/gpu_backend.h"

static inline bool gpu_required(void) {
    const char *s = getenv("DG_REQUIRE_GPU");
    return s && strcmp(s, "1") == 0;
}

/* skips the test (fails it under DG_REQUIRE_GPU=1) with why */
#define GPU_SKIP_OR_FAIL(why)                                                          \
    do {                                                                               \
        if (gpu_required()) cr_assert_fail("DG_REQUIRE_GPU=1, but %s", why);            \
        cr_skip_test("%s", why);                                                       \
    } while (0)

/* returns only where dg_gpu_probe finds a usable device */
static inline void gpu_usable_or_skip(void) {
    char why[512];
    if (dg_gpu_probe(why, sizeof why) != DG_GPU_PRESENT) GPU_SKIP_OR_FAIL(why);
}

/* a backend on opts' device, or the test skips (absent or broken device)
 * or fails (any other error) */
static inline dg_backend *gpu_open_or_skip(const dg_gpu_opts *opts) {
    dg_backend *be = NULL;
    dg_status st = dg_gpu_backend_new(&be, opts);
    const char *why = dg_last_error();
    if (st == DG_ERR_NO_DEVICE || (st != DG_OK && strncmp(why, "CUDA device broken: ", 20) == 0))
        GPU_SKIP_OR_FAIL(why);
    cr_assert_eq(st, DG_OK, "gpu backend: %s", why);
    return be;
}

#ifdef DG_HAVE_CUDA
/* GPU backends on devices 0..want-1, or the test skips where fewer
 * devices answer (a machine without any fails under DG_REQUIRE_GPU=1;
 * one with too few skips with the count: data parallelism's tests);
 * bucket: their dg_gpu_opts.all_reduce_bucket_bytes */
static inline void gpus_open_with_or_skip(dg_backend **be, int want, long long bucket) {
    gpu_usable_or_skip();
    int n = dg_gpu_device_count();
    if (n < want) cr_skip_test("%d CUDA device%s: this test needs %d", n, n == 1 ? "" : "s", want);
    for (int i = 0; i < want; i++) {
        dg_status st = dg_gpu_backend_new(&be[i], &(dg_gpu_opts){.device = i, .all_reduce_bucket_bytes = bucket});
        cr_assert_eq(st, DG_OK, "gpu backend on device %d: %s", i, dg_last_error());
    }
}
static inline void gpus_open_or_skip(dg_backend **be, int want) { gpus_open_with_or_skip(be, want, 0); }
#endif

/* the CPU backend (all threads), or the GPU one as gpu_open_or_skip; a
 * build without CUDA skips (fails under DG_REQUIRE_GPU=1) the GPU side */
static inline dg_backend *test_backend_open(bool gpu) {
    dg_backend *be = NULL;
    if (!gpu) {
        dg_status st = dg_cpu_backend_new(&be, 0);
        cr_assert_eq(st, DG_OK, "cpu backend: %s", dg_last_error());
        return be;
    }
#ifdef DG_HAVE_CUDA
    be = gpu_open_or_skip(NULL);
#else
    GPU_SKIP_OR_FAIL("built without CUDA (DG_CUDA=OFF): no GPU backend to test");
#endif
    return be;
}

#endif
