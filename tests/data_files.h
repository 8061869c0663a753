/* data_files.h: a test's folder of small data files (the IDX and CIFAR-10
 * suites), written plain or gzip-compressed. One folder per test process,
 * removed when it ends. */
#ifndef DG_TEST_DATA_FILES_H
#define DG_TEST_DATA_FILES_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

static char dir[256];

static void remove_data_dir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) cr_log_warn("could not remove %s", dir);
}

/* a fresh folder /tmp/dg-<prefix>-XXXXXX in dir */
static void make_dir_named(const char *prefix) {
    snprintf(dir, sizeof dir, "/tmp/dg-%s-XXXXXX", prefix);
    cr_assert_not_null(mkdtemp(dir));
    atexit(remove_data_dir);
}

/* writes bytes to dir/name, gzip-compressed when gz; every write and close
 * checked, so a full disk fails the test instead of leaving a short file */
static void put(const char *name, const void *bytes, size_t n, bool gz) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(gzwrite(f, bytes, (unsigned)n), (int)n);
        cr_assert_eq(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(bytes, 1, n, f), n);
        cr_assert_eq(fclose(f), 0);
    }
}

#endif
