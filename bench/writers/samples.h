/* samples.h: every timed repetition of a sweep, one line each, in
 * DIR/NAME.samples.csv beside NAME.csv (bench --samples): the raw times
 * behind each row's median, for a histogram or a test of one's own. Same
 * metadata lines and the same write-then-rename as NAME.csv. */
#ifndef DG_BENCH_SAMPLES_H
#define DG_BENCH_SAMPLES_H

#include <stdbool.h>
#include <stdio.h>

#include "writers/csv.h"

#define BENCH_SAMPLES_HEADER "sweep,case,impl,backend,dtype,m,n,k,batch,transfer,tf32,cold,rep,ms"

/* DIR/NAME.samples.csv.partial with meta and the header; NULL with a
 * message. Close it with bench_samples_finish. */
FILE     *bench_samples_open(const char *dir, const char *name, const char *meta);
/* one line per repetition of r (rep 0, 1, ... in the order run); nothing
 * for a row without samples (not measured, or timed without keeping them) */
void      bench_samples_write(FILE *f, const bench_row *r);
/* bench_csv_finish of DIR/NAME.samples.csv */
dg_status bench_samples_finish(FILE *f, const char *dir, const char *name, bool keep);
/* kept as DIR/AS.samples.csv (bench_csv_finish_as) */
dg_status bench_samples_finish_as(FILE *f, const char *dir, const char *name, const char *as);

#endif
