/* sweep.h: what every sweep shares: the run's settings, the open backends,
 * the CSV being written, progress and interruption. */
#ifndef DG_BENCH_SWEEP_H
#define DG_BENCH_SWEEP_H

#include <stdbool.h>
#include <stdio.h>

#include "core/precision.h"
#include "writers/csv.h"
#include "charts/plot.h"
#include "runner/timing.h"

#define BENCH_MAX_SIZES  64
#define BENCH_MAX_SHAPES 32
#define BENCH_MAX_SIZE_LISTS 8

/* --sizes [SWEEP=]LIST: for one sweep, or (sweep NULL) for the others */
typedef struct bench_size_list {
    const char *sweep;
    long long   v[BENCH_MAX_SIZES];
    int         n;
} bench_size_list;

/* --shapes: a GEMM C[m,n] = op(A) op(B), op = transpose where ta / tb */
typedef struct bench_gemm_shape { int m, n, k; bool ta, tb; } bench_gemm_shape;

struct bench_json;
struct bench_gpu_monitor;
struct bench_mpi;

typedef struct bench_ctx {
    const char  *out_dir;
    const char  *data_dir;           /* Fashion-MNIST folder, NULL: the default */
    const char  *model_path;         /* --model FILE.onnx: the model sweep's file */
    struct dg_onnx *model;           /* that file, loaded before the backends open
                                      * (sweeps/model/model_file.h); NULL: none */
    bool         model_has_batch_norm; /* its model has a batch norm         */
    dg_backend  *cpu, *gpu;          /* NULL: not asked for or not available */
    int          threads;
    bench_size_list size_lists[BENCH_MAX_SIZE_LISTS];
    int          n_size_lists;       /* 0: each sweep's defaults             */
    bench_gemm_shape shapes[BENCH_MAX_SHAPES]; /* --shapes: the gemm sweep's */
    dg_precision precisions[DG_PREC_COUNT]; /* --dtype, in the order given, each once */
    int          n_precisions;       /* 0: fp32 alone (the default)          */
    int          n_shapes;
    const char  *impl_filter, *case_filter; /* comma-separated glob patterns; NULL: all */
    bench_timing timing;
    bool         quick;
    bool         extended;           /* --sweep all: the largest sizes too   */
    bool         samples;            /* --samples: NAME.samples.csv too      */
    double       cpu_cap_s;          /* skip CPU runs predicted to take longer */
    double       budget_s;           /* --budget: the run's wall seconds, 0: none */
    double       run_t0;             /* when the run's first sweep started    */
    int          sweeps_left;        /* sweeps of the run not finished, this one
                                      * included (the budget's shares)        */
    const char  *wait_policy;        /* --wait-policy: auto, active, passive */
    bool         progress;           /* stderr is a terminal                 */
    FILE        *list;               /* bench --list SWEEP: the rows a run would
                                      * have go here, nothing runs (runner.h) */
    char         meta[8192];
    /* launched by MPI (train/train_mpi.h), NULL: one process. Rank 0
     * alone keeps its files: the others' are discarded (discard) */
    const struct bench_mpi *mpi;
    bool         discard;
    int          argc;               /* the command line, for the metadata   */
    char       **argv;
    /* the sweep under way */
    const char  *sweep;              /* its name                              */
    FILE        *csv, *samples_csv;  /* its files (samples_csv: --samples)    */
    struct bench_json *json;
    struct bench_gpu_monitor *gpu_mon; /* NVML, NULL where none              */
    /* energy meters (machine/energy.h) of the GPU board and the CPU
     * packages; NULL where none, with why (the full reason in the
     * metadata, the short one in rows' notes) */
    struct bench_energy_meter *energy_gpu, *energy_cpu;
    char         energy_gpu_short[64], energy_cpu_short[64];
    bool         no_energy;          /* --no-energy: no energy windows       */
    int          rows, failed, noisy;
    unsigned     precisions_run;     /* the precisions its specs declare (a mask
                                      * of 1u << dg_precision): --dtype's others
                                      * are said once on stderr as it ends    */
    const char  *precisions_why;     /* why it lacks them, NULL: unsaid       */
    int          planned;            /* rows it expects (progress), 0: unknown */
    double       t0;                 /* when it started                       */
    double       deadline_s;         /* its share of --budget ends, 0: none    */
    double       left_s;             /* the runner's estimate of the time its
                                      * remaining rows take, < 0: none        */
    double       last_line_s;        /* when the last progress line was printed
                                      * (stderr not a terminal)               */
    double       worst_miss;         /* largest ran/predicted time of a CPU
                                      * row above 2 (runner.c), 0: none       */
    char         worst_miss_row[160];
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
    bool              by_default; /* run when no --sweep is given        */
    bool              not_in_all; /* left out of --sweep all: asked by name */
} sweep_def;

