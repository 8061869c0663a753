/* ceiling_transfer.c: the host <-> device copy rates, the ceiling of every
 * row with transfer=1. Three ways per direction and size:
 *   gpu-pinned           page-locked host memory (dg_backend_host_alloc):
 *                        one DMA, what a data loader's pinned batches get;
 *   gpu-pageable         ordinary malloc memory through the backend's
 *                        double-buffered staging (dg_backend_upload/download);
 *   gpu-pageable-driver  the same memory handed to cudaMemcpyAsync as it is
 *                        (the CUDA driver stages it): the reference the
 *                        backend's staging is measured against.
 * gbps counts the bytes moved once (not read plus written, as the device
 * copy row does). Check: the data that arrives equals the data sent, byte
 * for byte (h2d: read back through pinned memory; d2h: the host buffer). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/status_internal.h"
#include "runner/sweep.h"
#include <duograd/testing.h>
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"

typedef struct xfer_impl { const char *name; bool pinned, driver; } xfer_impl;
static const xfer_impl xfer_impls[] = {
    {"gpu-pinned", true, false},
    {"gpu-pageable", false, false},
    {"gpu-pageable-driver", false, true},
};
#define N_XFER (int)(sizeof xfer_impls / sizeof *xfer_impls)

typedef struct xfer_arg { dg_backend *be; const xfer_impl *im; bool upload; void *host, *dev; size_t bytes; } xfer_arg;

static dg_status xfer_run(void *arg) {
    xfer_arg *a = arg;
    if (a->im->driver) return dg_gpu_copy_unstaged(a->be, a->upload ? a->dev : a->host, a->upload ? a->host : a->dev,
                                                    a->bytes, a->upload);
    return a->upload ? dg_backend_upload(a->be, a->dev, a->host, a->bytes)
                     : dg_backend_download(a->be, a->host, a->dev, a->bytes);
}

/* bytes without a period (a multiplicative hash's high bits), so a chunk
 * delivered to another chunk's place fails the check */
static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        uint64_t x = ((uint64_t)i + seed) * 0x9e3779b97f4a7c15u;
        p[i] = (unsigned char)((x ^ (x >> 29)) >> 40);
    }
}

/* one row: direction, size, way; pattern: the bytes that must arrive */
static void xfer_row(bench_ctx *ctx, const xfer_impl *im, bool upload, size_t bytes, void *dev,
                     unsigned char *pinned_buf, const unsigned char *pattern) {
    bench_row row = {.sweep = "ceiling", .name = upload ? "h2d" : "d2h", .impl = im->name, .backend = "gpu",
                     .m = (long long)(bytes / 4), .n = 1, .k = 1, .batch = 1, .threads = ctx->threads,
                     .transfer = true, .warmup = ctx->timing.warmup, .bytes = (double)bytes,
                     .max_rel_err = NAN, .check = "bitwise"};
    if (!bench_wanted(ctx, row.name, row.impl)) return;
    unsigned char *host = im->pinned ? pinned_buf : malloc(bytes);
    dg_status st = host ? DG_OK : dg__fail(DG_ERR_OOM, "host memory for a %zu-byte transfer", bytes);
    xfer_arg a = {ctx->gpu, im, upload, host, dev, bytes};
    if (st == DG_OK) { /* what must arrive: on the host to send, or on the device to fetch */
        if (upload) memcpy(host, pattern, bytes);
        else {
            memset(host, 0, bytes);
            st = dg_backend_upload(ctx->gpu, dev, pattern, bytes);
        }
    }
    if (st == DG_OK) st = bench_time(ctx->gpu, false, xfer_run, &a, &ctx->timing, &row.st);
    bool same = false;
    if (st == DG_OK && upload) { /* read the device back through pinned memory: not the path under test */
        if (im->pinned) memset(host, 0, bytes);
        if ((st = dg_backend_download(ctx->gpu, pinned_buf, dev, bytes)) == DG_OK)
            same = memcmp(pinned_buf, pattern, bytes) == 0;
    } else if (st == DG_OK) {
        same = memcmp(host, pattern, bytes) == 0;
    }
    if (st == DG_OK) {
        row.max_rel_err = same ? 0.0 : 1.0;
        row.status = same ? "ok" : "wrong";
    } else {
        row.status = bench_status_word(st);
        row.note = dg_last_error();
    }
    bench_emit(ctx, &row);
    if (!im->pinned) free(host);
}

