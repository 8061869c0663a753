/* shell_util.h: files, folders and shell commands for the suites that run
 * the bench CLI (test_bench, test_csv). Each helper fails the test on an
 * I/O error instead of returning one. */
#ifndef DG_TEST_SHELL_UTIL_H
#define DG_TEST_SHELL_UTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* runs `cmd` with stderr merged into stdout; its exit code; the output into
 * out (n bytes at most, NUL-terminated) when out is not NULL */
static inline int sh(const char *cmd, char *out, size_t n) {
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    cr_assert_not_null(p);
    size_t got = 0, r;
    char buf[4096];
    while ((r = fread(buf, 1, sizeof buf, p)) > 0)
        if (out && got + 1 < n) {
            size_t k = r < n - 1 - got ? r : n - 1 - got;
            memcpy(out + got, buf, k);
            got += k;
        }
    if (out) out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* the whole file, NUL-terminated; the caller frees it */
static inline char *read_file(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static inline void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* dir: a mkdtemp template ("/tmp/dg-x-XXXXXX"), replaced by the folder made */
static inline void tmp_dir(char *dir) { cr_assert_not_null(mkdtemp(dir), "mkdtemp %s", dir); }

static inline void remove_dir(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

#endif
