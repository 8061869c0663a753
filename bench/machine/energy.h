/* energy.h: joules from the hardware's own energy counters, never from a
 * model. The GPU board's through NVML (nvmlDeviceGetTotalEnergyConsumption:
 * millijoules since the driver loaded, summed over the devices a meter
 * covers); the CPU packages' and their DRAM's through the kernel's
 * powercap interface to RAPL (ROOT/intel-rapl:N/energy_uj for package N,
 * ROOT/intel-rapl:N:M/energy_uj where its `name` is "dram": microjoules,
 * wrapping to 0 past max_energy_range_uj). The rest of the host (fans,
 * disks, the power supply's losses) is in neither.
 *
 * A meter sums its domains and unwraps each, so a reading is the joules
 * since the meter was opened, as long as it is read more often than the
 * fastest domain wraps (minutes at full power). A counter is updated by
 * the hardware at its own period, not at every read: opening a meter
 * measures that period (the mean time between successive changes, over up
 * to 1 s) and refuses a counter that does not change within that second;
 * the rule for a row's figure (runner/energy_window.h) builds on it. */
#ifndef DG_BENCH_ENERGY_H
#define DG_BENCH_ENERGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bench_gpu_monitor;
typedef struct bench_energy_meter bench_energy_meter;

/* RAPL's package and DRAM domains under root (NULL: /sys/class/powercap).
 * NULL with why ("RAPL not readable: ...": no such folder, no package
 * domain, a counter the process may not read, one that did not advance)
 * when any part is missing: a meter covers every package or none. */
bench_energy_meter *bench_energy_open_rapl(const char *root, char *why, size_t n);
/* The total-energy counters of mons[0..n_mons) (NVML handles of the
 * devices a row uses). NULL with why ("NVML energy not available: ...")
 * where a driver lacks the counter or refuses it. */
bench_energy_meter *bench_energy_open_nvml(struct bench_gpu_monitor *const *mons, int n_mons, char *why, size_t n);
/* Joules since open, every domain read once; false (with why) when a
 * counter could not be read (then *joules is unchanged). */
bool   bench_energy_read(bench_energy_meter *m, double *joules, char *why, size_t n);
/* What the meter sums, for the metadata and notes: "RAPL: package-0,
 * dram-0" or "NVML total energy: 1 GPU". */
const char *bench_energy_what(const bench_energy_meter *m);
/* The counters' update period measured at open, in seconds, and their
 * least step in joules (1e-6 RAPL, 1e-3 NVML). */
double bench_energy_period_s(const bench_energy_meter *m);
double bench_energy_least_j(const bench_energy_meter *m);
void   bench_energy_close(bench_energy_meter *m);

/* How far a counter that wraps to 0 past range (0: never wraps) went from
 * last to now: now - last, or through the wrap when now < last. */
uint64_t bench_energy_advance(uint64_t last, uint64_t now, uint64_t range);

#endif
