/* energy_window.c: the energy window of energy_window.h. */
#include "runner/energy_window.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

#include "core/status.h"

double bench_energy_window_s(const bench_energy_meter *m) {
    double w = BENCH_ENERGY_PERIODS * bench_energy_period_s(m);
    return w > BENCH_ENERGY_MIN_S ? w : BENCH_ENERGY_MIN_S;
}

static bool rule_met(const bench_energy_meter *m, double seconds, double joules) {
    return seconds >= bench_energy_window_s(m) && joules >= BENCH_ENERGY_STEPS * bench_energy_least_j(m);
}

dg_status bench_energy_measure(bench_energy_meter *m, dg_backend *be, bench_fn fn, void *arg, double run_s,
                               double max_s, bench_energy *out, char *why, size_t n) {
    /* a batch of about BENCH_ENERGY_BATCH_S: runs of 10 us are queued a
     * thousand at a time, a run of a second alone */
    double per = run_s > 1e-7 ? BENCH_ENERGY_BATCH_S / run_s : 1e5;
    int batch = per < 1 ? 1 : per > 1e5 ? 100000 : (int)ceil(per);
    dg_status st = be ? dg_backend_sync(be) : DG_OK;
    if (st != DG_OK) return st;
    double j0, j = 0, t0 = bench_now_s(), t = t0;
    if (!bench_energy_read(m, &j0, why, n)) return DG_ERR_UNSUPPORTED;
    int runs = 0;
    while (!rule_met(m, t - t0, j - j0)) {
        if (t - t0 >= max_s || bench_interrupted) {
            snprintf(why, n, "%s: %.3g J in %.1f s, short of the rule (%d least steps in %.2f s)%s",
                     bench_energy_what(m), j - j0, t - t0, BENCH_ENERGY_STEPS, bench_energy_window_s(m),
                     bench_interrupted ? ": interrupted" : "");
            return DG_ERR_UNSUPPORTED;
        }
        for (int i = 0; i < batch; i++)
            if ((st = fn(arg)) != DG_OK) return st;
        if (be && (st = dg_backend_sync(be)) != DG_OK) return st;
        runs += batch;
        t = bench_now_s();
        if (!bench_energy_read(m, &j, why, n)) return DG_ERR_UNSUPPORTED;
    }
    *out = (bench_energy){.joules = (j - j0) / runs, .watts = (j - j0) / (t - t0), .seconds = t - t0, .runs = runs};
    return DG_OK;
}

bool bench_energy_idle_w(bench_energy_meter *m, double *watts, char *why, size_t n) {
    double j0, j, w = bench_energy_window_s(m);
    if (w < 1.0) w = 1.0; /* once per sweep: a second costs little */
    double t0 = bench_now_s(), t = t0;
    if (!bench_energy_read(m, &j0, why, n)) return false;
    struct timespec nap = {0, 2000000}; /* 2 ms between readings */
    do {
        nanosleep(&nap, NULL);
        t = bench_now_s();
        if (!bench_energy_read(m, &j, why, n)) return false;
    } while (t - t0 < w);
    *watts = (j - j0) / (t - t0);
    return true;
}
