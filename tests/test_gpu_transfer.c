/* test_gpu_transfer.c: host <-> device copies (gpu_backend/gpu_transfer.cu).
 * Pinned memory (dg_backend_host_alloc) goes straight to the DMA engine;
 * pageable memory through the double-buffered staging, whose chunking,
 * halves and event waits are what these sizes and guards exercise. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <duograd/testing.h>

#include "gpu_util.h"
#include "test_util.h"

#define MIB ((size_t)1 << 20)
#define GUARD 64 /* bytes past each range that no copy may touch */

/* 1 byte; odd sizes; around the 256 KiB least chunk; a quarter-size chunk
 * (1 MiB + 7: four chunks and a tail); more than twice the two 8 MiB halves
 * (each half reused after waiting for its event); four 8 MiB chunks and a
 * last one of t * 256 KiB + 1 bytes, which t threads copy (where the host
 * has t): an exact 64-byte multiple per thread plus one byte that a slice
 * rounded from the floor of n / t leaves behind; 2047^2 floats, where
 * that first showed (its last quarter copied by 8 threads, 4 bytes over). */
static const size_t sizes[] = {1,           3,          4096 + 5,   (256 << 10) - 1, (256 << 10) + 1,
                               MIB + 7,     41 * MIB + 13,
                               32 * MIB + 2 * (256 << 10) + 1, 32 * MIB + 3 * (256 << 10) + 1,
                               32 * MIB + 8 * (256 << 10) + 1, (size_t)2047 * 2047 * 4};
#define N_SIZES (int)(sizeof sizes / sizeof *sizes)

/* bytes that never repeat with a period (a multiplicative hash's high
 * bits, which depend on every bit of i): a chunk moved to another
 * chunk's place cannot carry the same bytes */
static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        uint64_t x = ((uint64_t)i + seed) * 0x9e3779b97f4a7c15u;
        p[i] = (unsigned char)((x ^ (x >> 29)) >> 40);
    }
}

static size_t first_difference(const unsigned char *a, const unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return SIZE_MAX;
}

/* host memory of n + GUARD bytes: pinned (at an odd offset inside its block
 * when `inner`, which must still count as pinned) or pageable */
typedef struct host_buf { unsigned char *base, *p; bool pinned; } host_buf;

static host_buf host_new(dg_backend *gpu, size_t n, bool pinned, bool inner) {
    host_buf h = {NULL, NULL, pinned};
    size_t off = inner ? 13 : 0;
    if (pinned) ASSERT_OK(dg_backend_host_alloc(gpu, n + GUARD + off, (void **)&h.base));
    else h.base = malloc(n + GUARD + off);
    cr_assert_not_null(h.base);
    h.p = h.base + off;
    return h;
}

static void host_free(dg_backend *gpu, host_buf *h) {
    if (h->pinned) dg_backend_host_free(gpu, h->base);
    else free(h->base);
}

/* up from `src` kind, down into `dst` kind, through a device buffer whose
 * bytes past n hold a sentinel: the data, the host guard and the device
 * guard must all come out right */
static void round_trip(dg_backend *gpu, size_t n, bool src_pinned, bool dst_pinned, bool inner) {
    host_buf src = host_new(gpu, n, src_pinned, inner), dst = host_new(gpu, n, dst_pinned, inner);
    unsigned char *sentinel = malloc(n + GUARD), *back = malloc(n + GUARD);
    cr_assert(sentinel && back);
    fill(src.p, n + GUARD, 1);
    memset(dst.p, 0x5a, n + GUARD);
    memset(sentinel, 0xc3, n + GUARD);
    void *dev = NULL;
    ASSERT_OK(dg_backend_alloc(gpu, n + GUARD, &dev));
    ASSERT_OK(dg_backend_upload(gpu, dev, sentinel, n + GUARD));
    ASSERT_OK(dg_backend_upload(gpu, dev, src.p, n));
    ASSERT_OK(dg_backend_download(gpu, dst.p, dev, n));
    size_t at = first_difference(dst.p, src.p, n);
    cr_assert_eq(at, SIZE_MAX, "%zu bytes, %s -> %s%s: byte %zu differs", n, src_pinned ? "pinned" : "pageable",
                 dst_pinned ? "pinned" : "pageable", inner ? " (inside a block)" : "", at);
    for (size_t i = n; i < n + GUARD; i++)
        cr_assert_eq(dst.p[i], 0x5a, "%zu bytes: the download wrote host byte %zu past the range", n, i);
    ASSERT_OK(dg_backend_download(gpu, back, dev, n + GUARD));
    for (size_t i = n; i < n + GUARD; i++)
        cr_assert_eq(back[i], 0xc3, "%zu bytes: the upload wrote device byte %zu past the range", n, i);
    dg_backend_release(gpu, dev);
    host_free(gpu, &src);
    host_free(gpu, &dst);
    free(sentinel);
    free(back);
}

Test(gpu_transfer, pageable_round_trips_of_every_size) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    for (int i = 0; i < N_SIZES; i++) round_trip(gpu, sizes[i], false, false, false);
    dg_backend_free(gpu);
}

Test(gpu_transfer, pinned_round_trips_of_every_size) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    for (int i = 0; i < N_SIZES; i++) round_trip(gpu, sizes[i], true, true, false);
    dg_backend_free(gpu);
}

