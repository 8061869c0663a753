#include "csv.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

FILE *bench_csv_open(const char *dir, const char *sweep, const char *meta) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.csv", dir, sweep);
    FILE *f = fopen(path, "w");
    if (!f) {
        dg__fail(DG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        return NULL;
    }
    fprintf(f, "%s%s\n", meta, BENCH_CSV_HEADER);
    fflush(f);
    return f;
}

static void num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.6g", v);
    else fprintf(f, ",NaN");
}

void bench_csv_write(FILE *f, const bench_row *r) {
    bool ok = r->st.reps > 0 && isfinite(r->st.median_ms) && r->st.median_ms > 0;
    fprintf(f, "%s,%s,%s,%s,f32,%lld,%lld,%lld,%lld,%d,%d,%d,%d,%d", r->sweep, r->name, r->impl, r->backend,
            (long long)r->m, (long long)r->n, (long long)r->k, (long long)r->batch, r->threads, r->transfer,
            r->tf32, r->warmup, ok ? r->st.reps : 0);
    num(f, ok ? r->st.median_ms : NAN);
    num(f, ok ? r->st.min_ms : NAN);
    num(f, ok ? r->st.max_ms : NAN);
    num(f, ok ? r->st.cv_pct : NAN);
    num(f, ok && r->flops > 0 ? r->flops / (r->st.median_ms * 1e6) : NAN);
    num(f, ok && r->bytes > 0 ? r->bytes / (r->st.median_ms * 1e6) : NAN);
    num(f, r->max_rel_err);
    fprintf(f, ",%s\n", r->status);
    fflush(f);
}

static double field_num(const char *s) {
    if (strcmp(s, "NaN") == 0 || !*s) return NAN;
    return strtod(s, NULL);
}

/* The columns the reader knows, found by their header name: a folder written
 * before a column was added, or after one was added, still reads. */
enum {
    COL_SWEEP, COL_CASE, COL_IMPL, COL_BACKEND, COL_M, COL_N, COL_K, COL_BATCH, COL_TRANSFER, COL_MEDIAN,
    COL_MIN, COL_MAX, COL_STATUS, N_REQUIRED, /* the columns above are required; below, optional */
    COL_TF32 = N_REQUIRED, COL_THREADS, COL_REPS, COL_CV, COL_GFLOPS, COL_GBPS, COL_ERR, N_KNOWN
};
static const char *const col_names[N_KNOWN] = {
    "sweep", "case", "impl", "backend", "m", "n", "k", "batch", "transfer", "median_ms", "min_ms", "max_ms",
    "status", "tf32", "threads", "reps", "cv_pct", "gflops", "gbps", "max_rel_err",
};

#define MAX_FIELDS 64

/* splits line at commas in place; -1 when it has more than MAX_FIELDS */
static int split(char *line, char **fld) {
    int nf = 0;
    for (char *p = line, *tok; (tok = strsep(&p, ",")) != NULL;) {
        if (nf == MAX_FIELDS) return -1;
        fld[nf++] = tok;
    }
    return nf;
}

/* col[c]: the field index of known column c, -1 where the header lacks it */
static dg_status map_header(char *line, const char *path, int line_no, int *col, int *n_fields) {
    char *fld[MAX_FIELDS];
    int nf = split(line, fld);
    if (nf < 0) return dg__fail(DG_ERR_IO, "%s:%d: more than %d columns", path, line_no, MAX_FIELDS);
    for (int c = 0; c < N_KNOWN; c++) col[c] = -1;
    for (int i = 0; i < nf; i++)
        for (int c = 0; c < N_KNOWN; c++) /* an unknown name is someone else's column: ignored */
            if (!strcmp(fld[i], col_names[c])) {
                if (col[c] >= 0) return dg__fail(DG_ERR_IO, "%s:%d: column '%s' twice", path, line_no, fld[i]);
                col[c] = i;
            }
    for (int c = 0; c < N_REQUIRED; c++)
        if (col[c] < 0)
            return dg__fail(DG_ERR_IO, "%s:%d: not a duograd bench CSV: no column '%s' in the header", path,
                            line_no, col_names[c]);
    *n_fields = nf;
    return DG_OK;
}

