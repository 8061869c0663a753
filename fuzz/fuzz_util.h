/* fuzz_util.h: the file system side of the harnesses. The readers under
 * test take paths, so each input goes to a file: one per process, in
 * TMPDIR (default /tmp), rewritten for every input and removed at exit. */
#ifndef DG_FUZZ_UTIL_H
#define DG_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <unistd.h>

/* a harness that cannot set up its files has nothing to test: it stops */
static inline void fuzz_die(const char *what, const char *path) {
    perror(path);
    fprintf(stderr, "fuzz harness: cannot %s %s\n", what, path);
    exit(2);
}

static char fuzz_dir[512];

/* removes fuzz_dir and the files the harness wrote in it */
static inline void fuzz_remove_dir(void) {
    DIR *d = opendir(fuzz_dir);
    if (!d) return;
    char path[1024];
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", fuzz_dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(fuzz_dir);
}

/* this process's folder, TMPDIR/dg-fuzz-XXXXXX, made on the first call */
static inline const char *fuzz_tmp_dir(void) {
    if (!*fuzz_dir) {
        const char *tmp = getenv("TMPDIR");
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/dg-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(fuzz_dir)) fuzz_die("create", fuzz_dir);
        atexit(fuzz_remove_dir);
    }
    return fuzz_dir;
}

static inline void fuzz_write(const char *path, const uint8_t *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) fuzz_die("write", path);
    if (n && fwrite(data, 1, n, f) != n) fuzz_die("write", path);
    if (fclose(f) != 0) fuzz_die("write", path);
}

/* a failure must leave a message that names the file it is about */
static inline void fuzz_check_message(const char *msg, const char *path) {
    if (!strstr(msg, path)) {
        fprintf(stderr, "error message does not name %s: '%s'\n", path, msg);
        abort();
    }
}

#endif
