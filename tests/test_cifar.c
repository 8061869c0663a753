/* test_cifar.c: the CIFAR-10 binary reader on small batches the tests
 * write (plain and gzip): every byte lands where the format puts it
 * (label, then the red, green and blue planes of 32x32 row-major), a
 * folder's five training batches load in order, and each kind of damaged
 * or missing file is refused with its own message naming the file. */
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/data/dataset.h"
#include "data_files.h"
#include "test_util.h"

#define RECORD DG_CIFAR10_RECORD_BYTES
#define PIXELS (RECORD - 1)
#define PLANE  (DG_CIFAR10_SIDE * DG_CIFAR10_SIDE)

static void make_dir(void) { make_dir_named("cifar"); }

static void path_of(char *path, size_t n, const char *name) { snprintf(path, n, "%s/%s", dir, name); }

/* the byte of example `id`, plane c (0 red, 1 green, 2 blue), row r, column
 * k: different planes, and a row and column swapped, give other values */
static uint8_t pixel(int id, int c, int r, int k) { return (uint8_t)(id * 37 + c * 101 + r * 5 + k * 3 + 1); }

/* `count` records for examples first, first + 1, ... with labels[i] */
static uint8_t *records(int first, int count, const uint8_t *labels) {
    uint8_t *buf = malloc((size_t)count * RECORD);
    cr_assert_not_null(buf);
    for (int i = 0; i < count; i++) {
        uint8_t *rec = buf + (size_t)i * RECORD;
        rec[0] = labels[i];
        for (int c = 0; c < DG_CIFAR10_CHANNELS; c++)
            for (int r = 0; r < DG_CIFAR10_SIDE; r++)
                for (int k = 0; k < DG_CIFAR10_SIDE; k++)
                    rec[1 + c * PLANE + r * DG_CIFAR10_SIDE + k] = pixel(first + i, c, r, k);
    }
    return buf;
}

static void put_records(const char *name, int first, int count, const uint8_t *labels, bool gz) {
    uint8_t *buf = records(first, count, labels);
    put(name, buf, (size_t)count * RECORD, gz);
    free(buf);
}

/* example i of d is example `id` of the files: [3, 32, 32], pixel / 255 */
static void expect_example(const dg_dataset *d, int i, int id) {
    const float *x = d->x + (size_t)i * PIXELS;
    for (int c = 0; c < DG_CIFAR10_CHANNELS; c++)
        for (int r = 0; r < DG_CIFAR10_SIDE; r++)
            for (int k = 0; k < DG_CIFAR10_SIDE; k++) {
                float want = pixel(id, c, r, k) / 255.0f, got = x[c * PLANE + r * DG_CIFAR10_SIDE + k];
                cr_assert(got == want, "example %d, plane %d, row %d, column %d: %.9g, want %.9g", i, c, r, k,
                          got, want);
            }
}

/* dir/name refused as DG_ERR_IO, nothing kept, the file and needle named */
static void expect_io(const char *name, const char *needle) {
    char path[512];
    path_of(path, sizeof path, name);
    dg_dataset d;
    cr_assert_eq(dg_cifar10_load_file(path, &d), DG_ERR_IO, "%s should fail", name);
    cr_assert(d.n == 0 && !d.x && !d.y, "%s: a failed load keeps data", name);
    cr_assert(strstr(dg_last_error(), needle), "message '%s' lacks '%s'", dg_last_error(), needle);
    cr_assert(strstr(dg_last_error(), path), "message '%s' does not name %s", dg_last_error(), path);
}

/* the split refused with `status`, nothing kept, every needle in the message */
static void expect_split_fails(const char *from, const char *split, dg_status status, const char *needle,
                               const char *needle2) {
    dg_dataset d;
    cr_assert_eq(dg_cifar10_load(from, split, &d), status, "%s: %s", split, dg_last_error());
    cr_assert(d.n == 0 && !d.x && !d.y, "%s: a failed load keeps data", split);
    cr_assert(strstr(dg_last_error(), needle), "message '%s' lacks '%s'", dg_last_error(), needle);
    cr_assert(!needle2 || strstr(dg_last_error(), needle2), "message '%s' lacks '%s'", dg_last_error(), needle2);
}

