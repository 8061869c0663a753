/* profile.h: `bench profile`, where a training step's time and memory go,
 * node by node. One step of a model (forward, loss, backward, optimizer:
 * dg_train_step) is built under a precision policy (--dtype: fp32, tf32,
 * bf16-mixed, fp16-mixed with its loss scaling; core/nn/train_step.h, the
 * sweeps' builder), planned on a backend and checked against float64 at
 * that precision's step tolerances (runner/step_tol.h, the sweeps' own)
 * like the sweeps' rows; then its plan's steps are queued one at a time with a
 * backend event between every two (dg_event_*: CUDA events on the GPU, the
 * monotonic clock on the CPU), for a number of profiled steps, and the
 * un-profiled step (dg_plan_run: a replayed CUDA graph on the GPU) is
 * timed beside it. Each node's FLOPs and bytes come from the op table
 * (dg_node_cost); its ceiling is the backend's measured sgemm rate when it
 * is compute-bound (FLOPs per byte above the ridge, peak FLOP/s / peak
 * bandwidth) and its measured copy rate when it is memory-bound.
 *
 * profile_run.c measures, profile_report.c prints the tables and writes
 * CSV and JSON, profile_trace.c the Chrome trace, profile_plot.c the
 * charts, profile_cli.c is the command line. */
#ifndef DG_BENCH_PROFILE_H
#define DG_BENCH_PROFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "core/check/step_check.h"
#include "core/plan.h"
#include "core/precision.h"

typedef enum bench_phase { BENCH_PHASE_FORWARD, BENCH_PHASE_BACKWARD, BENCH_PHASE_OPTIMIZER } bench_phase;
#define BENCH_N_PHASES 3

const char *bench_phase_name(bench_phase p); /* "forward", "backward", "optimizer" */
/* a node's phase from its id and the step's boundaries (train_step.h) */
bench_phase bench_phase_of(const dg_train_step *ts, const dg_node *n);

/* a model `bench profile --model NAME` knows */
typedef struct bench_prof_model {
    const char *name;          /* mlp, logreg, cnn, resnet18-cifar, resnet18,
                                  charlm, charlm-composed                  */
    const char *what;          /* --help                                     */
    int         default_batch;
    int         check_batch;   /* the float64 check's batch; 0: the profiled batch */
} bench_prof_model;

extern const bench_prof_model bench_prof_models[];
extern const int              bench_n_prof_models;
const bench_prof_model       *bench_prof_model_find(const char *name); /* NULL: unknown */
/* --model FILE.onnx: the entry of an imported model, named onnx-STEM (STEM:
 * the file's name less its folder and .onnx, in the result files' names);
 * NULL for a name that does not end in .onnx or a stem that is no file
 * name (bench_file_name_ok) */
const bench_prof_model       *bench_prof_onnx_model(const char *path);

/* what one profile measures, and with what */
typedef struct bench_prof_opts {
    const bench_prof_model *model;
    int    batch;
    int    steps;     /* profiled steps (each node's time: their median)  */
    int    warmup;    /* un-profiled steps run first                       */
    dg_precision precision; /* the step's policy; tf32 on the GPU only     */
    dg_gemm_impl gemm; /* the plan's GEMM and convolution choices         */
    dg_conv_impl conv; /* (DEFAULT: the backend's)                        */
    bool   run_once;  /* one step, no warm-up, no check: for nsys / ncu    */
    double peak_gflops, peak_gbps; /* the backend's ceilings; NaN: unknown */
    struct bench_energy_meter *energy; /* the backend's energy meter (machine/
                                        * energy.h); NULL: none, energy_none
                                        * says why */
    const char *energy_none;
    const struct dg_onnx *onnx; /* --model FILE.onnx: the loaded file (its
                                   owner keeps it past bench_profile_free) */
} bench_prof_opts;

typedef struct bench_prof_node {
    const dg_node *node;           /* NULL when read back from JSON         */
    char           name[32], op[32]; /* the node's name and op's name       */
    char           dtype[16];      /* its output's dtype ("f32", "bf16"), or
                                    * "IN->OUT" when its floating inputs'
                                    * differs: a cast "f32->bf16", a 16-bit
                                    * GEMM "bf16->f32" (bench_prof_dtype)  */
    char           impl[64];       /* what its step ran as in this plan
                                    * (dg_plan_node_impl: "gpu-cudnn:
                                    * implicit-precomp-gemm", "cpu-onednn",
                                    * "gpu-implicit", ...)                  */
    bench_phase    phase;
    double         flops, bytes;   /* per run, from dg_node_cost            */
    double         median_ms, min_ms;
    double        *start_ms;       /* [steps]: from the profiled run's start */
    double        *dur_ms;         /* [steps]                               */
    size_t         live_bytes;     /* arena bytes alive while it runs       */
} bench_prof_node;

