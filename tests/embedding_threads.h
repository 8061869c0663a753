/* embedding_threads.h: the check behind test_embedding_threads.c, also
 * run without Criterion by tsan_embedding.c (scripts/test.sh builds that
 * with ThreadSanitizer). The CPU embedding backward over several threads,
 * with ids on every boundary of its tasks: it splits the table's rows into
 * ranges [v0, v1) (cpu_embedding.c), one task each, and a task zeroes,
 * then sums into, its own rows only. A task that also took id v1 (the next
 * task's first row) would add into a row another thread zeroes and sums,
 * a data race whose result depends on timing (right when the other task
 * zeroes it later, twice the sum or a lost update otherwise).
 *
 * Every row of the table is named by an id, so every boundary of any split
 * is, and those ids come after a long run of filler ids at the end of the
 * positions: each task meets its boundary ids last, when the task of the
 * next range has long zeroed its rows. The sum is compared bit for bit
 * with the rows of dy added in position order in float. */
#ifndef DG_TEST_EMBEDDING_THREADS_H
#define DG_TEST_EMBEDDING_THREADS_H

#include <stdio.h>
#include <stdlib.h>

#include "core/autodiff.h"
#include "core/plan.h"
#include "core/rng.h"
#include "cpu_backend/cpu_backend.h"

/* thread counts and widths that split the rows differently: one column
 * block (64 columns or fewer: 4 tasks a thread, all over the rows) and
 * three (fewer, longer ranges of rows) */
static const int     emb_threads[] = {2, 3, 4, 8};
static const int64_t emb_widths[] = {5, 64, 150};
#define EMB_ROWS   61
#define EMB_FILLER 20000

/* table [v, d]; loss = sum(embedding(table, ids) * w), so the table's
 * gradient is embedding_backward(w, ids): row r the sum of w's rows at
 * the positions whose id is r, in position order. NULL when it is so on
 * four runs, else what differed or failed (in msg). */
static const char *emb_backward_check(int threads, int64_t v, int64_t d, int64_t filler, uint64_t seed, char *msg,
                                      size_t size) {
    int64_t n = filler + 2 * v; /* the filler, then every row twice */
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    float *w = malloc(sizeof(float) * (size_t)(n * d)), *got = malloc(sizeof(float) * (size_t)(v * d));
    float *want = calloc((size_t)(v * d), sizeof(float));
    const char *bad = NULL;
    dg_graph *g = dg_graph_new();
    dg_backend *be = NULL;
    dg_plan *pl = NULL;
    if (!ids || !w || !got || !want || !g) {
        snprintf(msg, size, "out of memory");
        bad = msg;
        goto done;
    }
    dg_rng r = dg_rng_new(seed);
    for (int64_t p = 0; p < filler; p++) ids[p] = (int32_t)(v / 2);
    for (int64_t p = filler; p < n; p++) ids[p] = (int32_t)((p - filler) % v);
    for (int64_t i = 0; i < n * d; i++) w[i] = (float)(2 * dg_rng_uniform(&r) - 1);
    for (int64_t p = 0; p < n; p++)
        for (int64_t j = 0; j < d; j++) want[ids[p] * d + j] += w[p * d + j];

    dg_node *table = dg_param(g, "table", DG_SHAPE(v, d), (dg_init){DG_INIT_UNIFORM, -1, 1, 5});
    dg_node *idn = dg_input_i32(g, "ids", DG_SHAPE(n));
    dg_node *wn = dg_input(g, "w", DG_SHAPE(n, d)), *dtable = NULL;
    dg_node *loss = dg_sum(g, dg_mul(g, dg_embedding(g, table, idn), wn), DG_ALL_AXES, false);
    dg_status st = dg_grad(g, loss, &table, 1, &dtable);
    if (st == DG_OK && dtable->op != DG_OP_EMBEDDING_BACKWARD) st = DG_ERR_INVALID;
    if (st == DG_OK) st = dg_cpu_backend_new(&be, threads);
    if (st == DG_OK) st = dg_plan_new(&pl, g, be, &dtable, 1, NULL);
    if (st == DG_OK) st = dg_plan_set(pl, idn, ids, sizeof(int32_t) * (size_t)n);
    if (st == DG_OK) st = dg_plan_set(pl, wn, w, sizeof(float) * (size_t)(n * d));
    for (int run = 0; run < 4 && st == DG_OK && !bad; run++) {
        st = dg_plan_run(pl);
        if (st == DG_OK) st = dg_plan_get(pl, dtable, got, sizeof(float) * (size_t)(v * d));
        for (int64_t i = 0; i < v * d && st == DG_OK && !bad; i++)
            if (got[i] != want[i]) {
                snprintf(msg, size, "%d threads, table [%lld, %lld], run %d: dtable[%lld][%lld] = %.9g, want %.9g",
                         threads, (long long)v, (long long)d, run, (long long)(i / d), (long long)(i % d),
                         (double)got[i], (double)want[i]);
                bad = msg;
            }
    }
    if (st != DG_OK) {
        snprintf(msg, size, "%d threads, table [%lld, %lld]: %s: %s", threads, (long long)v, (long long)d,
                 dg_status_name(st), dg_last_error());
        bad = msg;
    }
done:
    dg_plan_free(pl);
    dg_backend_free(be);
    dg_graph_free(g);
    free(ids);
    free(w);
    free(got);
    free(want);
    return bad;
}

#endif