Test(cifar, bytes_land_where_the_format_says) {
    make_dir();
    const uint8_t labels[3] = {3, 0, 9};
    put_records("b.bin", 0, 3, labels, false);
    put_records("b.bin.gz", 0, 3, labels, true);
    for (int gz = 0; gz < 2; gz++) {
        char path[512];
        path_of(path, sizeof path, gz ? "b.bin.gz" : "b.bin");
        dg_dataset d;
        ASSERT_OK(dg_cifar10_load_file(path, &d));
        cr_assert(d.n == 3 && d.classes == 10, "%s: %d examples, %d classes", path, d.n, d.classes);
        cr_assert(d.rows * d.cols == PIXELS && d.cols == DG_CIFAR10_SIDE, "%s: %dx%d", path, d.rows, d.cols);
        cr_assert(d.y[0] == 3 && d.y[1] == 0 && d.y[2] == 9);
        for (int i = 0; i < 3; i++) expect_example(&d, i, i);
        /* one byte by its file offset: record 1's byte 1 + 1024 + 2 * 32 + 5 is
         * green, row 2, column 5, the float 3072 + 1024 + 2 * 32 + 5 */
        cr_assert(d.x[3072 + 1024 + 69] == pixel(1, 1, 2, 5) / 255.0f);
        cr_assert(d.x[3072 + 1024 + 69] != pixel(1, 1, 5, 2) / 255.0f); /* not column-major */
        dg_dataset_free(&d);
    }
}

Test(cifar, a_gzip_batch_larger_than_the_first_allocation_reads_whole) {
    /* a gzip file's size does not tell its records: the arrays grow as they come */
    make_dir();
    enum { N = 2500 };
    uint8_t labels[N];
    for (int i = 0; i < N; i++) labels[i] = (uint8_t)(i % 10);
    put_records("big.bin.gz", 0, N, labels, true);
    char path[512];
    path_of(path, sizeof path, "big.bin.gz");
    dg_dataset d;
    ASSERT_OK(dg_cifar10_load_file(path, &d));
    cr_assert_eq(d.n, N);
    for (int i = 0; i < N; i++) cr_assert_eq(d.y[i], i % 10, "label %d", i);
    for (int i = 0; i < N; i += 1249) expect_example(&d, i, i);
    dg_dataset_free(&d);
}

Test(cifar, five_training_batches_load_in_order) {
    make_dir();
    const int counts[5] = {2, 1, 3, 1, 2};
    uint8_t labels[9];
    int id = 0;
    for (int b = 0; b < 5; b++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", b + 1);
        for (int j = 0; j < counts[b]; j++) labels[id + j] = (uint8_t)((id + j) * 7 % 10);
        put_records(name, id, counts[b], labels + id, false);
        id += counts[b];
    }
    const uint8_t test_labels[3] = {1, 2, 3};
    put_records("test_batch.bin", 100, 3, test_labels, true);
    dg_dataset tr, te;
    ASSERT_OK(dg_cifar10_load(dir, "train", &tr));
    cr_assert(tr.n == 9 && tr.rows * tr.cols == PIXELS && tr.classes == 10, "%d examples of %dx%d", tr.n, tr.rows,
              tr.cols);
    for (int i = 0; i < 9; i++) {
        cr_assert_eq(tr.y[i], labels[i], "example %d: label %d, want %d", i, tr.y[i], labels[i]);
        expect_example(&tr, i, i);
    }
    ASSERT_OK(dg_cifar10_load(dir, "test", &te));
    cr_assert(te.n == 3 && te.y[0] == 1 && te.y[2] == 3 && te.rows == tr.rows && te.cols == tr.cols);
    for (int i = 0; i < 3; i++) expect_example(&te, i, 100 + i);
    dg_dataset_free(&tr);
    dg_dataset_free(&te);
}

Test(cifar, damaged_batches_are_refused_each_with_its_message) {
    make_dir();
    const uint8_t labels[3] = {1, 10, 2};
    uint8_t *buf = records(0, 3, labels);
    put("label.bin", buf, 3 * RECORD, false);
    expect_io("label.bin", "record 1 has label 10");
    buf[RECORD] = 255;
    put("label255.bin.gz", buf, 3 * RECORD, true);
    expect_io("label255.bin.gz", "record 1 has label 255");
    buf[RECORD] = 9; /* the highest label passes */
    put("size.bin", buf, 2 * RECORD + 5, false);
    expect_io("size.bin", "is not a multiple of the 3073-byte record");
    put("short.bin", buf, RECORD - 1, false); /* one byte off: 3072-byte records */
    expect_io("short.bin", "is not a multiple of the 3073-byte record");
    put("long.bin", buf, 2 * RECORD + 2, false); /* two 3074-byte records */
    expect_io("long.bin", "is not a multiple of the 3073-byte record");
    put("cut.bin.gz", buf, 2 * RECORD + 100, true); /* a gzip file's size says nothing */
    expect_io("cut.bin.gz", "truncated final record: record 2 stops after 100 of 3073 bytes");
    put("empty.bin", buf, 0, false);
    expect_io("empty.bin", "empty file");
    put("empty.bin.gz", buf, 0, true);
    expect_io("empty.bin.gz", "empty file");
    free(buf);
}

