/* energy_setup.c: the run's energy meters and their metadata lines
 * (energy_window.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "machine/gpu_monitor.h"
#include "runner/energy_window.h"
#include "runner/sweep.h"
#include <duograd/testing.h> /* dg_gpu_pci_bus_id */

bench_gpu_monitor *bench_gpu_monitor_for(dg_backend *gpu) {
    bench_gpu_monitor *m = NULL;
#ifdef DG_HAVE_CUDA
    char bus[64], why[256];
    if (gpu && dg_gpu_pci_bus_id(gpu, bus, sizeof bus) == DG_OK) m = bench_gpu_monitor_open(bus, why, sizeof why);
    if (gpu && !m) fprintf(stderr, "bench: no GPU clocks, throttling or energy: %s\n", why);
#else
    (void)gpu;
#endif
    return m;
}

/* "RAPL not readable: /sys/...: No such file" -> "RAPL not readable" */
static void short_reason(const char *why, char *out, size_t n) {
    size_t len = strcspn(why, ":");
    snprintf(out, n, "%.*s", (int)len, why);
}

static void meta_line(bench_ctx *ctx, const char *who, const bench_energy_meter *m, const char *why) {
    size_t len = strnlen(ctx->meta, sizeof ctx->meta);
    if (len + 1 >= sizeof ctx->meta) return;
    if (m)
        snprintf(ctx->meta + len, sizeof ctx->meta - len,
                 "# energy: %s: %s, updated every %.3g ms; a row's window: at least %.2f s and %d least steps "
                 "(%.0e J)\n", who, bench_energy_what(m), 1e3 * bench_energy_period_s(m), bench_energy_window_s(m),
                 BENCH_ENERGY_STEPS, bench_energy_least_j(m));
    else
        snprintf(ctx->meta + len, sizeof ctx->meta - len, "# energy: %s: none (%s)\n", who, why);
}

void bench_energy_open_all(bench_ctx *ctx) {
    ctx->energy_gpu = ctx->energy_cpu = NULL;
    if (ctx->no_energy) {
        size_t len = strnlen(ctx->meta, sizeof ctx->meta);
        if (len + 1 < sizeof ctx->meta)
            snprintf(ctx->meta + len, sizeof ctx->meta - len, "# energy: not measured (--no-energy)\n");
        return;
    }
    char why[700];
    if (ctx->gpu) {
        bench_gpu_monitor *mon = ctx->gpu_mon;
        if (mon) ctx->energy_gpu = bench_energy_open_nvml(&mon, 1, why, sizeof why);
        else snprintf(why, sizeof why, "NVML not available");
        if (!ctx->energy_gpu) short_reason(why, ctx->energy_gpu_short, sizeof ctx->energy_gpu_short);
        meta_line(ctx, "gpu", ctx->energy_gpu, why);
    }
    if (ctx->cpu) {
        ctx->energy_cpu = bench_energy_open_rapl(getenv("DG_POWERCAP_ROOT"), why, sizeof why);
        if (!ctx->energy_cpu) short_reason(why, ctx->energy_cpu_short, sizeof ctx->energy_cpu_short);
        meta_line(ctx, "cpu", ctx->energy_cpu, why);
    }
}

void bench_energy_close_all(bench_ctx *ctx) {
    bench_energy_close(ctx->energy_gpu);
    bench_energy_close(ctx->energy_cpu);
    ctx->energy_gpu = ctx->energy_cpu = NULL;
}

void bench_energy_idle_meta(bench_ctx *ctx, char *meta, size_t n, const char *when) {
    if (!ctx->energy_gpu && !ctx->energy_cpu) return;
    char part[2][128] = {"", ""}, why[256];
    bench_energy_meter *m[2] = {ctx->energy_gpu, ctx->energy_cpu};
    static const char *const who[2] = {"gpu", "cpu"};
    for (int i = 0; i < 2; i++) {
        double w;
        if (!m[i]) continue;
        if (bench_energy_idle_w(m[i], &w, why, sizeof why)) snprintf(part[i], sizeof part[i], "%s %.1f W", who[i], w);
        else snprintf(part[i], sizeof part[i], "%s ? (%.100s)", who[i], why);
    }
    size_t len = strnlen(meta, n);
    if (len + 1 >= n) return;
    snprintf(meta + len, n - len, "# energy idle at %s: %s%s%s\n", when, part[0], part[0][0] && part[1][0] ? ", " : "",
             part[1]);
}
