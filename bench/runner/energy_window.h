/* energy_window.h: a row's energy, measured in a window of its own after
 * its timed runs (timing.h), from a meter of machine/energy.h.
 *
 * The rule. Reading a counter right after the work is synchronised gives
 * the energy up to the counter's last update, at most one update period
 * earlier; at each end of a window the figure is off by at most the power
 * times one period, and the two ends' errors have opposite signs. So the
 * window runs the work, in batches of about BENCH_ENERGY_BATCH_S between
 * synchronisations (short runs queued back to back, as when timed, so the
 * device does not idle between them), until it has lasted at least
 * BENCH_ENERGY_PERIODS update periods and BENCH_ENERGY_MIN_S, and the
 * counter has advanced by at least BENCH_ENERGY_STEPS of its least steps:
 * an error of at most 1/BENCH_ENERGY_PERIODS (5%) of the window's energy.
 * A window that reaches BENCH_ENERGY_MAX_S without meeting the rule (a
 * counter that stalled) reports no figure. */
#ifndef DG_BENCH_ENERGY_WINDOW_H
#define DG_BENCH_ENERGY_WINDOW_H

#include <stdbool.h>
#include <stddef.h>

#include "machine/energy.h"
#include "runner/timing.h"

#define BENCH_ENERGY_BATCH_S 0.01
#define BENCH_ENERGY_PERIODS 20
#define BENCH_ENERGY_MIN_S   0.1
#define BENCH_ENERGY_STEPS   1000
#define BENCH_ENERGY_MAX_S   10.0

typedef struct bench_energy {
    double joules;    /* per run                          */
    double watts;     /* mean power over the window       */
    double seconds;   /* the window                       */
    int    runs;      /* runs inside it                   */
} bench_energy;

/* The window's length the rule asks of m: max(BENCH_ENERGY_MIN_S,
 * BENCH_ENERGY_PERIODS update periods). */
double bench_energy_window_s(const bench_energy_meter *m);

/* Runs fn(arg) (queued on be; NULL: host work) in batches sized from
 * run_s, its timed median in seconds, reading m before and after, by the
 * rule above. DG_OK with *out, or DG_ERR_UNSUPPORTED with why: a counter
 * that could not be read, or a window of max_s (the bench:
 * BENCH_ENERGY_MAX_S) that did not meet the rule (a counter that
 * stalled). A failure of fn or of the
 * synchronisation is returned as it is (its message set); an interrupt
 * (bench_interrupted) ends the window with DG_ERR_UNSUPPORTED. */
dg_status bench_energy_measure(bench_energy_meter *m, dg_backend *be, bench_fn fn, void *arg, double run_s,
                               double max_s, bench_energy *out, char *why, size_t n);

/* Idle power: m read over a window of bench_energy_window_s, and at
 * least a second, with nothing run; false with why when it cannot be read. */
bool bench_energy_idle_w(bench_energy_meter *m, double *watts, char *why, size_t n);

/* The run's meters: the GPU's (ctx->gpu's NVML device) and the CPU's
 * (RAPL under $DG_POWERCAP_ROOT, default /sys/class/powercap), each
 * where it can be read, unless ctx->no_energy; a "# energy:" line of the
 * metadata names each meter, its update period and the rule, or why there
 * is none. */
struct bench_ctx;
struct bench_gpu_monitor;
/* NVML's view of the GPU backend gpu's device (clocks, throttling,
 * energy): NULL where there is none (said on stderr), or gpu NULL. */
struct bench_gpu_monitor *bench_gpu_monitor_for(dg_backend *gpu);
void bench_energy_open_all(struct bench_ctx *ctx);
void bench_energy_close_all(struct bench_ctx *ctx);
/* Appends "# energy idle at WHEN: gpu 74.1 W, cpu 31.0 W" to meta (n
 * bytes in all): each meter's idle power, measured now; nothing when there
 * is no meter. */
void bench_energy_idle_meta(struct bench_ctx *ctx, char *meta, size_t n, const char *when);

#endif
