/* plot.h: charts (gnuplot, PNG + SVG) and summary.md from the CSV files of
 * a result folder. Works on any folder bench wrote, on any machine.
 *
 * The machinery is generic: a sweep's CSV as a table, series picked from it,
 * speedups and crossovers, charts. What to draw and summarise is each sweep's
 * own: its report function (sweep_def.report, next to the sweep's run). */
#ifndef DG_BENCH_PLOT_H
#define DG_BENCH_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "writers/csv.h"

#define BENCH_MAX_PTS 64

/* the rows of one sweep's NAME.csv; n = 0 when the file is absent or
 * unreadable (then `unreadable`, and bench plot exits 1 after drawing the
 * other files) */
typedef struct bench_table { csv_rec *r; int n; bool unreadable; } bench_table;

/* a point's value in a series: ok and noisy rows have one */
bool bench_row_measured(const csv_rec *r);

/* one line of a chart: x (size, batch, epoch ...) ascending as measured;
 * lo, hi: the error bar (from the row's min and max; lo = hi = y where
 * none); noisy: the row's status (drawn with a ring) */
typedef struct bench_series {
    char   title[64];
    int    n;
    double x[BENCH_MAX_PTS], y[BENCH_MAX_PTS], lo[BENCH_MAX_PTS], hi[BENCH_MAX_PTS];
    bool   noisy[BENCH_MAX_PTS];
} bench_series;

/* the CSV column a series' y comes from: the median time, the rates, the
 * joules per run of the row's energy window (the energy's speedup, CPU
 * joules over GPU joules, is then the GPU's energy advantage) and the
 * samples (batch) and GFLOP per joule */
typedef enum bench_col {
    BENCH_MS, BENCH_GFLOPS, BENCH_GBPS, BENCH_JOULES, BENCH_SAMPLES_PER_J, BENCH_GFLOP_PER_J
} bench_col;

typedef struct bench_chart {
    const char  *file, *title, *xlabel, *ylabel; /* file: DIR/FILE.png, .svg, plot-data/FILE.gp */
    bool         logy;
    bool         linx;      /* epochs, seconds: a linear x axis (else log2) */
    bench_series s[12];
    int          n;
    double       hline[4];  /* horizontal lines: ceilings, break-even */
    const char  *hline_title[4];
    int          n_hline;
    double       vline;     /* crossover mark, NAN for none */
} bench_chart;

/* each device's measured peaks (the ceiling sweep's rows); NaN: not measured */
typedef struct bench_ceilings {
    double cpu_gemm[DG_PREC_COUNT];                 /* a large GEMM, GFLOP/s, */
    double gpu_gemm[DG_PREC_COUNT];                 /* by dg_precision        */
    double cpu_gbps, gpu_gbps;                      /* streaming copy        */
    double pinned_gbps[2];                          /* host -> device [0] and
                                                     * back [1] from and to
                                                     * pinned host memory    */
} bench_ceilings;
/* nothing measured (an entry per precision) */
_Static_assert(DG_PREC_COUNT == 4, "BENCH_NO_CEILINGS has 4 GEMM entries per device");
#define BENCH_NO_CEILINGS \
    ((bench_ceilings){{NAN, NAN, NAN, NAN}, {NAN, NAN, NAN, NAN}, NAN, NAN, {NAN, NAN}})

/* what a sweep's report gets */
typedef struct bench_report {
    const char    *dir;     /* the result folder                             */
    char           provenance[256]; /* the sweep's CSV's machine, date and
                                     * commit (bench_csv_provenance), printed
                                     * on each of its charts; "" for none   */
    FILE          *sum;     /* where its summary.md section goes             */
    bench_ceilings ceil;    /* for the ceiling lines of its charts           */
    bool           gnuplot; /* false: summary only, bench_chart_draw does nothing */
    bool           failed;  /* set by bench_chart_draw when gnuplot fails    */
} bench_report;

