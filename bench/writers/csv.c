#include "writers/csv.h"

#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

FILE *bench_csv_open(const char *dir, const char *name, const char *meta, const char *header) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.csv.partial", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        dg_fail(DG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        return NULL;
    }
    fprintf(f, "%s%s\n", meta, header);
    if (fflush(f)) {
        dg_fail(DG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        fclose(f);
        return NULL;
    }
    return f;
}

dg_status bench_csv_finish_as(FILE *f, const char *dir, const char *name, const char *as) {
    char partial[1024], final[1024];
    snprintf(partial, sizeof partial, "%s/%s.csv.partial", dir, name);
    snprintf(final, sizeof final, "%s/%s.csv", dir, as ? as : name);
    bool written = !ferror(f);
    if (fclose(f) || !written) /* a full disk: the rows may be incomplete; the earlier file stays */
        return dg_fail(DG_ERR_IO, "cannot write %s (its rows are kept there; %s is unchanged)", partial, final);
    if (!as) {
        remove(partial);
        return DG_OK;
    }
    if (rename(partial, final))
        return dg_fail(DG_ERR_IO, "cannot rename %s to %s: %s", partial, final, strerror(errno));
    return DG_OK;
}

dg_status bench_csv_finish(FILE *f, const char *dir, const char *name, bool keep) {
    return bench_csv_finish_as(f, dir, name, keep ? name : NULL);
}

static void num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.6g", v);
    else fprintf(f, ",NaN");
}

/* free text as one CSV field: commas become ';', control characters ' ' */
static void text(FILE *f, const char *s) {
    fputc(',', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        fputc(c == ',' ? ';' : c < 0x20 || c == 0x7f ? ' ' : c, f);
    }
}

bool bench_row_timed(const bench_row *r) {
    bool timed = !strcmp(r->status, "ok") || !strcmp(r->status, "noisy") || !strcmp(r->status, "interrupted");
    return timed && r->st.reps > 0 && isfinite(r->st.median_ms) && r->st.median_ms > 0;
}

void bench_csv_write(FILE *f, const bench_row *r) {
    bool ok = bench_row_timed(r);
    fprintf(f, "%s,%s,%s,%s,%s,%lld,%lld,%lld,%lld,%d,%d,%d,%d,%d,%d", r->sweep, r->name, r->impl, r->backend,
            dg_precision_name(r->precision), (long long)r->m, (long long)r->n, (long long)r->k, (long long)r->batch,
            r->threads, r->transfer, r->precision == DG_PREC_TF32, r->cold, r->warmup, ok ? r->st.reps : 0);
    num(f, ok ? r->st.median_ms : NAN);
    num(f, ok ? r->st.min_ms : NAN);
    num(f, ok ? r->st.max_ms : NAN);
    num(f, ok ? r->st.cv_pct : NAN);
    num(f, ok && r->flops > 0 ? r->flops / (r->st.median_ms * 1e6) : NAN);
    num(f, ok && r->bytes > 0 ? r->bytes / (r->st.median_ms * 1e6) : NAN);
    fprintf(f, ",%lld,%lld,%lld", (long long)r->scratch_bytes, (long long)r->arena_bytes, (long long)r->live_bytes);
    bool energy = ok && r->energy_j > 0;
    num(f, energy ? r->energy_j : NAN);
    num(f, energy ? r->energy_w : NAN);
    num(f, energy && r->flops > 0 ? r->flops / 1e9 / r->energy_j : NAN);
    num(f, energy && r->batch > 0 ? (double)r->batch / r->energy_j : NAN);
    num(f, r->max_rel_err);
    text(f, r->check ? r->check : "none");
    text(f, r->status);
    text(f, r->note);
    fputc('\n', f);
    fflush(f);
}

/* The columns the reader knows, found by their header name: a folder written
 * before a column was added, or after one was added, still reads. */
enum {
    COL_SWEEP, COL_CASE, COL_IMPL, COL_BACKEND, COL_M, COL_N, COL_K, COL_BATCH, COL_TRANSFER, COL_MEDIAN,
    COL_MIN, COL_MAX, COL_STATUS, N_REQUIRED, /* the columns above are required; below, optional */
    COL_TF32 = N_REQUIRED, COL_THREADS, COL_REPS, COL_CV, COL_GFLOPS, COL_GBPS, COL_ERR, COL_COLD, COL_CHECK,
    COL_NOTE, COL_SCRATCH, COL_ARENA, COL_LIVE, COL_DTYPE, COL_ENERGY, COL_WATTS, N_KNOWN
};
static const char *const col_names[N_KNOWN] = {
    "sweep", "case", "impl", "backend", "m", "n", "k", "batch", "transfer", "median_ms", "min_ms", "max_ms",
    "status", "tf32", "threads", "reps", "cv_pct", "gflops", "gbps", "max_rel_err", "cold", "check", "note",
    "scratch_bytes", "arena_bytes", "live_bytes", "dtype", "energy_j", "avg_w",
};