extern const sweep_def bench_sweeps[];
extern const int       bench_n_sweeps;

/* Runs sweep s into ctx->out_dir/NAME.csv (and .json, .samples.csv),
 * with the machine's state before and after in the metadata; 0, or 1 when
 * it failed or wrote failed rows. A sweep that wrote no row leaves an
 * earlier NAME.csv as it was. */
int  bench_run_sweep(bench_ctx *ctx, const sweep_def *s);
/* mkdir -p: 0, or -1 with errno */
int  bench_mkdir_p(const char *dir);
/* writes a row to the CSV, counts failures, shows progress */
void bench_emit(bench_ctx *ctx, const bench_row *r);
/* bench_emit for a row whose status is a finding, not a failure (the
 * composed attention's `oom` at long sequences): it is not counted in
 * ctx->failed, so the sweep's exit code stays 0 */
void bench_emit_finding(bench_ctx *ctx, const bench_row *r);
/* the sizes to run: the user's for this sweep, or `defaults` (n entries) */
int  bench_sizes(const bench_ctx *ctx, const long long *defaults, int n, const long long **out);
/* whether the user gave this sweep its sizes */
bool bench_user_sizes(const bench_ctx *ctx);
/* whether --case and --impl let this case and implementation run */
bool bench_wanted(const bench_ctx *ctx, const char *name, const char *impl);
/* the sweep expects about n more rows (the progress line's total) */
void bench_plan_rows(bench_ctx *ctx, int n);
/* the run's precisions (--dtype) into out; returns their number, 1 or
 * more (fp32 alone when none was given) */
int  bench_precisions(const bench_ctx *ctx, dg_precision out[DG_PREC_COUNT]);
/* "LIST" of --dtype (precision names comma-separated, or "all") into ctx;
 * DG_ERR_INVALID naming the unknown entry or the repeated one */
dg_status bench_parse_precisions(const char *spec, bench_ctx *ctx);
/* one stderr line for the precisions --dtype asked for that no spec of the
 * sweep under way declared (they have no rows in it; not an error) */
void bench_note_precisions(const bench_ctx *ctx);
/* status name for a failed dg_status */
const char *bench_status_word(dg_status st);

dg_status sweep_ceilings(bench_ctx *ctx);
void      bench_ceilings_read(const bench_table *t, bench_ceilings *c);
bool      bench_report_ceiling(bench_report *rep, const bench_table *t);
/* ceiling_transfer.c: h2d and d2h rows, pinned and pageable (GPU only); the
 * pinned rates as ceilings */
void      bench_transfer_ceilings(bench_ctx *ctx);
void      bench_transfer_ceilings_read(const bench_table *t, bench_ceilings *c);
dg_status sweep_gemm(bench_ctx *ctx);
bool      bench_report_gemm(bench_report *rep, const bench_table *t);
/* the ceiling rows of a square GEMM of `size` by `impl` (a gemm sweep
 * implementation), one per precision of the run (--dtype) in `precisions`
 * (a BENCH_PREC mask, runner.h) that the implementation has */
void      bench_gemm_ceiling(bench_ctx *ctx, int size, const char *impl, unsigned precisions);
dg_status sweep_ops(bench_ctx *ctx);
bool      bench_report_ops(bench_report *rep, const bench_table *t);
dg_status sweep_mlp(bench_ctx *ctx);
bool      bench_report_mlp(bench_report *rep, const bench_table *t);
dg_status sweep_autodiff(bench_ctx *ctx);
bool      bench_report_autodiff(bench_report *rep, const bench_table *t);
dg_status sweep_train(bench_ctx *ctx);
/* also the curves of `bench train` (train-MODEL-BACKEND.csv) */
bool      bench_report_train(bench_report *rep, const bench_table *t);
dg_status sweep_conv(bench_ctx *ctx);
bool      bench_report_conv(bench_report *rep, const bench_table *t);
dg_status sweep_resnet(bench_ctx *ctx);
bool      bench_report_resnet(bench_report *rep, const bench_table *t);
dg_status sweep_attention(bench_ctx *ctx);
/* also the rows of bench/peers/torch_attention.py (torch_attention.csv) */
bool      bench_report_attention(bench_report *rep, const bench_table *t);
dg_status sweep_transformer(bench_ctx *ctx);
bool      bench_report_transformer(bench_report *rep, const bench_table *t);
/* --model FILE.onnx (sweeps/model/sweep_model.c) */
dg_status sweep_model(bench_ctx *ctx);
bool      bench_report_model(bench_report *rep, const bench_table *t);
dg_status sweep_scaling(bench_ctx *ctx);
bool      bench_report_scaling(bench_report *rep, const bench_table *t);

#endif
