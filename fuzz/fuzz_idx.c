/* fuzz_idx.c: dg_idx_read on any bytes. Beyond no crash, leak or undefined
 * behaviour: a failure leaves no data and a message naming the file; a
 * success holds the announced count; and bytes that are not gzip read the
 * same (status, message, dims, data) as their gzip-compressed copy, which
 * holds the inflate path to the plain one. */
#include <zlib.h>

#include "core/data/dataset.h"
#include "fuzz_util.h"

static char plain[600], packed[600];

/* data as one gzip member, in a malloc'd buffer of *len bytes */
static uint8_t *gzip_of(const uint8_t *data, size_t n, size_t *len) {
    z_stream z = {0};
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort(); /* 15 + 16: gzip */
    uLong cap = deflateBound(&z, n);
    uint8_t *out = malloc(cap);
    if (!out) abort();
    z.next_in = (uint8_t *)data;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
    *len = z.total_out;
    deflateEnd(&z);
    return out;
}

/* dg_idx_read and the checks every result must pass; the message without
 * its "path: " prefix into msg */
static dg_status read_checked(const char *path, dg_idx *idx, char *msg, size_t n) {
    dg_status st = dg_idx_read(path, idx);
    if (st != DG_OK) {
        if ((st != DG_ERR_IO && st != DG_ERR_OOM) || idx->data) abort();
        fuzz_check_message(dg_last_error(), path);
        snprintf(msg, n, "%s", strstr(dg_last_error(), path) + strlen(path));
        return st;
    }
    size_t count = 1;
    for (int i = 0; i < idx->ndim; i++) count *= idx->dims[i];
    if (idx->ndim < 1 || idx->ndim > 4 || count != idx->count || !idx->data) abort();
    *msg = '\0';
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!*plain) {
        snprintf(plain, sizeof plain, "%s/in.idx", fuzz_tmp_dir());
        snprintf(packed, sizeof packed, "%s/in.idx.gz", fuzz_tmp_dir());
    }
    fuzz_write(plain, data, size);
    dg_idx a, b;
    char ma[1024], mb[1024];
    dg_status sa = read_checked(plain, &a, ma, sizeof ma);
    if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) {
        size_t len;
        uint8_t *gz = gzip_of(data, size, &len);
        fuzz_write(packed, gz, len);
        free(gz);
        dg_status sb = read_checked(packed, &b, mb, sizeof mb);
        if (sa != sb || strcmp(ma, mb) != 0) {
            fprintf(stderr, "plain: %s '%s'\ngzip:  %s '%s'\n", dg_status_name(sa), ma, dg_status_name(sb), mb);
            abort();
        }
        if (sa == DG_OK && (a.ndim != b.ndim || memcmp(a.dims, b.dims, sizeof a.dims) != 0 ||
                            memcmp(a.data, b.data, a.count) != 0))
            abort();
        dg_idx_free(&b);
    }
    dg_idx_free(&a);
    return 0;
}
