/* runner.c: the one loop over a sweep's points and implementations
 * (runner.h): filters, progress, predictions, timing, status words and the
 * one site where rows are emitted. */
#include "runner/runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_points_add(bench_points *list, bench_point pt) {
    if (list->n == list->cap) {
        int cap = list->cap ? 2 * list->cap : 64;
        bench_point *p = realloc(list->p, (size_t)cap * sizeof *p);
        if (!p) {
            list->oom = true;
            return;
        }
        list->p = p;
        list->cap = cap;
    }
    list->p[list->n++] = pt;
}

double bench_predict_s(const bench_point *pt, double last_ms, double last_work) {
    double work = pt->flops > 0 ? pt->flops : pt->bytes;
    if (!(last_ms > 0) || !(last_work > 0) || !(work > 0)) return 0;
    return last_ms * work / last_work / 1e3;
}

/* whether the row of im at pt is written at all: its backend is open, the
 * sweep says it applies, --case and --impl let it through */
static bool row_applies(const bench_ctx *ctx, const bench_sweep_spec *spec, const bench_point *pt,
                        const bench_impl *im) {
    if (im->gpu ? !ctx->gpu : !ctx->cpu) return false;
    if (!bench_wanted(ctx, pt->name, im->name)) return false;
    return !spec->applies || spec->applies(ctx, pt, im);
}

/* the rate of a CPU implementation's last row (or probe), per implementation */
typedef struct rate { double ms, work; } rate;

/* A rate measured on work this many times smaller predicts a point poorly
 * (a 64^3 GEMM's rate says little of an 8192^3 one's): the sweep's probe is
 * asked again, and may measure something closer. */
#define RATE_REACH 64.0

/* why im does not run at pt, or NULL: the sweep's reason, else the time
 * predicted for a CPU row against --cpu-cap */
static const char *skip_reason(bench_ctx *ctx, const bench_sweep_spec *spec, const bench_point *pt,
                               const bench_impl *im, rate *r, char *why, size_t n) {
    const char *sweep_why = spec->skip ? spec->skip(ctx, pt, im, why, n) : NULL;
    if (sweep_why || im->gpu) return sweep_why;
    double work = pt->flops > 0 ? pt->flops : pt->bytes;
    if (spec->probe && (!(r->ms > 0) || work > RATE_REACH * r->work)) {
        double ms = 0, probe_work = 0; /* a probe that declines leaves the rate as it was */
        spec->probe(ctx, im, pt, &ms, &probe_work);
        if (ms > 0 && probe_work > 0) *r = (rate){ms, probe_work};
    }
    double predicted_s = bench_predict_s(pt, r->ms, r->work);
    if (predicted_s > ctx->cpu_cap_s) {
        snprintf(why, n, "predicted %.1f s per run > cap %.1f s (--cpu-cap)", predicted_s, ctx->cpu_cap_s);
        return why;
    }
    return NULL;
}

/* the columns every row of pt and im has, before anything is measured */
static bench_row row_of(const bench_ctx *ctx, const bench_sweep_spec *spec, const bench_point *pt,
                        const bench_impl *im) {
    return (bench_row){.sweep = spec->name, .name = pt->name, .impl = im->name, .backend = im->gpu ? "gpu" : "cpu",
                       .m = pt->m, .n = pt->n, .k = pt->k, .batch = pt->batch, .threads = ctx->threads,
                       .transfer = im->transfer, .tf32 = im->tf32, .warmup = ctx->timing.warmup,
                       .st = BENCH_NO_STATS, .flops = pt->flops, .bytes = pt->bytes, .max_rel_err = NAN,
                       .check = spec->check_word};
}

/* status word of a setup that failed */
static const char *failed_word(dg_status st) { return st == DG_ERR_OOM ? "oom" : "failed"; }

/* prepares, times and checks one row; the row's status and columns set */
static void measure(bench_ctx *ctx, const bench_sweep_spec *spec, void *state, const bench_impl *im, bench_row *row,
                    bench_work *work) {
    bench_timing timing = ctx->timing;
    timing.cold = timing.cold && !spec->hot;
    dg_status st = spec->prepare(ctx, state, im, row, work);
    if (st != DG_OK) {
        row->status = bench_status_word(st);
        row->note = dg_last_error();
        return;
    }
    if (row->status || work->no_row) return; /* prepare said what the row is */
    st = bench_time(work->be, work->events, work->fn, work->arg, &timing, &row->st);
    if (st != DG_OK) {
        row->status = bench_status_word(st);
        row->note = dg_last_error();
        return;
    }
    bool passed = !spec->check || spec->check(state, im, row);
    if (!row->status) row->status = passed ? "ok" : "wrong"; /* else the check's own failure word */
}

