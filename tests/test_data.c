/* test_data.c: the IDX reader on small files the tests write (plain and
 * gzip), one per malformation, on damaged gzip streams (each failure says
 * what is wrong and names the file: a bad CRC is not a "truncated header",
 * data after the stream is not silently dropped), and on the installed
 * Fashion-MNIST. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/data/dataset.h"
#include "data_files.h"
#include "test_util.h"

static void make_dir(void) { make_dir_named("idx"); }

/* IDX header for ubyte data with the given dims, then `body` bytes 0,1,2... */
static size_t idx_bytes(uint8_t *buf, int ndim, const uint32_t *dims, size_t body, uint8_t type) {
    size_t n = 0;
    buf[n++] = 0; buf[n++] = 0; buf[n++] = type; buf[n++] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[n++] = (uint8_t)(dims[i] >> 24); buf[n++] = (uint8_t)(dims[i] >> 16);
        buf[n++] = (uint8_t)(dims[i] >> 8); buf[n++] = (uint8_t)dims[i];
    }
    for (size_t i = 0; i < body; i++) buf[n++] = (uint8_t)(i % 7);
    return n;
}

static void expect_io(const char *name, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    dg_idx idx;
    cr_assert_eq(dg_idx_read(path, &idx), DG_ERR_IO, "%s should fail", name);
    cr_assert_null(idx.data);
    cr_assert(strstr(dg_last_error(), needle), "message '%s' lacks '%s'", dg_last_error(), needle);
    cr_assert(strstr(dg_last_error(), name), "message '%s' does not name the file", dg_last_error());
}

/* a valid 3 x 2 x 2 IDX file: header, then the body 0, 20, 40, ... */
static const uint8_t raw[16 + 12] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2,
                                     0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 220};

/* bytes[0..n) as one gzip member, written to out (256 bytes); its length */
static size_t gz_of(const uint8_t *bytes, size_t n, uint8_t *out) {
    z_stream z = {0};
    cr_assert_eq(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK); /* 15 + 16: gzip */
    z.next_in = (uint8_t *)bytes;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = 256;
    cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t len = z.total_out;
    deflateEnd(&z);
    return len;
}

Test(data, valid_plain_and_gzip) {
    make_dir();
    uint8_t buf[128];
    uint32_t dims[3] = {3, 2, 2};
    size_t n = idx_bytes(buf, 3, dims, 12, 0x08);
    put("a.idx", buf, n, false);
    put("a.idx.gz", buf, n, true);
    for (int gz = 0; gz < 2; gz++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, gz ? "a.idx.gz" : "a.idx");
        dg_idx idx;
        ASSERT_OK(dg_idx_read(path, &idx));
        cr_assert_eq(idx.ndim, 3);
        cr_assert_eq(idx.count, 12);
        cr_assert(idx.dims[0] == 3 && idx.dims[1] == 2 && idx.dims[2] == 2);
        cr_assert(idx.data[0] == 0 && idx.data[8] == 1 && idx.data[11] == 4);
        dg_idx_free(&idx);
    }
}

Test(data, malformed_files) {
    make_dir();
    uint8_t buf[128];
    uint32_t d3[3] = {3, 2, 2}, big[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 16};
    size_t n;
    put("short.idx", buf, (size_t)(idx_bytes(buf, 3, d3, 0, 0x08) - 14), false); /* 2 bytes */
    expect_io("short.idx", "truncated header");
    n = idx_bytes(buf, 3, d3, 12, 0x08);
    buf[1] = 0x08;
    put("magic.idx", buf, n, false);
    expect_io("magic.idx", "wrong magic");
    n = idx_bytes(buf, 3, d3, 12, 0x0D);
    put("type.idx", buf, n, true);
    expect_io("type.idx", "unsupported element type");
    n = idx_bytes(buf, 3, big, 0, 0x08);
    put("overflow.idx", buf, n, false);
    expect_io("overflow.idx", "overflow");
    n = idx_bytes(buf, 3, d3, 11, 0x08);
    put("body.idx.gz", buf, n, true);
    expect_io("body.idx.gz", "truncated body");
    n = idx_bytes(buf, 3, d3, 13, 0x08);
    put("trailing.idx", buf, n, false);
    expect_io("trailing.idx", "trailing bytes");
    n = idx_bytes(buf, 3, d3, 0, 0x08);
    put("dims.idx", buf, n - 4, false); /* header cut inside the dimension sizes */
    expect_io("dims.idx", "truncated header");
}

Test(data, split_checks) {
    make_dir();
    uint8_t buf[128];
    uint32_t d3[3] = {3, 2, 2}, d1[1] = {4}, d1ok[1] = {3};
    size_t n = idx_bytes(buf, 3, d3, 12, 0x08);
    put("train-images-idx3-ubyte.gz", buf, n, true);
    n = idx_bytes(buf, 1, d1, 4, 0x08);
    put("train-labels-idx1-ubyte.gz", buf, n, true);
    dg_dataset ds;
    cr_assert_eq(dg_dataset_load(dir, "train", &ds), DG_ERR_IO);
    cr_assert(strstr(dg_last_error(), "3 images but"), "%s", dg_last_error());
    n = idx_bytes(buf, 1, d1ok, 3, 0x08);
    buf[n - 1] = 10; /* a label out of range */
    put("train-labels-idx1-ubyte.gz", buf, n, true);
    cr_assert_eq(dg_dataset_load(dir, "train", &ds), DG_ERR_IO);
    cr_assert(strstr(dg_last_error(), "out of range"), "%s", dg_last_error());
    buf[n - 1] = 9;
    put("train-labels-idx1-ubyte.gz", buf, n, true);
    ASSERT_OK(dg_dataset_load(dir, "train", &ds));
    cr_assert(ds.n == 3 && ds.rows == 2 && ds.cols == 2 && ds.y[2] == 9);
    cr_assert_float_eq(ds.x[8], 1.0f / 255.0f, 1e-7f);
    dg_dataset_free(&ds);
}

