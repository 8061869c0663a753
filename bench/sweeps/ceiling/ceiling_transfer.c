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

#include "core/status.h"
#include "runner/runner.h"
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

/* ---- the runner's view (runner/runner.h): a point is a direction at a
 * size, an implementation a way; the buffers of the largest size are made
 * once for every point ---- */

static const bench_impl runner_impls[] = {
    {.name = "gpu-pinned", .gpu = true, .transfer = true, .data = &xfer_impls[0]},
    {.name = "gpu-pageable", .gpu = true, .transfer = true, .data = &xfer_impls[1]},
    {.name = "gpu-pageable-driver", .gpu = true, .transfer = true, .data = &xfer_impls[2]},
};

/* the sweep's buffers: pattern (what must arrive), a pinned host buffer and
 * a device one, of the largest size; st: why they could not be made */
typedef struct xfer_buffers {
    unsigned char *pattern, *pinned;
    void          *dev;
    dg_status      st;
    char           why[256];
} xfer_buffers;

/* h2d then d2h at every size; data: the shared buffers */
static void xfer_points(bench_ctx *ctx, const void *arg, bench_points *out) {
    static const size_t full[] = {(size_t)1 << 20, (size_t)16 << 20, (size_t)256 << 20};
    static const size_t quick[] = {(size_t)1 << 20, (size_t)64 << 20};
    const size_t *sizes = ctx->quick ? quick : full;
    for (int s = 0; s < (ctx->quick ? 2 : 3); s++)
        for (int up = 1; up >= 0; up--)
            bench_points_add(out, (bench_point){.name = up ? "h2d" : "d2h", .m = (int64_t)(sizes[s] / 4), .n = 1,
                                                .k = 1, .batch = 1, .bytes = (double)sizes[s], .data = arg,
                                                .index = s});
}

/* one point: its size's pattern in the shared buffer, and the pageable
 * host buffer of the way under way */
typedef struct xfer_state { xfer_buffers *b; size_t bytes; bool upload; unsigned char *host; xfer_arg a; } xfer_state;

static dg_status xfer_setup(bench_ctx *ctx, const bench_point *pt, void **out) {
    (void)ctx;
    xfer_buffers *b = (xfer_buffers *)pt->data;
    if (b->st != DG_OK) return dg_fail(b->st, "%s", b->why);
    xfer_state *s = calloc(1, sizeof *s);
    if (!s) return dg_fail(DG_ERR_OOM, "host memory for a transfer");
    *s = (xfer_state){b, (size_t)pt->m * 4, !strcmp(pt->name, "h2d"), NULL, {0}};
    fill(b->pattern, s->bytes, (unsigned)pt->index * 7u + 3u);
    *out = s;
    return DG_OK;
}

static void xfer_teardown(void *arg) { free(arg); }

/* what must arrive: on the host to send, or on the device to fetch */
static dg_status xfer_prepare(bench_ctx *ctx, void *arg, const bench_impl *im, bench_row *row, bench_work *work) {
    (void)row;
    xfer_state *s = arg;
    const xfer_impl *way = im->data;
    size_t bytes = s->bytes;
    s->host = way->pinned ? s->b->pinned : malloc(bytes);
    if (!s->host) return dg_fail(DG_ERR_OOM, "host memory for a %zu-byte transfer", bytes);
    s->a = (xfer_arg){ctx->gpu, way, s->upload, s->host, s->b->dev, bytes};
    *work = (bench_work){.fn = xfer_run, .arg = &s->a, .be = ctx->gpu, .events = false};
    if (s->upload) {
        memcpy(s->host, s->b->pattern, bytes);
        return DG_OK;
    }
    memset(s->host, 0, bytes);
    return dg_backend_upload(ctx->gpu, s->b->dev, s->b->pattern, bytes);
}

/* byte for byte: an upload read back through pinned memory (not the path
 * under test), a download in the host buffer */
static bool xfer_check(void *arg, const bench_impl *im, bench_row *row) {
    (void)im;
    xfer_state *s = arg;
    bool same;
    if (s->upload) {
        if (s->a.im->pinned) memset(s->host, 0, s->bytes);
        dg_status st = dg_backend_download(s->a.be, s->b->pinned, s->b->dev, s->bytes);
        if (st != DG_OK) {
            row->status = bench_status_word(st);
            row->note = dg_last_error();
            return false;
        }
        same = memcmp(s->b->pinned, s->b->pattern, s->bytes) == 0;
    } else {
        same = memcmp(s->host, s->b->pattern, s->bytes) == 0;
    }
    row->max_rel_err = same ? 0.0 : 1.0;
    return same;
}

static void xfer_release(void *arg, const bench_impl *im, bench_work *work) {
    (void)work;
    xfer_state *s = arg;
    if (!((const xfer_impl *)im->data)->pinned) free(s->host);
    s->host = NULL;
}

void bench_transfer_ceilings(bench_ctx *ctx) {
    size_t most = ctx->quick ? (size_t)64 << 20 : (size_t)256 << 20;
    xfer_buffers b = {.pattern = malloc(most)};
    b.st = b.pattern ? DG_OK : dg_fail(DG_ERR_OOM, "host memory for a %zu-byte transfer", most);
    if (b.st == DG_OK) b.st = dg_backend_host_alloc(ctx->gpu, most, (void **)&b.pinned);
    if (b.st == DG_OK) b.st = dg_backend_alloc(ctx->gpu, most, &b.dev);
    if (b.st != DG_OK) snprintf(b.why, sizeof b.why, "%s", dg_last_error());
    const bench_sweep_spec spec = {
        .name = "ceiling", .check_word = "bitwise", .impls = runner_impls, .n_impls = N_XFER,
        .points = xfer_points, .arg = &b, .setup = xfer_setup, .teardown = xfer_teardown,
        .prepare = xfer_prepare, .check = xfer_check, .release = xfer_release,
    };
    bench_run_spec(ctx, &spec);
    dg_backend_release(ctx->gpu, b.dev);
    dg_backend_host_free(ctx->gpu, b.pinned);
    free(b.pattern);
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
 * PyTorch's copies where bench/peers/torch_ops.py --transfers ran in the
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