/* field i of a row; 0 or NaN where the header lacks the (optional) column, i = -1 */
static long long int_or_0(char *const *fld, int i) { return i >= 0 ? atoll(fld[i]) : 0; }
static double num_or_nan(char *const *fld, int i) { return i >= 0 ? field_num(fld[i]) : NAN; }

csv_rec *bench_csv_read(const char *path, int *n) {
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        dg__fail(DG_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    int cap = 256, line_no = 0, col[N_KNOWN], n_fields = 0;
    csv_rec *recs = malloc((size_t)cap * sizeof *recs);
    dg_status st = recs ? DG_OK : dg__fail(DG_ERR_OOM, "out of memory reading %s", path);
    char line[4096], *fld[MAX_FIELDS];
    bool header = false;
    while (st == DG_OK && fgets(line, sizeof line, f)) {
        line_no++;
        if (!strchr(line, '\n') && !feof(f)) {
            st = dg__fail(DG_ERR_IO, "%s:%d: line longer than %zu characters", path, line_no, sizeof line - 2);
            break;
        }
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\r\n")] = '\0';
        if (!header) {
            st = map_header(line, path, line_no, col, &n_fields);
            header = true;
            continue;
        }
        int nf = split(line, fld);
        if (nf != n_fields) {
            st = dg__fail(DG_ERR_IO, "%s:%d: %d fields, the header has %d", path, line_no, nf, n_fields);
            break;
        }
        if (*n == cap) {
            csv_rec *more = realloc(recs, (size_t)(cap *= 2) * sizeof *recs);
            if (!more) { st = dg__fail(DG_ERR_OOM, "out of memory reading %s", path); break; }
            recs = more;
        }
        csv_rec *r = &recs[(*n)++];
        memset(r, 0, sizeof *r);
        snprintf(r->sweep, sizeof r->sweep, "%s", fld[col[COL_SWEEP]]);
        snprintf(r->name, sizeof r->name, "%s", fld[col[COL_CASE]]);
        snprintf(r->impl, sizeof r->impl, "%s", fld[col[COL_IMPL]]);
        snprintf(r->backend, sizeof r->backend, "%s", fld[col[COL_BACKEND]]);
        snprintf(r->status, sizeof r->status, "%s", fld[col[COL_STATUS]]);
        r->m = int_or_0(fld, col[COL_M]); r->n = int_or_0(fld, col[COL_N]); r->k = int_or_0(fld, col[COL_K]);
        r->batch = int_or_0(fld, col[COL_BATCH]);
        r->transfer = (int)int_or_0(fld, col[COL_TRANSFER]); r->tf32 = (int)int_or_0(fld, col[COL_TF32]);
        r->threads = (int)int_or_0(fld, col[COL_THREADS]); r->reps = (int)int_or_0(fld, col[COL_REPS]);
        r->median_ms = num_or_nan(fld, col[COL_MEDIAN]); r->min_ms = num_or_nan(fld, col[COL_MIN]);
        r->max_ms = num_or_nan(fld, col[COL_MAX]); r->cv_pct = num_or_nan(fld, col[COL_CV]);
        r->gflops = num_or_nan(fld, col[COL_GFLOPS]); r->gbps = num_or_nan(fld, col[COL_GBPS]);
        r->max_rel_err = num_or_nan(fld, col[COL_ERR]);
    }
    if (st == DG_OK && !header) st = dg__fail(DG_ERR_IO, "%s: no header line", path);
    fclose(f);
    if (st != DG_OK) {
        free(recs);
        *n = 0;
        return NULL;
    }
    return recs;
}