/* every row of one point; rates[] updated from the rows that ran */
static void run_point(bench_ctx *ctx, const bench_sweep_spec *spec, const bench_point *pt, rate *rates) {
    void *state = NULL;
    bool set_up = false;
    dg_status setup_st = DG_OK;
    char setup_why[512] = "";
    for (int i = 0; i < spec->n_impls && !bench_interrupted; i++) {
        const bench_impl *im = &spec->impls[i];
        if (!row_applies(ctx, spec, pt, im)) continue;
        bench_row row = row_of(ctx, spec, pt, im);
        if (spec->columns) spec->columns(ctx, pt, im, &row);
        char why[256];
        const char *skip = skip_reason(ctx, spec, pt, im, &rates[i], why, sizeof why);
        if (skip) {
            row.status = "skipped";
            row.note = skip;
            bench_emit(ctx, &row);
            continue;
        }
        if (!set_up) {
            set_up = true;
            setup_st = spec->setup ? spec->setup(ctx, pt, &state) : DG_OK;
            if (setup_st != DG_OK) snprintf(setup_why, sizeof setup_why, "%s", dg_last_error());
        }
        if (setup_st != DG_OK) {
            row.status = failed_word(setup_st);
            row.note = setup_why;
            bench_emit(ctx, &row);
            continue;
        }
        bench_work work = {0};
        measure(ctx, spec, state, im, &row, &work);
        if (work.no_row) ctx->planned--;
        else if (work.finding) bench_emit_finding(ctx, &row);
        else bench_emit(ctx, &row);
        if (row.st.reps > 0 && !im->gpu) {
            rates[i].ms = row.st.median_ms;
            rates[i].work = pt->flops > 0 ? pt->flops : pt->bytes;
        }
        if (spec->release) spec->release(state, im, &work);
    }
    if (set_up && setup_st == DG_OK && spec->teardown) spec->teardown(state);
}

/* the one row of a sweep that cannot run here */
static void unavailable_row(bench_ctx *ctx, const bench_sweep_spec *spec, const char *why) {
    fprintf(stderr, "bench: %s: %s\n", spec->name, why);
    bench_point pt = {.name = spec->name};
    bench_row row = row_of(ctx, spec, &pt, &spec->impls[0]);
    row.status = "skipped";
    row.note = why;
    bench_emit(ctx, &row);
}

static dg_status list_spec(bench_ctx *ctx, const bench_sweep_spec *spec);

dg_status bench_run_spec(bench_ctx *ctx, const bench_sweep_spec *spec) {
    if (ctx->list) return list_spec(ctx, spec);
    char why[512];
    const char *unavailable = spec->unavailable ? spec->unavailable(ctx, why, sizeof why) : NULL;
    if (unavailable) {
        unavailable_row(ctx, spec, unavailable);
        return DG_OK;
    }
    bench_points pts = {0};
    spec->points(ctx, spec->arg, &pts);
    rate *rates = calloc((size_t)spec->n_impls, sizeof *rates);
    if (pts.oom || !rates) {
        free(pts.p);
        free(rates);
        return dg_fail(DG_ERR_OOM, "%s: out of host memory listing its rows", spec->name);
    }
    int rows = 0;
    for (int p = 0; p < pts.n; p++)
        for (int i = 0; i < spec->n_impls; i++) rows += row_applies(ctx, spec, &pts.p[p], &spec->impls[i]);
    bench_plan_rows(ctx, rows);
    for (int p = 0; p < pts.n && !bench_interrupted; p++) run_point(ctx, spec, &pts.p[p], rates);
    free(pts.p);
    free(rates);
    return DG_OK;
}

/* "name" into names (n bytes, ", "-separated) unless it is there already */
static void add_name(char *names, size_t n, const char *name) {
    size_t len = strlen(names), k = strlen(name);
    for (const char *p = names; (p = strstr(p, name)) != NULL; p += k)
        if ((p == names || (p - names >= 2 && p[-2] == ',')) && (p[k] == ',' || p[k] == '\0')) return;
    snprintf(names + len, n - len, "%s%s", len ? ", " : "", name);
}

/* bench --list SWEEP: the rows, then the cases and implementations */
static dg_status list_spec(bench_ctx *ctx, const bench_sweep_spec *spec) {
    char why[512], cases[4096] = "", impls[1024] = "";
    const char *unavailable = spec->unavailable ? spec->unavailable(ctx, why, sizeof why) : NULL;
    if (unavailable) {
        fprintf(ctx->list, "%s: no rows on this machine: %s\n", spec->name, unavailable);
        return DG_OK;
    }
    bench_points pts = {0};
    spec->points(ctx, spec->arg, &pts);
    if (pts.oom) {
        free(pts.p);
        return dg_fail(DG_ERR_OOM, "%s: out of host memory listing its rows", spec->name);
    }
    int rows = 0;
    for (int p = 0; p < pts.n; p++)
        for (int i = 0; i < spec->n_impls; i++) {
            const bench_point *pt = &pts.p[p];
            const bench_impl *im = &spec->impls[i];
            if (!row_applies(ctx, spec, pt, im)) continue;
            fprintf(ctx->list, "%s %s %s %s m=%lld n=%lld k=%lld batch=%lld%s%s\n", spec->name, pt->name, im->name,
                    im->gpu ? "gpu" : "cpu", (long long)pt->m, (long long)pt->n, (long long)pt->k,
                    (long long)pt->batch, im->transfer ? " transfer" : "", im->tf32 ? " tf32" : "");
            add_name(cases, sizeof cases, pt->name);
            add_name(impls, sizeof impls, im->name);
            rows++;
        }
    fprintf(ctx->list, "%s: %d rows; --case: %s; --impl: %s\n", spec->name, rows, rows ? cases : "-",
            rows ? impls : "-");
    free(pts.p);
    return DG_OK;
}
