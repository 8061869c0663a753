/* samples.c: see samples.h. */
#include "writers/samples.h"

#include <string.h>

static void samples_name(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s.samples", name); }

FILE *bench_samples_open(const char *dir, const char *name, const char *meta) {
    char file[256];
    samples_name(file, sizeof file, name);
    return bench_csv_open(dir, file, meta, BENCH_SAMPLES_HEADER);
}

void bench_samples_write(FILE *f, const bench_row *r) {
    if (!bench_row_timed(r) || !r->st.samples) return; /* the rule of bench_csv_write */
    for (int i = 0; i < r->st.reps; i++)
        fprintf(f, "%s,%s,%s,%s,%s,%lld,%lld,%lld,%lld,%d,%d,%d,%d,%.9g\n", r->sweep, r->name, r->impl, r->backend,
                dg_precision_name(r->precision), (long long)r->m, (long long)r->n, (long long)r->k,
                (long long)r->batch, r->transfer, r->precision == DG_PREC_TF32, r->cold, i, r->st.samples[i]);
    fflush(f);
}

dg_status bench_samples_finish(FILE *f, const char *dir, const char *name, bool keep) {
    return bench_samples_finish_as(f, dir, name, keep ? name : NULL);
}

dg_status bench_samples_finish_as(FILE *f, const char *dir, const char *name, const char *as) {
    char file[256], file_as[256];
    samples_name(file, sizeof file, name);
    samples_name(file_as, sizeof file_as, as ? as : name);
    return bench_csv_finish_as(f, dir, file, as ? file_as : NULL);
}
