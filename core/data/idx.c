#include "dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define IDX_MAX_BYTES ((size_t)1 << 31) /* far above any data set this reads */

/* reads exactly n bytes; returns how many were read (gzread handles both
 * gzip and plain files) */
static size_t read_full(gzFile f, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        unsigned chunk = n - got > (1u << 30) ? 1u << 30 : (unsigned)(n - got);
        int r = gzread(f, (char *)buf + got, chunk);
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

dg_status dg_idx_read(const char *path, dg_idx *out) {
    memset(out, 0, sizeof *out);
    gzFile f = gzopen(path, "rb");
    if (!f) return dg__fail(DG_ERR_IO, "%s: cannot open: %s", path, errno ? strerror(errno) : "zlib error");
    dg_status st = DG_OK;
    uint8_t head[4];
    if (read_full(f, head, 4) != 4) {
        st = dg__fail(DG_ERR_IO, "%s: truncated header (fewer than 4 bytes)", path);
        goto done;
    }
    if (head[0] != 0 || head[1] != 0) {
        st = dg__fail(DG_ERR_IO, "%s: wrong magic %02x %02x (an IDX file starts with 00 00)", path, head[0], head[1]);
        goto done;
    }
    if (head[2] != 0x08) {
        st = dg__fail(DG_ERR_IO, "%s: unsupported element type 0x%02x (only 0x08, unsigned byte)", path, head[2]);
        goto done;
    }
    out->ndim = head[3];
    if (out->ndim < 1 || out->ndim > 4) {
        st = dg__fail(DG_ERR_IO, "%s: %d dimensions (1 to 4 supported)", path, out->ndim);
        goto done;
    }
    uint8_t dims[16];
    if (read_full(f, dims, 4u * (unsigned)out->ndim) != 4u * (unsigned)out->ndim) {
        st = dg__fail(DG_ERR_IO, "%s: truncated header (dimension sizes)", path);
        goto done;
    }
    out->count = 1;
    for (int i = 0; i < out->ndim; i++) {
        const uint8_t *d = dims + 4 * i; /* big-endian */
        out->dims[i] = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
        if (out->dims[i] != 0 && out->count > IDX_MAX_BYTES / out->dims[i]) {
            st = dg__fail(DG_ERR_IO, "%s: dimension sizes overflow (product above %zu bytes)", path, IDX_MAX_BYTES);
            goto done;
        }
        out->count *= out->dims[i];
    }
    if (out->count == 0) {
        st = dg__fail(DG_ERR_IO, "%s: a dimension is zero", path);
        goto done;
    }
    out->data = malloc(out->count);
    if (!out->data) {
        st = dg__fail(DG_ERR_OOM, "%s: out of memory for %zu bytes", path, out->count);
        goto done;
    }
    size_t got = read_full(f, out->data, out->count);
    if (got != out->count) {
        st = dg__fail(DG_ERR_IO, "%s: truncated body: %zu of %zu bytes the header announces", path, got, out->count);
        goto done;
    }
    uint8_t extra;
    if (gzread(f, &extra, 1) > 0) {
        st = dg__fail(DG_ERR_IO, "%s: trailing bytes after the %zu the header announces", path, out->count);
        goto done;
    }
    int zerr;
    const char *zmsg = gzerror(f, &zerr);
    if (zerr != Z_OK && zerr != Z_STREAM_END) st = dg__fail(DG_ERR_IO, "%s: corrupt gzip stream: %s", path, zmsg);
done:
    gzclose(f);
    if (st != DG_OK) dg_idx_free(out);
    return st;
}

void dg_idx_free(dg_idx *idx) {
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}

/* dir/name, preferring the .gz the Debian package installs */
static void data_path(char *buf, size_t n, const char *dir, const char *name) {
    struct stat sb;
    snprintf(buf, n, "%s/%s.gz", dir, name);
    if (stat(buf, &sb) != 0) snprintf(buf, n, "%s/%s", dir, name);
}

dg_status dg_dataset_load(const char *dir, const char *split, dg_dataset *out) {
    memset(out, 0, sizeof *out);
    if (!dir) dir = DG_FASHION_MNIST_DIR;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return dg__fail(DG_ERR_IO, "data set folder %s not found: install Debian's dataset-fashion-mnist package "
                                   "(apt-get install dataset-fashion-mnist) or pass --data DIR", dir);
    char ip[1024], lp[1024], name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
    data_path(ip, sizeof ip, dir, name);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
    data_path(lp, sizeof lp, dir, name);
    dg_idx img, lab;
    dg_status st = dg_idx_read(ip, &img);
    if (st != DG_OK) return st;
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
