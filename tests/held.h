/* held.h: what a test allocates, released by its suite's .fini whatever
 * the test's outcome. A failed assertion ends a test at once: rows read,
 * a backend or an open CSV it had not freed yet would leak, and the
 * sanitizer build's LeakSanitizer would fail the suite on top of the real
 * failure (and a temporary folder would stay). A suite declares
 * TestSuite(NAME, .fini = held_release); a test hands over what it must
 * free (held_ptr, held_backend, held_file, held_dir) and may free a thing
 * early with held_free. */
#ifndef DG_TEST_HELD_H
#define DG_TEST_HELD_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/backend_impl.h"
#include "shell_util.h"

#define HELD_MAX 16

typedef enum held_kind { HELD_PTR, HELD_BACKEND, HELD_FILE, HELD_DIR } held_kind;

static struct {
    held_kind           kind[HELD_MAX];
    void               *p[HELD_MAX];
    const dg_backend_i *iface[HELD_MAX]; /* a backend's own, restored before its free */
    char                dir[HELD_MAX][64];
    int                 n;
} held;

static inline void *held_add(held_kind kind, void *p, const dg_backend_i *iface, const char *dir) {
    cr_assert_lt(held.n, HELD_MAX, "held.h: more than %d things held", HELD_MAX);
    held.kind[held.n] = kind;
    held.p[held.n] = p;
    held.iface[held.n] = iface;
    snprintf(held.dir[held.n], sizeof held.dir[0], "%s", dir ? dir : "");
    held.n++;
    return p;
}

/* malloc'd memory (rows read, file text): p itself, for chaining */
static inline void *held_ptr(void *p) { return p ? held_add(HELD_PTR, p, NULL, NULL) : NULL; }
/* a backend whose iface the test may replace: iface is restored first */
static inline void held_backend(dg_backend *be, const dg_backend_i *iface) { held_add(HELD_BACKEND, be, iface, NULL); }
/* an open file (bench_csv_open's): closed */
static inline void held_file(FILE *f) { held_add(HELD_FILE, f, NULL, NULL); }
/* a temporary folder (tmp_dir's, at most 63 characters): removed */
static inline void held_dir(const char *dir) { held_add(HELD_DIR, (void *)dir, NULL, dir); }

static inline void held_release_at(int i) {
    switch (held.kind[i]) {
    case HELD_PTR: free(held.p[i]); break;
    case HELD_BACKEND: {
        dg_backend *be = held.p[i];
        be->iface = held.iface[i];
        dg_backend_free(be);
        break;
    }
    case HELD_FILE: fclose(held.p[i]); break;
    case HELD_DIR: remove_dir(held.dir[i]); break;
    }
    held.p[i] = NULL;
}

/* releases p now (or forgets it, when forget: the test freed or closed it
 * itself, as bench_csv_finish closes its file) */
static inline void held_drop(const void *p, bool forget) {
    for (int i = held.n - 1; i >= 0; i--)
        if (held.p[i] == p) {
            if (!forget) held_release_at(i);
            held.p[i] = NULL;
            return;
        }
}
static inline void held_free(void *p) { held_drop(p, false); }

/* the suite's .fini: everything still held, the last first */
static inline void held_release(void) {
    for (int i = held.n - 1; i >= 0; i--)
        if (held.p[i]) held_release_at(i);
    held.n = 0;
}

#endif
