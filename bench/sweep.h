/* sweep.h: what every sweep shares: the run's settings, the open backends,
 * the CSV being written, progress and interruption. */
#ifndef DG_BENCH_SWEEP_H
#define DG_BENCH_SWEEP_H

#include <stdbool.h>
#include <stdio.h>

#include "csv.h"
#include "plot.h"
#include "timing.h"

#define BENCH_MAX_SIZES 64

typedef struct bench_ctx {
    const char  *out_dir;
    const char  *data_dir;           /* Fashion-MNIST folder, NULL: the default */
    dg_backend  *cpu, *gpu;          /* NULL: not asked for or not available */
    int          threads;
    long long    sizes[BENCH_MAX_SIZES];
    int          n_sizes;            /* 0: each sweep's defaults             */
    bench_timing timing;
    bool         quick;
    bool         extended;           /* --sweep all: the largest sizes too   */
    double       cpu_cap_s;          /* skip CPU runs predicted to take longer */
    bool         progress;           /* stderr is a terminal                 */
    char         meta[4096];
    FILE        *csv;                /* the sweep's file, while it runs      */
    int          rows, failed;
} bench_ctx;

typedef dg_status (*sweep_run_fn)(bench_ctx *ctx);
/* Draws the sweep's charts (bench_chart_draw) and writes its summary.md
 * section to rep->sum from t, its NAME.csv (n = 0: absent). Returns whether
 * it found anything to report (then bench plot writes summary.md). */
typedef bool (*sweep_report_fn)(bench_report *rep, const bench_table *t);
/* Sets the fields of *c that the sweep's rows t (n > 0) measure. */
typedef void (*sweep_ceilings_fn)(const bench_table *t, bench_ceilings *c);

/* One sweep: `bench --sweep NAME` runs `run` into NAME.csv; `bench plot`
 * reads NAME.csv back for `ceilings` (the lines other charts draw, written
 * as summary.md's first section) and for `report`. */
typedef struct sweep_def {
    const char       *name;
    const char       *what;      /* bench --list                        */
    sweep_run_fn      run;
    sweep_report_fn   report;    /* NULL: no section of its own         */
    sweep_ceilings_fn ceilings;  /* NULL: its rows are not ceilings     */
} sweep_def;

extern const sweep_def bench_sweeps[];
extern const int       bench_n_sweeps;

/* writes a row to the CSV, counts failures, shows progress */
void bench_emit(bench_ctx *ctx, const bench_row *r);
/* the sizes to run: the user's, or `defaults` (n entries) */
int  bench_sizes(const bench_ctx *ctx, const long long *defaults, int n, const long long **out);
/* status name for a failed dg_status */
const char *bench_status_word(dg_status st);

dg_status sweep_ceilings(bench_ctx *ctx);
void      bench_ceilings_read(const bench_table *t, bench_ceilings *c);
dg_status sweep_gemm(bench_ctx *ctx);
bool      bench_report_gemm(bench_report *rep, const bench_table *t);
/* one ceiling row: square sgemm of `size` by `impl` */
void      bench_gemm_ceiling(bench_ctx *ctx, int size, const char *impl);
dg_status sweep_ops(bench_ctx *ctx);
bool      bench_report_ops(bench_report *rep, const bench_table *t);
dg_status sweep_mlp(bench_ctx *ctx);
bool      bench_report_mlp(bench_report *rep, const bench_table *t);
dg_status sweep_autodiff(bench_ctx *ctx);
bool      bench_report_autodiff(bench_report *rep, const bench_table *t);
dg_status sweep_train(bench_ctx *ctx);
/* also the curves of `bench train` (train-MODEL-BACKEND.csv) */
bool      bench_report_train(bench_report *rep, const bench_table *t);

#endif