/* one backend's profile of one step */
typedef struct bench_profile {
    char             backend[64];  /* dg_backend_name                      */
    const char      *model;
    dg_precision     precision;
    char             stem[80];     /* the files' MODEL: the model's name, with
                                    * "-DTYPE" when not fp32 (bench_prof_stem) */
    int              batch, steps;
    bench_step       step;         /* the profiled step (graph, plan)      */
    int              n_nodes;      /* the plan's steps, in order            */
    bench_prof_node *nodes;
    double          *step_start_ms; /* [steps]: each profiled step's start  */
    /* step times in ms (medians); NaN: not measured (run_once) */
    double           plan_ms;       /* dg_plan_run, as the sweeps time it (GPU: replayed graph) */
    double           plan_nodes_ms; /* the same plan run node by node without events (GPU only) */
    double           profiled_ms;   /* first to last event of a profiled step */
    double           sum_ms;        /* the sum of the nodes' medians         */
    double           peak_gflops, peak_gbps;
    /* the un-profiled step's energy in a window of its own after the
     * profiled steps (runner/energy_window.h): joules per step and mean
     * watts; NaN with energy_note saying why */
    double           step_j, step_w;
    char             energy_note[200];
    /* memory (bytes), from the plan's own accounting */
    size_t           persistent_bytes, param_bytes, input_bytes, arena_bytes, live_peak_bytes, scratch_bytes;
    long long        allocs_during_runs; /* backend allocations across every run: must be 0 */
    /* the check done before any timing */
    const char      *check;         /* "f64-step", "f64-step@b2+finite", "none" */
    double           rel_err;
    bool             check_ok;
} bench_profile;

/* Plans, checks and profiles one step on be; *out owns what it holds
 * (bench_profile_free, also after a failure). A step that fails its check
 * returns DG_OK with out->check_ok false, and nothing is timed. */
dg_status bench_profile_run(dg_backend *be, const bench_prof_opts *o, bench_profile *out);
void      bench_profile_free(bench_profile *p);

/* the node's dtype column (bench_prof_node.dtype) into buf */
void bench_prof_dtype(const dg_node *n, char *buf, size_t size);
/* the files' MODEL of a profile of model in precision p: "mlp", "mlp-bf16" */
void bench_prof_stem(const char *model, dg_precision p, char stem[80]);

/* "cpu" or "gpu": the kind of the backend a profile ran on (file names) */
const char *bench_prof_device(const bench_profile *p);

/* each node's derived figures */
double bench_prof_intensity(const bench_prof_node *n);   /* FLOPs per byte; 0 without bytes */
/* "compute" when its intensity is at or above the ridge, else "memory";
 * "-" when the ceilings are unknown */
const char *bench_prof_bound(const bench_profile *p, const bench_prof_node *n);
/* achieved / the ceiling of its bound; NaN when unknown */
double bench_prof_ceiling_frac(const bench_profile *p, const bench_prof_node *n);

/* per op type or per phase and node dtype, in descending time */
typedef struct bench_prof_group {
    char   key[32];
    char   dtype[16];
    int    nodes;
    double ms, flops, bytes;
} bench_prof_group;
/* by_phase false: per op type; returns the number of groups (at most max) */
int bench_prof_groups(const bench_profile *p, bool by_phase, bench_prof_group *out, int max);

/* the stdout tables: the top_n nodes by time, then per op type and phase,
 * the memory report and the step times */
void bench_profile_print(FILE *f, const bench_profile *p, int top_n);
/* with both backends: per op type, CPU and GPU times and the speedup */
void bench_profile_print_compare(FILE *f, const bench_profile *cpu, const bench_profile *gpu);

/* MODEL below: the profile's stem (the model's name, "-DTYPE" unless fp32).
 * DIR/profile-MODEL-BACKEND-nodes.csv (each node, with the arena bytes
 * alive at its step), -ops.csv (per op type and per phase); with both,
 * DIR/profile-MODEL-compare.csv; and DIR/profile-MODEL.json holding all. */
dg_status bench_profile_write(const char *dir, const char *meta, bench_profile *const *p, int n);
/* writes text and a newline to DIR/FILE (text NULL: out of memory) */
dg_status bench_prof_save(const char *dir, const char *file, const char *text);
/* DIR/profile-MODEL-trace.json: Chrome's trace event format, one process
 * per backend, one slice per node per profiled step */
dg_status bench_profile_trace(const char *dir, bench_profile *const *p, int n);
/* DIR/profile-MODEL-ops.png (stacked bars of step time by op type per
 * backend), -roofline-BACKEND.png, -live-BACKEND.png, each carrying the
 * machine, date and commit of meta (the run's `#` metadata lines; NULL:
 * none); 0, or 1 when gnuplot failed (a missing gnuplot is reported and is
 * not a failure) */
int bench_profile_plot(const char *dir, const char *meta, bench_profile *const *p, int n);

/* Reads a profile JSON back (profile_read.c) as the charts need it: the
 * model's name into model, checked as a file name (bench_file_name_ok) with
 * its "dtype" (a precision's name; absent: fp32) as each profile's stem, its
 * "context" (the run's `#` metadata lines) into context (n_context bytes,
 * cut there; "" where absent; context may be NULL), and
 * n = 1 or 2 profiles whose nodes have names, ops, phases and figures but
 * no graph. DG_ERR_IO with a message naming the file and what it holds
 * (n = 0, nothing to free); else p[0..n) are freed by
 * bench_profile_read_free. */
dg_status bench_profile_read(const char *path, char model[64], char *context, size_t n_context, bench_profile p[2],
                             int *n);
void      bench_profile_read_free(bench_profile *p, int n);

/* Redraws the charts of every DIR/profile-MODEL.json (what `bench plot
 * DIR` does for profiles measured on a machine without gnuplot): 0, or 1
 * when a file cannot be read or a chart fails. */
int bench_profile_replot(const char *dir);

/* `bench profile ...`: exit code */
int bench_profile_main(int argc, char **argv);

#endif