#define MAX_FIELDS 64
#define MAX_LINE   4096 /* a row is about 150 characters */

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
    if (nf < 0) return dg_fail(DG_ERR_IO, "%s:%d: more than %d columns", path, line_no, MAX_FIELDS);
    for (int c = 0; c < N_KNOWN; c++) col[c] = -1;
    for (int i = 0; i < nf; i++)
        for (int c = 0; c < N_KNOWN; c++) /* an unknown name is someone else's column: ignored */
            if (!strcmp(fld[i], col_names[c])) {
                if (col[c] >= 0) return dg_fail(DG_ERR_IO, "%s:%d: column '%s' twice", path, line_no, fld[i]);
                col[c] = i;
            }
    for (int c = 0; c < N_REQUIRED; c++)
        if (col[c] < 0)
            return dg_fail(DG_ERR_IO, "%s:%d: not a duograd bench CSV: no column '%s' in the header", path,
                            line_no, col_names[c]);
    *n_fields = nf;
    return DG_OK;
}

/* Where one row is being read: fields, the header's column map, and the
 * file and line a message names. */
typedef struct row_src {
    char *const *fld;
    const int   *col;
    const char  *path;
    int          line_no;
} row_src;

/* integer column c in [lo, hi]; 0 where the header lacks the (optional) column */
static dg_status int_col(const row_src *s, int c, long long lo, long long hi, long long *out) {
    *out = 0;
    if (s->col[c] < 0) return DG_OK;
    const char *v = s->fld[s->col[c]];
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return dg_fail(DG_ERR_IO, "%s:%d: column '%s': '%.32s' is not an integer in [%lld, %lld]", s->path,
                        s->line_no, col_names[c], v, lo, hi);
    *out = x;
    return DG_OK;
}

/* number column c; NaN where it says NaN, is empty, or the header lacks it */
static dg_status num_col(const row_src *s, int c, double *out) {
    *out = NAN;
    if (s->col[c] < 0) return DG_OK;
    const char *v = s->fld[s->col[c]];
    if (!*v || !strcmp(v, "NaN")) return DG_OK;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end)
        return dg_fail(DG_ERR_IO, "%s:%d: column '%s': '%.32s' is not a number", s->path, s->line_no,
                        col_names[c], v);
    *out = x;
    return DG_OK;
}

/* The dtype column: a precision name; "f32" (the files written before the
 * precision axis) or no column at all is fp32, or tf32 where the tf32
 * column says 1; then bench_rec_legacy_tf32. */
static dg_status precision_col(const row_src *s, csv_rec *r) {
    const char *v = s->col[COL_DTYPE] >= 0 ? s->fld[s->col[COL_DTYPE]] : "f32";
    if (!strcmp(v, "f32")) r->precision = r->tf32 ? DG_PREC_TF32 : DG_PREC_FP32;
    else if (dg_precision_parse(v, &r->precision) != DG_OK)
        return dg_fail(DG_ERR_IO, "%s:%d: column 'dtype': '%.32s' is not a precision (fp32, tf32, bf16, fp16; f32)",
                       s->path, s->line_no, v);
    bench_rec_legacy_tf32(r);
    return DG_OK;
}

void bench_rec_legacy_tf32(csv_rec *r) {
    r->tf32 = r->precision == DG_PREC_TF32;
    size_t n = strlen(r->impl);
    if (r->tf32 && n > 5 && !strcmp(r->impl + n - 5, "-tf32")) r->impl[n - 5] = '\0';
}

