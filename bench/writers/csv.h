/* csv.h: the long-format result file. One row per measurement, written and
 * flushed as soon as it is measured, so an interrupted sweep keeps every
 * finished row; metadata as '#' lines first (gnuplot skips them). */
#ifndef DG_BENCH_CSV_H
#define DG_BENCH_CSV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/precision.h"
#include "core/status.h"
#include "runner/timing.h"

#define BENCH_CSV_HEADER                                                                                   \
    "sweep,case,impl,backend,dtype,m,n,k,batch,threads,transfer,tf32,cold,warmup,reps,median_ms,min_ms," \
    "max_ms,cv_pct,gflops,gbps,scratch_bytes,arena_bytes,live_bytes,energy_j,avg_w,gflop_per_j,samples_per_j," \
    "max_rel_err,check,status,note"

typedef struct bench_row {
    const char *sweep, *name, *impl, *backend;
    int64_t     m, n, k, batch;
    int         threads;         /* the CPU backend's OpenMP threads (--threads);
                                  * a kernel may keep fewer busy (the conv batch
                                  * strategy's team, dg__cpu_conv_slots)      */
    dg_precision precision;      /* the dtype column; the tf32 column says 1
                                  * exactly when it is DG_PREC_TF32          */
    bool        transfer;
    bool        cold;            /* caches emptied before every timed run: the
                                  * GPU's L2, or the host's for CPU rows      */
    int         warmup;
    bench_stats st;              /* st.samples: every timed run, in order  */
    double      flops, bytes;    /* work per run: gives GFLOP/s and GB/s   */
    int64_t     scratch_bytes;   /* working memory of the measured kernel
                                  * (a convolution's im2col columns); 0: none */
    int64_t     arena_bytes;     /* the measured plan's arena (model steps); 0: not reported */
    int64_t     live_bytes;      /* the most of that arena alive at one step (what the
                                  * arena cannot be smaller than); 0: not reported */
    double      energy_j;        /* joules per run in the row's energy window
                                  * (runner/energy_window.h): the GPU board's
                                  * for GPU rows, the CPU packages' and DRAM's
                                  * for CPU rows; NaN: not measured (the note
                                  * says why). avg_w, gflop_per_j and
                                  * samples_per_j (batch / energy_j, where
                                  * batch > 0) are derived from it         */
    double      energy_w;        /* the window's mean power; NaN: none     */
    double      max_rel_err;     /* against the reference; NaN if none     */
    const char *check;           /* what max_rel_err compared: a short word
                                  * (f64-fwd, f64-grad, f64-step ...); NULL: none */
    const char *status;          /* ok | noisy | wrong | failed | unsupported | oom | error | skipped |
                                  * interrupted */
    const char *note;            /* why a row is not ok, or what it flags
                                  * (throttling, fits in L2); NULL: nothing */
} bench_row;

/* A result file is written as DIR/NAME.csv.partial, metadata then header
 * (BENCH_CSV_HEADER for sweeps), rows flushed one by one; bench_csv_finish
 * closes it and, when `keep`, renames it over DIR/NAME.csv. A run that
 * fails or is killed never erases an earlier DIR/NAME.csv, and a row cut
 * short is a last line without a newline, which readers skip. */
FILE     *bench_csv_open(const char *dir, const char *name, const char *meta, const char *header);
dg_status bench_csv_finish(FILE *f, const char *dir, const char *name, bool keep);
/* the same, kept as DIR/AS.csv (an interrupted re-run beside the earlier
 * result); as NULL: discarded */
dg_status bench_csv_finish_as(FILE *f, const char *dir, const char *name, const char *as);
void      bench_csv_write(FILE *f, const bench_row *r);
/* whether r has times to report: a checked, finished measurement (ok,
 * noisy, interrupted with runs); a wrong or failed row keeps none */
bool      bench_row_timed(const bench_row *r);

/* reading back (plot, compare): columns are found by their header name, so
 * a folder written with fewer or more columns still reads. Required: sweep,
 * case, impl, backend, m, n, k, batch, transfer, median_ms, min_ms, max_ms,
 * status. Optional: dtype (a precision name; "f32", written before
 * precisions were, reads as fp32, or tf32 where tf32 = 1; absent: the
 * same), tf32, cold, threads, reps, scratch_bytes, arena_bytes,
 * live_bytes (0 when absent), cv_pct, gflops, gbps, max_rel_err, energy_j, avg_w
 * (NaN when absent),
 * check, note (empty when absent). Other columns are ignored. */
typedef struct csv_rec {
    char   sweep[32], name[48], impl[32], backend[8], status[16], check[48], note[160];
    long long m, n, k, batch, scratch_bytes, arena_bytes, live_bytes;
    int    threads, transfer, tf32, cold, reps;
    dg_precision precision;
    double median_ms, min_ms, max_ms, cv_pct, gflops, gbps, max_rel_err, energy_j, avg_w;
} csv_rec;

/* Reads every data row of path; *n rows; NULL with a message on failure
 * (naming the file, the line and, for a header, the missing column). A last
 * line without its newline (a row cut short) is skipped with a warning on
 * stderr; any other malformed line fails the whole file. */
csv_rec *bench_csv_read(const char *path, int *n);

/* r->tf32 set from r->precision (1 exactly for tf32), and the name of an
 * older file's TF32 implementation, IMPL-tf32 (gpu-cublas-tf32,
 * gpu-tiled-tf32: TF32 had implementations of its own before the
 * precision axis), read as IMPL: the rows of IMPL at tf32 today */
void bench_rec_legacy_tf32(csv_rec *r);

/* The value of the metadata line "# KEY: value" of path (before its
 * header) into buf; false (buf empty) when there is none. */
bool bench_csv_meta(const char *path, const char *key, char *buf, size_t n);

#endif
