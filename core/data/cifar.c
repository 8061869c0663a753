/* cifar.c: CIFAR-10's binary batches (data_batch_1..5.bin, test_batch.bin),
 * plain or gzip through the stream layer, into a dg_dataset of images
 * [n, 3, 32, 32] and labels [n]. */
#include "dataset.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../status_internal.h"
#include "stream.h"

#define CIFAR_PIXELS  (DG_CIFAR10_RECORD_BYTES - 1) /* 3 planes of 32x32 */
#define CIFAR_BATCHES 5                             /* data_batch_1..5.bin */
/* every count of a dg_dataset fits an int, n * 3072 floats included (as
 * the IDX reader keeps them) */
#define CIFAR_MAX_RECORDS (INT_MAX / CIFAR_PIXELS)
/* the arrays' first size for a file whose size does not tell its records
 * (gzip); they double from there */
#define CIFAR_FIRST_RECORDS 1024

#define CIFAR_WHERE_FROM                                                                              \
    "CIFAR-10 can be downloaded as its binary version (for C programs) from the CIFAR-10 page; pass " \
    "the folder it unpacks to (cifar-10-batches-bin) with --data DIR"

/* room for `want` records in d's arrays; *cap is what they hold now */
static dg_status reserve(dg_dataset *d, int *cap, int want, const char *path) {
    if (want <= *cap) return DG_OK;
    float *x = realloc(d->x, (size_t)want * CIFAR_PIXELS * sizeof *x);
    if (x) d->x = x;
    int32_t *y = x ? realloc(d->y, (size_t)want * sizeof *y) : NULL;
    if (!y) return dg__fail(DG_ERR_OOM, "%s: out of memory for %d CIFAR-10 images", path, want);
    d->y = y;
    *cap = want;
    return DG_OK;
}

/* A plain file's size tells its records before a byte is read, so a file
 * that is not a batch (the Python version's pickles, say) is refused at
 * once. A gzip file or a pipe says nothing: -1. */
static dg_status records_announced(const dg_stream *s, long long *records) {
    struct stat sb;
    *records = -1;
    if (s->gz || fstat(fileno(s->file), &sb) != 0 || !S_ISREG(sb.st_mode)) return DG_OK;
    if (sb.st_size % DG_CIFAR10_RECORD_BYTES != 0)
        return dg__fail(DG_ERR_IO, "%s: size %lld bytes is not a multiple of the %d-byte record (1 label byte, "
                        "%d pixel bytes): not a CIFAR-10 binary batch", s->path, (long long)sb.st_size,
                        DG_CIFAR10_RECORD_BYTES, CIFAR_PIXELS);
    *records = sb.st_size / DG_CIFAR10_RECORD_BYTES;
    return DG_OK;
}

static dg_status too_many(const char *path, long long records) {
    return dg__fail(DG_ERR_IO, "%s: %lld records take the data set past %d images (%d floats each)", path, records,
                    CIFAR_MAX_RECORDS, CIFAR_PIXELS);
}

/* appends s's records to d, whose arrays hold *cap */
static dg_status read_records(dg_stream *s, dg_dataset *d, int *cap) {
    long long announced;
    dg_status st = records_announced(s, &announced);
    if (st != DG_OK) return st;
    if (announced > CIFAR_MAX_RECORDS - d->n) return too_many(s->path, announced);
    if (announced > 0 && (st = reserve(d, cap, d->n + (int)announced, s->path)) != DG_OK) return st;
    uint8_t rec[DG_CIFAR10_RECORD_BYTES];
    int first = d->n;
    for (;;) {
        size_t got;
        if ((st = dg_stream_read(s, rec, sizeof rec, &got)) != DG_OK) return st;
        if (got == 0) break;
        if (got < sizeof rec)
            return dg__fail(DG_ERR_IO, "%s: truncated final record: record %d stops after %zu of %d bytes", s->path,
                            d->n - first, got, DG_CIFAR10_RECORD_BYTES);
        if (rec[0] > 9)
            return dg__fail(DG_ERR_IO, "%s: record %d has label %u (CIFAR-10 labels are 0 to 9)", s->path,
                            d->n - first, rec[0]);
        if (d->n == *cap) {
            if (d->n == CIFAR_MAX_RECORDS) return too_many(s->path, (long long)(d->n - first) + 1);
            int want = *cap < CIFAR_FIRST_RECORDS ? CIFAR_FIRST_RECORDS
                       : *cap > CIFAR_MAX_RECORDS / 2 ? CIFAR_MAX_RECORDS : 2 * *cap;
            if ((st = reserve(d, cap, want, s->path)) != DG_OK) return st;
        }
        float *x = d->x + (size_t)d->n * CIFAR_PIXELS; /* [3, 32, 32]: the bytes' own order */
        for (int i = 0; i < CIFAR_PIXELS; i++) x[i] = rec[1 + i] / 255.0f;
        d->y[d->n++] = rec[0];
    }
    if (d->n == first) return dg__fail(DG_ERR_IO, "%s: empty file (no %d-byte records)", s->path,
                                       DG_CIFAR10_RECORD_BYTES);
    return DG_OK;
}

static dg_status append_file(const char *path, dg_dataset *d, int *cap) {
    dg_stream s;
    dg_status st = dg_stream_open(&s, path);
    if (st != DG_OK) return st;
    st = read_records(&s, d, cap);
    dg_stream_close(&s);
    return st;
}

/* the shape fields of a loaded set: planes stacked, 96 rows of 32 */
static void set_shape(dg_dataset *d) {
    d->rows = DG_CIFAR10_CHANNELS * DG_CIFAR10_SIDE;
    d->cols = DG_CIFAR10_SIDE;
    d->classes = 10;
}

dg_status dg_cifar10_load_file(const char *path, dg_dataset *out) {
    memset(out, 0, sizeof *out);
    int cap = 0;
    dg_status st = append_file(path, out, &cap);
    if (st != DG_OK) dg_dataset_free(out);
    else set_shape(out);
    return st;
}

dg_status dg_cifar10_load(const char *dir, const char *split, dg_dataset *out) {
    memset(out, 0, sizeof *out);
    if (!dir) return dg__fail(DG_ERR_INVALID, "CIFAR-10: no folder given: " CIFAR_WHERE_FROM);
    bool train = split && !strcmp(split, "train");
    if (!train && !(split && !strcmp(split, "test")))
        return dg__fail(DG_ERR_INVALID, "CIFAR-10: unknown split %s (train or test)", split ? split : "NULL");
    int files = train ? CIFAR_BATCHES : 1;
    char paths[CIFAR_BATCHES][1024];
    for (int i = 0; i < files; i++) { /* a path cut short by the buffer would name another file */
        int len = train ? snprintf(paths[i], sizeof paths[i], "%s/data_batch_%d.bin", dir, i + 1)
                        : snprintf(paths[i], sizeof paths[i], "%s/test_batch.bin", dir);
        if (len < 0 || (size_t)len >= sizeof paths[i])
            return dg__fail(DG_ERR_INVALID, "CIFAR-10: %s batch path longer than %zu bytes in the folder %s", split,
                            sizeof paths[i] - 1, dir);
        struct stat sb;
        if (stat(paths[i], &sb) != 0 && errno == ENOENT)
            return dg__fail(DG_ERR_IO, "%s not found: " CIFAR_WHERE_FROM, paths[i]);
    }
    int cap = 0;
    dg_status st = DG_OK;
    for (int i = 0; i < files && st == DG_OK; i++) st = append_file(paths[i], out, &cap);
    if (st != DG_OK) dg_dataset_free(out);
    else set_shape(out);
    return st;
}