Test(data, missing_data_set_names_the_package) {
    dg_dataset ds;
    cr_assert_eq(dg_dataset_load("/nonexistent/fashion", "train", &ds), DG_ERR_IO);
    cr_assert(strstr(dg_last_error(), "dataset-fashion-mnist"), "%s", dg_last_error());
}

Test(data, installed_fashion_mnist) {
    if (access(DG_FASHION_MNIST_DIR, R_OK) != 0) cr_skip_test("%s not installed", DG_FASHION_MNIST_DIR);
    dg_dataset tr, te;
    ASSERT_OK(dg_dataset_load(NULL, "train", &tr));
    ASSERT_OK(dg_dataset_load(NULL, "t10k", &te));
    cr_assert(tr.n == 60000 && te.n == 10000 && tr.rows == 28 && tr.cols == 28);
    int count[10] = {0};
    for (int i = 0; i < te.n; i++) count[te.y[i]]++;
    for (int k = 0; k < 10; k++) cr_assert_eq(count[k], 1000, "class %d: %d test images", k, count[k]);
    dg_dataset_free(&tr);
    dg_dataset_free(&te);
}

/* ---- damaged gzip streams and hostile sizes ---- */

Test(data, data_after_the_gzip_stream_is_an_error) {
    make_dir();
    uint8_t buf[256 + 64];
    size_t n = gz_of(raw, sizeof raw, buf);
    memcpy(buf + n, "garbage", 7);
    put("tail.idx.gz", buf, n + 7, false);
    expect_io("tail.idx.gz", "after the end of the gzip stream");
    memset(buf + n, 0, 64); /* zero padding, as a copy to a block device leaves it */
    put("zeros.idx.gz", buf, n + 64, false);
    expect_io("zeros.idx.gz", "after the end of the gzip stream");
}

Test(data, a_bad_crc_is_reported_as_a_failed_integrity_check) {
    make_dir();
    uint8_t gz[256];
    size_t n = gz_of(raw, sizeof raw, gz);
    gz[n - 8] ^= 0x5A; /* the trailer: CRC-32, then the length mod 2^32 */
    put("crc.idx.gz", gz, n, false);
    expect_io("crc.idx.gz", "CRC check failed");
    gz[n - 8] ^= 0x5A;
    gz[n - 4] ^= 0x01;
    put("len.idx.gz", gz, n, false);
    expect_io("len.idx.gz", "length check failed");
}

Test(data, a_cut_or_corrupt_stream_is_not_a_truncated_header) {
    make_dir();
    uint8_t gz[256];
    size_t n = gz_of(raw, sizeof raw, gz);
    put("cut.idx.gz", gz, n - 9, false); /* the trailer and one byte of compressed data missing */
    expect_io("cut.idx.gz", "gzip stream ends early");
    put("hdr.idx.gz", gz, 12, false);
    expect_io("hdr.idx.gz", "gzip stream ends early");
    gz[10] = 0xFF; /* the first deflate block header: type 3 is reserved */
    put("bad.idx.gz", gz, n, false);
    expect_io("bad.idx.gz", "corrupt gzip stream");
}

Test(data, a_folder_is_a_read_error) {
    make_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/sub.idx", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    expect_io("sub.idx", "read error");
}

Test(data, concatenated_gzip_members_read_as_one_file) {
    /* RFC 1952 allows members back to back (gzip -d and zcat read them):
     * the header in one member, the body in the next */
    make_dir();
    uint8_t buf[512];
    size_t n = gz_of(raw, 16, buf);
    n += gz_of(raw + 16, 12, buf + n);
    put("two.idx.gz", buf, n, false);
    char path[512];
    snprintf(path, sizeof path, "%s/two.idx.gz", dir);
    dg_idx idx;
    ASSERT_OK(dg_idx_read(path, &idx));
    cr_assert(idx.ndim == 3 && idx.count == 12 && !memcmp(idx.data, raw + 16, 12));
    dg_idx_free(&idx);
}

Test(data, sizes_beyond_an_int_are_refused_before_any_read) {
    /* dg_dataset keeps counts in ints: 2^31 one-byte items must not pass */
    make_dir();
    uint8_t head[16] = {0, 0, 0x08, 3, 0x80, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1};
    put("int.idx", head, sizeof head, false);
    expect_io("int.idx", "overflow");
}

Test(data, a_data_set_path_too_long_is_refused_not_cut) {
    make_dir();
    char path[1400], name[201];
    memset(name, 'd', 200);
    name[200] = '\0';
    snprintf(path, sizeof path, "%s", dir);
    for (int i = 0; i < 5; i++) { /* 5 x 201 characters: past the reader's 1023 */
        size_t len = strlen(path);
        snprintf(path + len, sizeof path - len, "/%s", name);
        cr_assert_eq(mkdir(path, 0700), 0);
    }
    dg_dataset ds;
    cr_assert_eq(dg_dataset_load(path, "train", &ds), DG_ERR_INVALID, "%s", dg_last_error());
    cr_assert(strstr(dg_last_error(), "longer than"), "%s", dg_last_error());
}
