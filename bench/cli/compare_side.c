/* compare_side.c: see compare_side.h. */
#include "cli/compare_side.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/status.h"

static bool exists(const char *path) { return access(path, F_OK) == 0; }

bool bench_same_case(const bench_json_rec *x, const bench_json_rec *y) {
    const csv_rec *a = &x->rec, *b = &y->rec;
    return !strcmp(a->sweep, b->sweep) && !strcmp(a->name, b->name) && !strcmp(a->impl, b->impl) &&
           !strcmp(a->backend, b->backend) && a->m == b->m && a->n == b->n && a->k == b->k &&
           a->batch == b->batch && a->transfer == b->transfer && a->precision == b->precision && x->cold == y->cold;
}

/* appends the rows of c[0..n) that no row read from NAME.json measured
 * (all of them without one); each JSON row claims one CSV row, so a row
 * the CSV holds twice (a peer run twice) is kept once more */
static dg_status add_csv_rows(bench_side *s, const csv_rec *c, int n, const char *path) {
    int from_json = s->n;
    bench_json_rec *recs = realloc(s->recs, (size_t)(from_json + n ? from_json + n : 1) * sizeof *recs);
    bool *claimed = calloc(from_json ? (size_t)from_json : 1, sizeof *claimed);
    if (recs) s->recs = recs;
    if (!recs || !claimed) {
        free(claimed);
        return dg_fail(DG_ERR_OOM, "out of memory reading %s", path);
    }
    for (int i = 0; i < n; i++) {
        bench_json_rec r = {.rec = c[i], .cold = c[i].cold};
        int j = 0;
        while (j < from_json && (claimed[j] || !bench_same_case(&r, &s->recs[j]))) j++;
        if (j < from_json) claimed[j] = true;
        else s->recs[s->n++] = r;
    }
    s->csv_only = s->n - from_json;
    free(claimed);
    return DG_OK;
}

bool bench_result_file(const char *dir, const char *name, char *path, size_t n) {
    snprintf(path, n, "%s/%s.csv", dir, name);
    if (exists(path)) return true;
    snprintf(path, n, "%s/%s.json", dir, name);
    return exists(path);
}

int bench_compare_load(const char *dir, const char *name, bench_side *s) {
    char json[1200], csv[1200];
    *s = (bench_side){0};
    snprintf(json, sizeof json, "%s/%s.json", dir, name);
    snprintf(csv, sizeof csv, "%s/%s.csv", dir, name);
    bool has_json = exists(json), has_csv = exists(csv);
    if (!has_json && !has_csv) return 0;
    dg_status st = DG_OK;
    if (has_json && !(s->recs = bench_json_read(json, &s->n))) st = DG_ERR_IO;
    s->json = has_json;
    if (st == DG_OK && has_csv) {
        int n = 0;
        csv_rec *c = bench_csv_read(csv, &n);
        st = c ? add_csv_rows(s, c, n, csv) : DG_ERR_IO;
        free(c);
    }
    if (st != DG_OK) {
        fprintf(stderr, "bench compare: %s\n", dg_last_error());
        bench_json_recs_free(s->recs, s->n);
        *s = (bench_side){0};
        return -1;
    }
    return 1;
}
