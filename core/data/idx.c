#include "dataset.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../status_internal.h"
#include "stream.h"

/* far above any data set this reads, and low enough that every dimension
 * and their product fit an int (dg_dataset's fields) */
#define IDX_MAX_BYTES ((size_t)INT_MAX)
/* the body buffer's first size: it grows as bytes arrive */
#define IDX_FIRST_CHUNK ((size_t)1 << 20)

/* The header's size is a claim until the bytes arrive: the buffer doubles
 * as they do, so a 20-byte file that announces 2 GiB costs no 2 GiB. */
static dg_status read_body(dg_stream *s, dg_idx *out) {
    size_t cap = 0, have = 0, got = 0;
    do {
        if (have == cap) {
            cap = cap ? cap * 2 : IDX_FIRST_CHUNK; /* no overflow: cap <= count <= INT_MAX */
            if (cap > out->count) cap = out->count;
            uint8_t *more = realloc(out->data, cap);
            if (!more) return dg__fail(DG_ERR_OOM, "%s: out of memory for %zu bytes", s->path, cap);
            out->data = more;
        }
        dg_status st = dg_stream_read(s, out->data + have, cap - have, &got);
        if (st != DG_OK) return st;
        have += got;
    } while (have < out->count && got > 0);
    if (have != out->count)
        return dg__fail(DG_ERR_IO, "%s: truncated body: %zu of %zu bytes the header announces", s->path, have,
                        out->count);
    return DG_OK;
}

static dg_status read_idx(dg_stream *s, dg_idx *out) {
    const char *path = s->path;
    uint8_t head[4];
    size_t got;
    dg_status st = dg_stream_read(s, head, 4, &got);
    if (st != DG_OK) return st;
    if (got == 0) return dg__fail(DG_ERR_IO, "%s: empty file", path);
    if (got != 4) return dg__fail(DG_ERR_IO, "%s: truncated header (%zu of 4 bytes)", path, got);
    if (head[0] != 0 || head[1] != 0)
        return dg__fail(DG_ERR_IO, "%s: wrong magic %02x %02x (an IDX file starts with 00 00)", path, head[0],
                        head[1]);
    if (head[2] != 0x08)
        return dg__fail(DG_ERR_IO, "%s: unsupported element type 0x%02x (only 0x08, unsigned byte)", path,
                        head[2]);
    out->ndim = head[3];
    if (out->ndim < 1 || out->ndim > 4)
        return dg__fail(DG_ERR_IO, "%s: %d dimensions (1 to 4 supported)", path, out->ndim);
    uint8_t dims[16];
    size_t want = 4u * (size_t)out->ndim;
    if ((st = dg_stream_read(s, dims, want, &got)) != DG_OK) return st;
    if (got != want) return dg__fail(DG_ERR_IO, "%s: truncated header (dimension sizes)", path);
    out->count = 1;
    for (int i = 0; i < out->ndim; i++) {
        const uint8_t *d = dims + 4 * i; /* big-endian */
        out->dims[i] = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
        if (out->dims[i] != 0 && out->count > IDX_MAX_BYTES / out->dims[i])
            return dg__fail(DG_ERR_IO, "%s: dimension sizes overflow (product above %zu bytes)", path,
                            IDX_MAX_BYTES);
        out->count *= out->dims[i];
    }
    if (out->count == 0) return dg__fail(DG_ERR_IO, "%s: a dimension is zero", path);
    if ((st = read_body(s, out)) != DG_OK) return st;
    /* reading on checks the end: the gzip CRC and length, nothing after */
    uint8_t extra;
    if ((st = dg_stream_read(s, &extra, 1, &got)) != DG_OK) return st;
    if (got) return dg__fail(DG_ERR_IO, "%s: trailing bytes after the %zu the header announces", path, out->count);
    return DG_OK;
}

dg_status dg_idx_read(const char *path, dg_idx *out) {
    memset(out, 0, sizeof *out);
    dg_stream s;
    dg_status st = dg_stream_open(&s, path);
    if (st != DG_OK) return st;
    st = read_idx(&s, out);
    dg_stream_close(&s);
    if (st != DG_OK) dg_idx_free(out);
    return st;
}

void dg_idx_free(dg_idx *idx) {
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}

/* dir/split-kind-idxN-ubyte, preferring the .gz the Debian package
 * installs; a path cut short by the buffer would name another file */
static dg_status data_path(char *buf, size_t n, const char *dir, const char *split, const char *kind) {
    struct stat sb;
    int len = snprintf(buf, n, "%s/%s-%s-ubyte.gz", dir, split, kind);
    if (len < 0 || (size_t)len >= n)
        return dg__fail(DG_ERR_INVALID, "data set path longer than %zu bytes: %s/%s-%s-ubyte.gz", n - 1, dir,
                        split, kind);
    if (stat(buf, &sb) != 0) buf[len - 3] = '\0';
    return DG_OK;
}

dg_status dg_dataset_load(const char *dir, const char *split, dg_dataset *out) {
    memset(out, 0, sizeof *out);
    if (!dir) dir = DG_FASHION_MNIST_DIR;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return dg__fail(DG_ERR_IO, "data set folder %s not found: install Debian's dataset-fashion-mnist package "
                                   "(apt-get install dataset-fashion-mnist) or pass --data DIR", dir);
    char ip[1024], lp[1024];
    dg_status st = data_path(ip, sizeof ip, dir, split, "images-idx3");
    if (st == DG_OK) st = data_path(lp, sizeof lp, dir, split, "labels-idx1");
    if (st != DG_OK) return st;
    dg_idx img, lab;
    if ((st = dg_idx_read(ip, &img)) != DG_OK) return st;
    if ((st = dg_idx_read(lp, &lab)) != DG_OK) {
        dg_idx_free(&img);
        return st;
    }
    if (img.ndim != 3) st = dg__fail(DG_ERR_IO, "%s: images must have 3 dimensions, not %d", ip, img.ndim);
    else if (lab.ndim != 1) st = dg__fail(DG_ERR_IO, "%s: labels must have 1 dimension, not %d", lp, lab.ndim);
    else if (img.dims[0] != lab.dims[0])
        st = dg__fail(DG_ERR_IO, "%s has %u images but %s has %u labels", ip, img.dims[0], lp, lab.dims[0]);
    for (size_t i = 0; st == DG_OK && i < lab.count; i++)
        if (lab.data[i] >= 10)
            st = dg__fail(DG_ERR_IO, "%s: label %u of item %zu is out of range (0 to 9)", lp, lab.data[i], i);
    if (st == DG_OK) {
        out->n = (int)img.dims[0];
        out->rows = (int)img.dims[1];
        out->cols = (int)img.dims[2];
        out->classes = 10;
        out->x = malloc(img.count * sizeof *out->x);
        out->y = malloc(lab.count * sizeof *out->y);
        if (!out->x || !out->y) st = dg__fail(DG_ERR_OOM, "out of memory for the %s split", split);
    }
    for (size_t i = 0; st == DG_OK && i < img.count; i++) out->x[i] = img.data[i] / 255.0f;
    for (size_t i = 0; st == DG_OK && i < lab.count; i++) out->y[i] = lab.data[i];
    dg_idx_free(&img);
    dg_idx_free(&lab);
    if (st != DG_OK) dg_dataset_free(out);
    return st;
}

void dg_dataset_free(dg_dataset *d) {
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}
