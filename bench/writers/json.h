/* json.h: a sweep's results in Google Benchmark's JSON layout, beside its
 * CSV (DIR/NAME.json), so that Google Benchmark's tools (compare.py) read
 * duograd runs, and `bench compare` gets every repetition for its U test.
 *
 * {"context": {...}, "benchmarks": [...]}: per row of the sweep, one
 * benchmark named by every column that defines what was timed,
 *   "gemm/square/cpu-openblas/cpu/dtype:fp32/m:512/n:512/k:512/batch:1/transfer:0/tf32:0/cold:0",
 * with one "iteration" entry per repetition followed by the
 * aggregates NAME_mean, NAME_median, NAME_stddev (sample, n - 1) and NAME_cv
 * (stddev / mean, "aggregate_unit": "percentage", as a fraction), as Google
 * Benchmark writes them. A repetition, as in Google Benchmark, is a run of
 * iterations of which it keeps the mean: a row of at most
 * BENCH_JSON_MAX_REPS timed runs has one repetition per run ("iterations":
 * 1, "real_time" = "cpu_time" = its time, "time_unit": "ms"); a longer row
 * is cut into BENCH_JSON_MAX_REPS runs of consecutive runs, each with its
 * mean and its "iterations" (every single run is in NAME.samples.csv with
 * --samples). NAME_mean, NAME_stddev and NAME_cv are those of the
 * repetitions, as Google Benchmark's; NAME_median is the row's median of all
 * its runs, the very number of NAME.csv's median_ms (the median of block
 * means is another number, and a row has one median in every file, in
 * bench compare and in the charts). Each entry also holds the row's columns (sweep,
 * case, impl, backend, dtype, m, n, k, batch, transfer, tf32, cold; a file
 * without dtype reads as fp32, or tf32 where tf32 is 1) and duograd's
 * status, check, max_rel_err (null when none), note (absent when none).
 *
 * A row without a measurement (wrong, failed, unsupported, oom, skipped ...)
 * is one entry with "error_occurred": true and "error_message": "STATUS:
 * NOTE". compare.py reads "real_time" and "cpu_time" of every entry that is
 * not an aggregate, so, as Google Benchmark does for a failed run, it has
 * "iterations": 0 and both times 0; its "time_unit" is "s" where measured
 * entries have "ms", because compare.py pairs only entries of one unit: a
 * failed row is never compared with a measured one as if it took no time. */
#ifndef DG_BENCH_JSON_H
#define DG_BENCH_JSON_H

#define BENCH_JSON_MAX_REPS 16

#include <stdbool.h>

#include "core/status.h"
#include "writers/csv.h"

typedef struct bench_json bench_json;

/* meta: the CSV's '#' lines ("# key: value\n" ...). They become "context":
 * Google Benchmark's keys (date, host_name, executable, num_cpus,
 * mhz_per_cpu, cpu_scaling_enabled where known, caches, load_avg,
 * library_build_type) and every metadata key as a string entry of its own
 * (a line without "key: value" under "title"). NULL with a message when out
 * of memory. */
bench_json *bench_json_open(const char *meta);

/* adds row r (its samples are copied); j NULL: nothing. A failure to grow
 * the document (out of memory) is reported by bench_json_finish. */
void bench_json_add(bench_json *j, const bench_row *r);

/* writes DIR/NAME.json.partial and, when keep, renames it over
 * DIR/NAME.json (as bench_csv_finish: a failed run never erases an earlier
 * file; keep false removes the partial file); frees j in every case. */
dg_status bench_json_finish(bench_json *j, const char *dir, const char *name, bool keep);

/* One benchmark read back from a NAME.json: its columns and status in a
 * csv_rec (median_ms from NAME_median, or from the repetitions where there
 * is no aggregate (a row of one run); min_ms, max_ms, reps from the
 * repetitions; NaN and 0 for a failed row), cold, the error message of a failed row, and its
 * repetitions' times in ms, in the order run. */
typedef struct bench_json_rec {
    csv_rec rec;
    int     cold;
    char    message[160];
    double *samples;
    int     n_samples;
} bench_json_rec;

/* Reads path; *n benchmarks; NULL with a message (naming the file and what
 * is wrong) when it cannot be read or is not in the layout above. */
bench_json_rec *bench_json_read(const char *path, int *n);
void            bench_json_recs_free(bench_json_rec *recs, int n);

/* The string entry KEY of path's "context" (a metadata line "# KEY: value"
 * of the run) into buf; false (buf empty) when there is none or the file
 * cannot be read. */
bool bench_json_meta(const char *path, const char *key, char *buf, size_t n);

/* the whole file (at most 1 GiB), NUL-terminated, for the caller to free;
 * NULL with a message */
char *bench_json_slurp(const char *path, size_t *len);

#endif