Test(gpu_transfer, mixed_and_inner_ranges) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    for (int i = 0; i < N_SIZES; i++) {
        round_trip(gpu, sizes[i], true, false, false);
        round_trip(gpu, sizes[i], false, true, true);
    }
    dg_backend_free(gpu);
}

/* The staging halves are reused only after the DMA that read them ran.
 * Work queued on the stream ahead of an upload (a step still running)
 * holds its DMAs back while the host goes on copying chunks: were a half
 * refilled before its DMA, the device would get the later chunk's bytes. */
Test(gpu_transfer, staging_waits_for_dmas_held_back_by_queued_work) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    size_t n = 41 * MIB + 13;
    int m = 2048; /* naive sgemm of 2048^3: about 3 ms of device work each */
    unsigned char *src = malloc(n), *back = malloc(n);
    cr_assert(src && back);
    void *dev = NULL, *a = NULL, *c = NULL;
    ASSERT_OK(dg_backend_alloc(gpu, n, &dev));
    ASSERT_OK(dg_backend_alloc(gpu, (size_t)m * m * sizeof(float), &a));
    ASSERT_OK(dg_backend_alloc(gpu, (size_t)m * m * sizeof(float), &c));
    for (int round = 0; round < 3; round++) {
        fill(src, n, 20u + (unsigned)round);
        for (int i = 0; i < 4; i++) /* the operands' values do not matter: c is never read */
            ASSERT_OK(dg_gpu_sgemm(gpu, DG_GPU_GEMM_NAIVE, false, false, false, m, m, m, a, a, c));
        ASSERT_OK(dg_backend_upload(gpu, dev, src, n));
        ASSERT_OK(dg_backend_download(gpu, back, dev, n));
        size_t at = first_difference(back, src, n);
        cr_assert_eq(at, SIZE_MAX, "round %d: byte %zu differs (chunk %zu)", round, at, at / (8 * MIB));
    }
    dg_backend_release(gpu, dev);
    dg_backend_release(gpu, a);
    dg_backend_release(gpu, c);
    free(src);
    free(back);
    dg_backend_free(gpu);
}

/* a copy into the middle of a device buffer lands at its offset, from
 * either kind of host memory */
Test(gpu_transfer, device_offsets_are_kept) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    size_t n = 3 * MIB + 5, off = 4099;
    for (int pin = 0; pin < 2; pin++) {
        host_buf src = host_new(gpu, n, pin, false);
        unsigned char *whole = malloc(off + n), *want = malloc(off + n);
        cr_assert(whole && want);
        fill(src.p, n, 9);
        memset(want, 0x11, off);
        memcpy(want + off, src.p, n);
        void *dev = NULL;
        ASSERT_OK(dg_backend_alloc(gpu, off + n, &dev));
        ASSERT_OK(dg_backend_upload(gpu, dev, want, off)); /* the head, 0x11 */
        ASSERT_OK(dg_backend_upload(gpu, (char *)dev + off, src.p, n));
        ASSERT_OK(dg_backend_download(gpu, whole, dev, off + n));
        size_t at = first_difference(whole, want, off + n);
        cr_assert_eq(at, SIZE_MAX, "%s: byte %zu differs", pin ? "pinned" : "pageable", at);
        dg_backend_release(gpu, dev);
        host_free(gpu, &src);
        free(whole);
        free(want);
    }
    dg_backend_free(gpu);
}

/* the driver's own staging (the bench's reference) moves the same bytes */
Test(gpu_transfer, unstaged_copies_round_trip) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    size_t n = 5 * MIB + 3;
    unsigned char *src = malloc(n), *dst = calloc(1, n);
    cr_assert(src && dst);
    fill(src, n, 4);
    void *dev = NULL;
    ASSERT_OK(dg_backend_alloc(gpu, n, &dev));
    ASSERT_OK(dg_gpu_copy_unstaged(gpu, dev, src, n, true));
    ASSERT_OK(dg_gpu_copy_unstaged(gpu, dst, dev, n, false));
    cr_assert_eq(first_difference(dst, src, n), SIZE_MAX);
    dg_backend_release(gpu, dev);
    free(src);
    free(dst);
    dg_backend_free(gpu);
}

/* pinned blocks of any size, from one backend, freed by it; NULL frees
 * nothing; an impossible size is OOM with a message and the backend goes on */
Test(gpu_transfer, host_alloc_sizes_and_refusals) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    size_t n[] = {0, 1, 4097, 3 * MIB};
    for (int i = 0; i < 4; i++) {
        unsigned char *p = NULL;
        ASSERT_OK(dg_backend_host_alloc(gpu, n[i], (void **)&p));
        cr_assert_not_null(p);
        memset(p, 1, n[i]);
        dg_backend_host_free(gpu, p);
    }
    dg_backend_host_free(gpu, NULL);
    void *p = &p;
    cr_assert_eq(dg_backend_host_alloc(gpu, (size_t)1 << 60, &p), DG_ERR_OOM);
    cr_assert_null(p);
    cr_assert(strstr(dg_last_error(), "page-lock"), "%s", dg_last_error());
    round_trip(gpu, MIB, true, false, false); /* still works */
    dg_backend_free(gpu);
}
