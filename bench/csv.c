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

csv_rec *bench_csv_read(const char *path, int *n) {
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        dg__fail(DG_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    int cap = 256, line_no = 0;
    csv_rec *recs = malloc((size_t)cap * sizeof *recs);
    char line[1024];
    bool header = false;
    while (recs && fgets(line, sizeof line, f)) {
        line_no++;
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\r\n")] = '\0';
        if (!header) {
            if (strcmp(line, BENCH_CSV_HEADER) != 0) {
                dg__fail(DG_ERR_IO, "%s:%d: not a duograd bench CSV (unexpected header)", path, line_no);
                free(recs);
                recs = NULL;
                break;
            }
            header = true;
            continue;
        }
        char *fld[24];
        int nf = 0;
        for (char *p = line, *tok; nf < 24 && (tok = strsep(&p, ",")) != NULL;) fld[nf++] = tok;
        if (nf != 22) {
            dg__fail(DG_ERR_IO, "%s:%d: %d fields, expected 22", path, line_no, nf);
            free(recs);
            recs = NULL;
            break;
        }
        if (*n == cap) {
            csv_rec *more = realloc(recs, (size_t)(cap *= 2) * sizeof *recs);
            if (!more) { free(recs); recs = NULL; break; }
            recs = more;
        }
        csv_rec *r = &recs[(*n)++];
        memset(r, 0, sizeof *r);
        snprintf(r->sweep, sizeof r->sweep, "%s", fld[0]);
        snprintf(r->name, sizeof r->name, "%s", fld[1]);
        snprintf(r->impl, sizeof r->impl, "%s", fld[2]);
        snprintf(r->backend, sizeof r->backend, "%s", fld[3]);
        r->m = atoll(fld[5]); r->n = atoll(fld[6]); r->k = atoll(fld[7]); r->batch = atoll(fld[8]);
        r->threads = atoi(fld[9]); r->transfer = atoi(fld[10]); r->tf32 = atoi(fld[11]); r->reps = atoi(fld[13]);
        r->median_ms = field_num(fld[14]); r->min_ms = field_num(fld[15]); r->max_ms = field_num(fld[16]);
        r->cv_pct = field_num(fld[17]); r->gflops = field_num(fld[18]); r->gbps = field_num(fld[19]);
        r->max_rel_err = field_num(fld[20]);
        snprintf(r->status, sizeof r->status, "%s", fld[21]);
    }
    if (!recs && *n == 0 && !dg_last_error()[0]) dg__fail(DG_ERR_OOM, "out of memory reading %s", path);
    if (recs && !header) {
        dg__fail(DG_ERR_IO, "%s: no header line", path);
        free(recs);
        recs = NULL;
    }
    fclose(f);
    return recs;
}
