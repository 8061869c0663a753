/* gpu_monitor.h: the GPU's clocks, temperature, power and throttling, read
 * through NVML. libnvidia-ml is loaded at run time (dlopen), never linked:
 * a machine without the driver builds and runs the bench all the same. */
#ifndef DG_BENCH_GPU_MONITOR_H
#define DG_BENCH_GPU_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bench_gpu_monitor bench_gpu_monitor;

/* The NVML device with PCI bus id pci_bus_id ("0000:41:00.0", as
 * dg_gpu_pci_bus_id gives it: CUDA's device numbering and NVML's can
 * differ). NULL with why = "NVML not available: ..." when the library, its
 * initialisation or the device is missing. */
bench_gpu_monitor *bench_gpu_monitor_open(const char *pci_bus_id, char *why, size_t n);
/* Appends to the text in buf (NUL-terminated, n bytes in all) a line
 * "# gpu at WHEN: sm 1980 MHz, mem 2619 MHz, 41 C, 120 W, throttle: none";
 * a reading NVML refuses shows as "?"; m NULL: nothing. */
void bench_gpu_monitor_snapshot(bench_gpu_monitor *m, char *buf, size_t n, const char *when);
/* Whether the clocks are held down now (power cap, thermal, hardware
 * slowdown, power brake, sync boost); why names the reasons. One NVML call,
 * cheap enough after every row. m NULL: false. */
bool bench_gpu_monitor_throttled(bench_gpu_monitor *m, char *why, size_t n);
/* The board's energy since the driver loaded, in millijoules
 * (nvmlDeviceGetTotalEnergyConsumption, Volta and later); false with why
 * where the library lacks it, the device refuses it or m is NULL. */
bool bench_gpu_monitor_energy_mj(bench_gpu_monitor *m, uint64_t *mj, char *why, size_t n);
/* m NULL: nothing */
void bench_gpu_monitor_close(bench_gpu_monitor *m);

/* The clock-event reason bits of NVML (nvmlClocksEventReason*) in words:
 * "sw power cap, hw thermal", "none", and the bits that are settings, not
 * throttling, in parentheses: "none (gpu idle)". Returns whether any
 * throttling bit is set. */
bool bench_gpu_reasons_text(uint64_t reasons, char *buf, size_t n);

#endif
