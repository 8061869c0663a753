/* test_idx_hostile.c: the IDX reader on damaged gzip files. Each failure
 * must say what is wrong with the file (and name it): a bad CRC is not a
 * "truncated header", data after the gzip stream is not silently dropped. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/data/dataset.h"
#include "test_util.h"

static char dir[256];

static void remove_dir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) cr_log_warn("could not remove %s", dir);
}

/* a fresh folder for this test's files, removed when the test process ends */
static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/dg-idxh-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    atexit(remove_dir);
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

static void put(const char *name, const void *bytes, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
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

Test(idx_hostile, data_after_the_gzip_stream_is_an_error) {
    make_dir();
    uint8_t buf[256 + 64];
    size_t n = gz_of(raw, sizeof raw, buf);
    memcpy(buf + n, "garbage", 7);
    put("tail.idx.gz", buf, n + 7);
    expect_io("tail.idx.gz", "after the end of the gzip stream");
    memset(buf + n, 0, 64); /* zero padding, as a copy to a block device leaves it */
    put("zeros.idx.gz", buf, n + 64);
    expect_io("zeros.idx.gz", "after the end of the gzip stream");
}

Test(idx_hostile, a_bad_crc_is_reported_as_a_failed_integrity_check) {
    make_dir();
    uint8_t gz[256];
    size_t n = gz_of(raw, sizeof raw, gz);
    gz[n - 8] ^= 0x5A; /* the trailer: CRC-32, then the length mod 2^32 */
    put("crc.idx.gz", gz, n);
    expect_io("crc.idx.gz", "CRC check failed");
    gz[n - 8] ^= 0x5A;
    gz[n - 4] ^= 0x01;
    put("len.idx.gz", gz, n);
    expect_io("len.idx.gz", "length check failed");
}

Test(idx_hostile, a_cut_or_corrupt_stream_is_not_a_truncated_header) {
    make_dir();
    uint8_t gz[256];
    size_t n = gz_of(raw, sizeof raw, gz);
    put("cut.idx.gz", gz, n - 9); /* the trailer and one byte of compressed data missing */
    expect_io("cut.idx.gz", "gzip stream ends early");
    put("hdr.idx.gz", gz, 12);
    expect_io("hdr.idx.gz", "gzip stream ends early");
    gz[10] = 0xFF; /* the first deflate block header: type 3 is reserved */
    put("bad.idx.gz", gz, n);
    expect_io("bad.idx.gz", "corrupt gzip stream");
}

Test(idx_hostile, a_folder_is_a_read_error) {
    make_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/sub.idx", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    expect_io("sub.idx", "read error");
}

Test(idx_hostile, concatenated_gzip_members_read_as_one_file) {
    /* RFC 1952 allows members back to back (gzip -d and zcat read them):
     * the header in one member, the body in the next */
    make_dir();
    uint8_t buf[512];
    size_t n = gz_of(raw, 16, buf);
    n += gz_of(raw + 16, 12, buf + n);
    put("two.idx.gz", buf, n);
    char path[512];
    snprintf(path, sizeof path, "%s/two.idx.gz", dir);
    dg_idx idx;
    ASSERT_OK(dg_idx_read(path, &idx));
    cr_assert(idx.ndim == 3 && idx.count == 12 && !memcmp(idx.data, raw + 16, 12));
    dg_idx_free(&idx);
}

Test(idx_hostile, sizes_beyond_an_int_are_refused_before_any_read) {
    /* dg_dataset keeps counts in ints: 2^31 one-byte items must not pass */
    make_dir();
    uint8_t head[16] = {0, 0, 0x08, 3, 0x80, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1};
    put("int.idx", head, sizeof head);
    expect_io("int.idx", "overflow");
}

Test(idx_hostile, a_data_set_path_too_long_is_refused_not_cut) {
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