/* every size's rows: pinned and device buffers of the largest size, made once */
void bench_transfer_ceilings(bench_ctx *ctx) {
    static const size_t full[] = {(size_t)1 << 20, (size_t)16 << 20, (size_t)256 << 20};
    static const size_t quick[] = {(size_t)1 << 20, (size_t)64 << 20};
    const size_t *sizes = ctx->quick ? quick : full;
    int n_sizes = ctx->quick ? 2 : 3;
    size_t most = sizes[n_sizes - 1];
    bench_plan_rows(ctx, 2 * n_sizes * N_XFER);
    unsigned char *pattern = malloc(most), *pinned_buf = NULL;
    void *dev = NULL;
    dg_status st = pattern ? DG_OK : dg__fail(DG_ERR_OOM, "host memory for a %zu-byte transfer", most);
    if (st == DG_OK) st = dg_backend_host_alloc(ctx->gpu, most, (void **)&pinned_buf);
    if (st == DG_OK) st = dg_backend_alloc(ctx->gpu, most, &dev);
    if (st != DG_OK) {
        bench_row row = {.sweep = "ceiling", .name = "h2d", .impl = "all", .backend = "gpu", .m = (long long)(most / 4),
                         .n = 1, .k = 1, .batch = 1, .transfer = true, .max_rel_err = NAN,
                         .status = bench_status_word(st), .note = dg_last_error()};
        bench_emit(ctx, &row);
    }
    for (int s = 0; st == DG_OK && s < n_sizes && !bench_interrupted; s++) {
        fill(pattern, sizes[s], (unsigned)s * 7u + 3u);
        for (int up = 1; up >= 0; up--)
            for (int i = 0; i < N_XFER && !bench_interrupted; i++)
                xfer_row(ctx, &xfer_impls[i], up, sizes[s], dev, pinned_buf, pattern);
    }
    dg_backend_release(ctx->gpu, dev);
    dg_backend_host_free(ctx->gpu, pinned_buf);
    free(pattern);
}

#else
void bench_transfer_ceilings(bench_ctx *ctx) { (void)ctx; } /* no GPU backend: nothing to transfer */
#endif

/* the best rate of each direction's pinned rows */
void bench_transfer_ceilings_read(const bench_table *t, bench_ceilings *c) {
    for (int d = 0; d < 2; d++) {
        bench_series s = bench_pick(t, d ? "d2h" : "h2d", "gpu-pinned", NULL, true, BENCH_GBPS, "");
        c->pinned_gbps[d] = bench_series_max(&s, NULL);
    }
}

/* transfer_gbps: the rate of every way and direction over sizes, with
 * PyTorch's copies where bench/torch_ops_peer.py --transfers ran in the
 * same folder (torch_ops.csv), and a table of the best of each; nothing
 * without transfer rows */
bool bench_report_ceiling(bench_report *rep, const bench_table *t) {
    static const char *const impls[] = {"gpu-pinned", "gpu-pageable", "gpu-pageable-driver", "torch-pinned",
                                        "torch-pageable"};
    enum { N_WAYS = 5, FIRST_PEER = 3 };
    bench_table peer = bench_table_load(rep->dir, "torch_ops");
    bench_chart ch = {"transfer_gbps", "host-device transfer rate", "floats moved", "GB/s", false, .vline = NAN};
    char title[2 * N_WAYS][48];
    double best[N_WAYS][2];
    for (int i = 0; i < N_WAYS; i++)
        for (int d = 0; d < 2; d++) {
            const char *dir = d ? "d2h" : "h2d";
            char *ti = title[2 * i + d];
            snprintf(ti, sizeof title[0], "%s %s", dir, impls[i]);
            bench_series s = bench_pick(i < FIRST_PEER ? t : &peer, dir, impls[i], NULL, true, BENCH_GBPS, ti);
            best[i][d] = bench_series_max(&s, NULL);
            bench_chart_add(&ch, s);
        }
    free(peer.r);
    if (!ch.n) return false;
    fprintf(rep->sum, "## Host-device transfers (bytes moved / time, best over sizes)\n\n"
                      "| way | h2d GB/s | d2h GB/s |\n|---|---|---|\n");
    for (int i = 0; i < N_WAYS; i++) {
        char b0[32], b1[32];
        if (i < FIRST_PEER || !isnan(best[i][0]) || !isnan(best[i][1]))
            fprintf(rep->sum, "| %s | %s | %s |\n", impls[i], bench_fmt_num(best[i][0], "%.1f", b0, 32),
                    bench_fmt_num(best[i][1], "%.1f", b1, 32));
    }
    fprintf(rep->sum, "\n");
    bench_chart_draw(rep, &ch);
    return true;
}