Test(cifar, an_unreadable_batch_is_a_read_error) {
    make_dir();
    char path[512];
    path_of(path, sizeof path, "folder.bin");
    cr_assert_eq(mkdir(path, 0700), 0); /* unreadable even by root, unlike chmod 000 */
    expect_io("folder.bin", "read error");
    const uint8_t labels[2] = {4, 5};
    put_records("crc.bin.gz", 0, 2, labels, true);
    path_of(path, sizeof path, "crc.bin.gz");
    FILE *f = fopen(path, "r+b"); /* the trailer: CRC-32, then the length mod 2^32 */
    cr_assert(f && fseek(f, -8, SEEK_END) == 0);
    int crc = fgetc(f);
    cr_assert(fseek(f, -8, SEEK_END) == 0 && fputc(crc ^ 0x5A, f) != EOF && fclose(f) == 0);
    expect_io("crc.bin.gz", "CRC check failed");
}

Test(cifar, a_bad_batch_fails_the_split_and_keeps_nothing) {
    /* batch 1 is read before batch 2 fails: its arrays must go */
    make_dir();
    const uint8_t labels[2] = {4, 5};
    put_records("data_batch_1.bin", 0, 2, labels, false);
    char path[512];
    path_of(path, sizeof path, "data_batch_2.bin");
    cr_assert_eq(mkdir(path, 0700), 0);
    for (int b = 3; b <= 5; b++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", b);
        put_records(name, 0, 2, labels, false);
    }
    expect_split_fails(dir, "train", DG_ERR_IO, "data_batch_2.bin: read error", NULL);
}

Test(cifar, a_missing_batch_names_the_file_and_where_to_get_the_data_set) {
    make_dir();
    const uint8_t labels[1] = {0};
    put_records("data_batch_1.bin", 0, 1, labels, false);
    put_records("data_batch_2.bin", 0, 1, labels, false);
    put_records("data_batch_4.bin", 0, 1, labels, false);
    put_records("data_batch_5.bin", 0, 1, labels, false);
    char path[512];
    path_of(path, sizeof path, "data_batch_3.bin");
    expect_split_fails(dir, "train", DG_ERR_IO, path, "not found");
    cr_assert(strstr(dg_last_error(), "binary version") && strstr(dg_last_error(), "--data DIR"), "%s",
              dg_last_error());
    path_of(path, sizeof path, "test_batch.bin");
    expect_split_fails(dir, "test", DG_ERR_IO, path, "binary version");
    expect_split_fails("/nonexistent/cifar", "test", DG_ERR_IO, "/nonexistent/cifar/test_batch.bin not found",
                       "--data DIR");
}

Test(cifar, bad_arguments_are_refused) {
    expect_split_fails(NULL, "train", DG_ERR_INVALID, "no folder given", "--data DIR");
    expect_split_fails("/tmp", "valid", DG_ERR_INVALID, "unknown split valid", NULL);
    expect_split_fails("/tmp", NULL, DG_ERR_INVALID, "unknown split", NULL);
    char longdir[1100];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[0] = '/';
    longdir[sizeof longdir - 1] = '\0';
    expect_split_fails(longdir, "train", DG_ERR_INVALID, "longer than 1023 bytes", NULL);
}

Test(cifar, more_records_than_an_int_counts_are_refused_before_any_read) {
    /* images are n * 3072 floats, counted in ints: a sparse file of one
     * record more than that is refused by its size, nothing allocated */
    make_dir();
    char path[512];
    path_of(path, sizeof path, "huge.bin");
    FILE *f = fopen(path, "wb");
    long long records = INT_MAX / PIXELS + 1;
    cr_assert(f && ftruncate(fileno(f), (off_t)(records * RECORD)) == 0 && fclose(f) == 0);
    expect_io("huge.bin", "699051 records take the data set past 699050 images");
}
