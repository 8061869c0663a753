/* run_sweep.c: one sweep from start to end: its CSV, JSON and samples
 * files opened, the machine's state recorded before and after, its rows
 * run, the files kept or discarded. Shared by the sweeps' command line and
 * by `bench profile` (which measures its ceilings with the ceiling sweep). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "machine/env.h"
#include "machine/gpu_monitor.h"
#include "writers/json.h"
#include "writers/samples.h"
#include "runner/energy_window.h"
#include "runner/sweep.h"

int bench_mkdir_p(const char *dir) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

/* the sweep's other files (NAME.json, NAME.samples.csv): closed, and kept
 * as AS.json and AS.samples.csv when its CSV is kept as AS.csv (as NULL:
 * discarded) */
static int finish_extras(bench_ctx *ctx, const sweep_def *s, const char *as) {
    int rc = 0;
    if (ctx->json && bench_json_finish(ctx->json, ctx->out_dir, as ? as : s->name, as != NULL) != DG_OK) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        rc = 1;
    }
    if (ctx->samples_csv && bench_samples_finish_as(ctx->samples_csv, ctx->out_dir, s->name, as) != DG_OK) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        rc = 1;
    }
    ctx->json = NULL;
    ctx->samples_csv = NULL;
    return rc;
}

/* whether DIR/NAME.csv is there from an earlier run */
static bool earlier_result(const char *dir, const char *name) {
    char path[1024];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s.csv", dir, name);
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* runs one sweep into DIR/NAME.csv (and .json, .samples.csv); 0, or 1 when
 * it failed or wrote failed rows */
int bench_run_sweep(bench_ctx *ctx, const sweep_def *s) {
    /* the run's metadata, then the machine's state as this sweep starts */
    char meta[sizeof ctx->meta + 512], end[512] = "";
    snprintf(meta, sizeof meta, "%s", ctx->meta);
    bench_env_snapshot(meta, sizeof meta, "start of sweep");
    bench_gpu_monitor_snapshot(ctx->gpu_mon, meta, sizeof meta, "start of sweep");
    bench_energy_idle_meta(ctx, meta, sizeof meta, "start of sweep");
    ctx->csv = bench_csv_open(ctx->out_dir, s->name, meta, BENCH_CSV_HEADER);
    ctx->json = ctx->csv ? bench_json_open(meta) : NULL;
    ctx->samples_csv = ctx->json && ctx->samples ? bench_samples_open(ctx->out_dir, s->name, meta) : NULL;
    if (!ctx->csv || !ctx->json || (ctx->samples && !ctx->samples_csv)) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        if (ctx->csv) bench_csv_finish(ctx->csv, ctx->out_dir, s->name, false);
        finish_extras(ctx, s, NULL);
        if (ctx->sweeps_left > 0) ctx->sweeps_left--; /* the budget's shares count the sweeps still to run */
        return 1;
    }
    ctx->sweep = s->name;
    ctx->rows = ctx->failed = ctx->noisy = ctx->planned = 0;
    ctx->precisions_run = 0;
    ctx->precisions_why = NULL;
    ctx->t0 = ctx->last_line_s = bench_now_s();
    ctx->left_s = -1;
    ctx->worst_miss = 0;
    /* an equal share of the budget left: what a quick sweep leaves unused
     * goes to the ones after it */
    if (!ctx->run_t0) ctx->run_t0 = ctx->t0;
    int sweeps_left = ctx->sweeps_left > 0 ? ctx->sweeps_left : 1;
    ctx->deadline_s = ctx->budget_s > 0 ? ctx->t0 + (ctx->budget_s - (ctx->t0 - ctx->run_t0)) / sweeps_left : 0;
    dg_status st = s->run(ctx);
    int rc = st != DG_OK || ctx->failed;
    if (ctx->progress) fprintf(stderr, "\r\033[K");
    if (st != DG_OK) fprintf(stderr, "bench: %s: %s\n", s->name, dg_last_error());
    bench_note_precisions(ctx);
    /* and as it ends: '#' lines after the rows, which readers skip */
    bench_env_snapshot(end, sizeof end, "end of sweep");
    bench_gpu_monitor_snapshot(ctx->gpu_mon, end, sizeof end, "end of sweep");
    fputs(end, ctx->csv);
    /* A sweep that wrote no row leaves an earlier NAME.csv as it was; an
     * interrupted one too, its rows kept beside it as NAME.interrupted.csv
     * (a complete result is never replaced by part of a later run's). */
    char aside[256];
    const char *as = ctx->rows > 0 && !ctx->discard ? s->name : NULL;
    if (as && bench_interrupted && earlier_result(ctx->out_dir, s->name)) {
        snprintf(aside, sizeof aside, "%s.interrupted", s->name);
        as = aside;
    }
    if (bench_csv_finish_as(ctx->csv, ctx->out_dir, s->name, as) != DG_OK) {
        fprintf(stderr, "bench: %s\n", dg_last_error());
        finish_extras(ctx, s, NULL);
        return 1;
    }
    rc |= finish_extras(ctx, s, as);
    if (as == aside)
        fprintf(stderr, "bench: %s: interrupted after %d rows -> %s/%s.csv; the earlier result stays in %s/%s.csv\n",
                s->name, ctx->rows, ctx->out_dir, as, ctx->out_dir, s->name);
    else if (as)
        fprintf(stderr, "bench: %s: %d rows (%d failed, %d noisy) in %.1f s -> %s/%s.csv\n", s->name, ctx->rows,
                ctx->failed, ctx->noisy, bench_now_s() - ctx->t0, ctx->out_dir, as);
    else if (!ctx->discard)
        fprintf(stderr, "bench: %s: no rows%s\n", s->name,
                ctx->case_filter || ctx->impl_filter ? " (--case / --impl matched nothing here)" : "");
    if (ctx->worst_miss > 0)
        fprintf(stderr, "bench: %s: a CPU run took up to %.1fx its predicted time (%s)\n", s->name, ctx->worst_miss,
                ctx->worst_miss_row);
    ctx->sweep = NULL;
    if (ctx->sweeps_left > 0) ctx->sweeps_left--;
    return rc;
}