static dg_status parse_row(const row_src *s, csv_rec *r) {
    memset(r, 0, sizeof *r);
    snprintf(r->sweep, sizeof r->sweep, "%s", s->fld[s->col[COL_SWEEP]]);
    snprintf(r->name, sizeof r->name, "%s", s->fld[s->col[COL_CASE]]);
    snprintf(r->impl, sizeof r->impl, "%s", s->fld[s->col[COL_IMPL]]);
    snprintf(r->backend, sizeof r->backend, "%s", s->fld[s->col[COL_BACKEND]]);
    snprintf(r->status, sizeof r->status, "%s", s->fld[s->col[COL_STATUS]]);
    if (s->col[COL_CHECK] >= 0) snprintf(r->check, sizeof r->check, "%s", s->fld[s->col[COL_CHECK]]);
    if (s->col[COL_NOTE] >= 0) snprintf(r->note, sizeof r->note, "%s", s->fld[s->col[COL_NOTE]]);
    long long transfer, tf32, threads, reps, cold;
    dg_status st;
    if ((st = int_col(s, COL_M, 0, INT64_MAX, &r->m)) || (st = int_col(s, COL_N, 0, INT64_MAX, &r->n)) ||
        (st = int_col(s, COL_K, 0, INT64_MAX, &r->k)) || (st = int_col(s, COL_BATCH, 0, INT64_MAX, &r->batch)) ||
        (st = int_col(s, COL_TRANSFER, 0, 1, &transfer)) || (st = int_col(s, COL_TF32, 0, 1, &tf32)) ||
        (st = int_col(s, COL_THREADS, 0, INT32_MAX, &threads)) || (st = int_col(s, COL_REPS, 0, INT32_MAX, &reps)) ||
        (st = num_col(s, COL_MEDIAN, &r->median_ms)) || (st = num_col(s, COL_MIN, &r->min_ms)) ||
        (st = num_col(s, COL_MAX, &r->max_ms)) || (st = num_col(s, COL_CV, &r->cv_pct)) ||
        (st = num_col(s, COL_GFLOPS, &r->gflops)) || (st = num_col(s, COL_GBPS, &r->gbps)) ||
        (st = num_col(s, COL_ERR, &r->max_rel_err)) || (st = int_col(s, COL_COLD, 0, 1, &cold)) ||
        (st = num_col(s, COL_ENERGY, &r->energy_j)) || (st = num_col(s, COL_WATTS, &r->avg_w)) ||
        (st = int_col(s, COL_SCRATCH, 0, INT64_MAX, &r->scratch_bytes)) ||
        (st = int_col(s, COL_ARENA, 0, INT64_MAX, &r->arena_bytes)) ||
        (st = int_col(s, COL_LIVE, 0, INT64_MAX, &r->live_bytes)))
        return st;
    r->cold = (int)cold;
    r->transfer = (int)transfer;
    r->tf32 = (int)tf32;
    r->threads = (int)threads;
    r->reps = (int)reps;
    return precision_col(s, r);
}

csv_rec *bench_csv_read(const char *path, int *n) {
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        dg_fail(DG_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    int cap = 256, line_no = 0, col[N_KNOWN], n_fields = 0;
    csv_rec *recs = malloc((size_t)cap * sizeof *recs);
    dg_status st = recs ? DG_OK : dg_fail(DG_ERR_OOM, "out of memory reading %s", path);
    char *line = NULL, *fld[MAX_FIELDS];
    size_t line_cap = 0;
    bool header = false;
    for (ssize_t len; st == DG_OK && (len = getline(&line, &line_cap, f)) != -1;) {
        line_no++;
        if (memchr(line, '\0', (size_t)len)) {
            st = dg_fail(DG_ERR_IO, "%s:%d: a NUL byte: not a text file", path, line_no);
            break;
        }
        if (line[len - 1] != '\n') {
            /* rows are written whole, newline last: a last line without one
             * is a row cut short by a crash or a full disk */
            fprintf(stderr, "bench: warning: %s:%d: incomplete last line skipped (an interrupted run?)\n", path,
                    line_no);
            break;
        }
        if (len > MAX_LINE) {
            st = dg_fail(DG_ERR_IO, "%s:%d: line longer than %d characters", path, line_no, MAX_LINE);
            break;
        }
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        if (!header) {
            st = map_header(line, path, line_no, col, &n_fields);
            header = true;
            continue;
        }
        int nf = split(line, fld);
        if (nf < 0) {
            st = dg_fail(DG_ERR_IO, "%s:%d: more than %d fields", path, line_no, MAX_FIELDS);
            break;
        }
        if (nf != n_fields) {
            st = dg_fail(DG_ERR_IO, "%s:%d: %d fields, the header has %d", path, line_no, nf, n_fields);
            break;
        }
        if (*n == cap) {
            csv_rec *more = realloc(recs, (size_t)(cap *= 2) * sizeof *recs);
            if (!more) { st = dg_fail(DG_ERR_OOM, "out of memory reading %s", path); break; }
            recs = more;
        }
        row_src src = {fld, col, path, line_no};
        if ((st = parse_row(&src, &recs[*n])) != DG_OK) break;
        (*n)++;
    }
    /* metadata only: the run was killed before its header was written */
    if (st == DG_OK && !header) fprintf(stderr, "bench: warning: %s: no header line, no rows\n", path);
    free(line);
    fclose(f);
    if (st != DG_OK) {
        free(recs);
        *n = 0;
        return NULL;
    }
    return recs;
}

bool bench_csv_meta(const char *path, const char *key, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    char line[1024];
    size_t klen = strlen(key);
    bool found = false;
    buf[0] = '\0';
    while (f && !found && fgets(line, sizeof line, f) && line[0] == '#') {
        if (strncmp(line, "# ", 2) || strncmp(line + 2, key, klen) || strncmp(line + 2 + klen, ": ", 2)) continue;
        line[strcspn(line, "\r\n")] = '\0';
        snprintf(buf, n, "%s", line + 4 + klen);
        found = true;
    }
    if (f) fclose(f);
    return found;
}