/* Draws every chart the folder's CSV files allow and writes summary.md
 * (ceilings, then each registered sweep's section). Returns 0, 1 on failure
 * (message on stderr). The summary is also printed to `out` when it is not
 * NULL. */
int bench_plot(const char *dir, FILE *out);

/* DIR/SWEEP.csv; an unreadable file is reported on stderr and reads as
 * empty; a DIR/SWEEP.csv.partial left by a killed run is mentioned */
bench_table bench_table_load(const char *dir, const char *sweep);
/* the fp32 row of case `name`, `impl` and m (the last one: a re-run
 * appends), whatever its status; NULL where there is none */
const csv_rec *bench_table_row(const bench_table *t, const char *name, const char *impl, long long m);
/* the same in precision prec */
const csv_rec *bench_table_row_prec(const bench_table *t, const char *name, const char *impl, long long m,
                                    dg_precision prec);
/* Adds the m values of case `name`'s rows to the ascending, repeat-free
 * set out[0..n), up to max values; returns the set's new size. */
int bench_table_ms(const bench_table *t, const char *name, long long *out, int n, int max);
/* the measured fp32 rows (ok or noisy) of case `name` (NULL: any), `impl`,
 * `backend` (NULL: any) and `transfer`, in file order: x = the m column,
 * y = `col`, its error bar from min_ms and max_ms */
bench_series bench_pick(const bench_table *t, const char *name, const char *impl, const char *backend,
                        bool transfer, bench_col col, const char *title);
/* the same of the rows in precision prec (bench_pick: fp32's, which every
 * sweep without a precision axis writes) */
bench_series bench_pick_prec(const bench_table *t, const char *name, const char *impl, const char *backend,
                             dg_precision prec, bool transfer, bench_col col, const char *title);
/* the largest y (NaN for an empty series) and, if at != NULL, its x */
double bench_series_max(const bench_series *s, double *at);
/* cpu time / gpu time at every x measured in both */
bench_series bench_speedup(const bench_series *cpu, const bench_series *gpu, const char *title);
/* the smallest x from which the GPU is faster at every larger measured x;
 * NAN when it is not faster at the largest */
double bench_crossover(const bench_series *speedup);
/* the crossover as summary text: a size, "<= x (...)", "none: ..." or "n/a ..." */
void bench_crossover_str(const bench_series *speedup, char *buf, size_t n);
/* the same for an energy ratio (CPU joules over GPU joules per run, from
 * BENCH_JOULES series): the size from which the GPU uses less energy */
void bench_energy_crossover_str(const bench_series *sp, char *buf, size_t n);
/* a number, or "-" where nothing was measured (NaN) */
const char *bench_fmt_num(double v, const char *fmt, char *buf, size_t n);

/* "cpu MODEL (N cores), gpu NAME, DATE, commit C" from the `#` metadata of
 * DIR/SWEEP.csv (what a chart's reader needs to know where its figures come
 * from); "" where the file is absent or says none of them */
void bench_csv_provenance(const char *dir, const char *sweep, char *buf, size_t n);
/* the same from a text of `#` lines (a profile JSON's "context"); "" for
 * NULL or a text that names none of them */
void bench_meta_provenance(const char *meta, char *buf, size_t n);
/* v as an axis label: a power of two from 2^10 in K, M or G (4K, 64K, 1M:
 * the sizes the sweeps use), anything else as %g */
void bench_pow2_label(double v, char *buf, size_t n);

/* adds a series if it has points (at most 12) */
void bench_chart_add(bench_chart *c, bench_series s);
/* adds a horizontal line if y is finite (at most 4) */
void bench_chart_hline(bench_chart *c, double y, const char *title);
/* writes DIR/plot-data/FILE-i.dat and FILE.gp and runs gnuplot (PNG + SVG);
 * a chart without series is skipped; a failure sets rep->failed. The chart
 * carries rep->provenance in its bottom left corner; a log2 x axis has its
 * ticks at powers of two (bench_pow2_label); a title that names ceilings
 * while none was measured says so. */
void bench_chart_draw(bench_report *rep, const bench_chart *c);

#endif
