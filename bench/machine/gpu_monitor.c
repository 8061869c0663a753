#include "machine/gpu_monitor.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The few NVML declarations used, from NVIDIA's documented API (nvml.h is
 * not installed with the toolkit here, and the library is loaded at run
 * time anyway). */
typedef int nvml_return;                   /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_device_st *nvml_device; /* nvmlDevice_t                   */
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_TEMPERATURE_GPU = 0 };

typedef nvml_return (*nvml_init_fn)(void);
typedef const char *(*nvml_error_string_fn)(nvml_return);
typedef nvml_return (*nvml_by_bus_id_fn)(const char *bus_id, nvml_device *dev);
typedef nvml_return (*nvml_clock_fn)(nvml_device dev, int type, unsigned *mhz);
typedef nvml_return (*nvml_temperature_fn)(nvml_device dev, int sensor, unsigned *celsius);
typedef nvml_return (*nvml_power_fn)(nvml_device dev, unsigned *milliwatts);
typedef nvml_return (*nvml_reasons_fn)(nvml_device dev, unsigned long long *reasons);
typedef nvml_return (*nvml_energy_fn)(nvml_device dev, unsigned long long *millijoules);

struct bench_gpu_monitor {
    void                *lib;
    nvml_init_fn         shutdown;
    nvml_clock_fn        clock;        /* NULL where the library lacks one */
    nvml_temperature_fn  temperature;
    nvml_power_fn        power;
    nvml_reasons_fn      reasons;
    nvml_energy_fn       energy;       /* Volta and later */
    nvml_error_string_fn error_string;
    nvml_device          dev;
};

/* nvmlClocksEventReason* bits (named ...ThrottleReason* before driver 535) */
static const struct {
    uint64_t    bit;
    const char *name;
    bool        throttles; /* false: a setting or an idle GPU, not a slowdown */
} reason_names[] = {
    {0x1, "gpu idle", false},
    {0x2, "applications clocks setting", false},
    {0x4, "sw power cap", true},
    {0x8, "hw slowdown", true},
    {0x10, "sync boost", true},
    {0x20, "sw thermal", true},
    {0x40, "hw thermal", true},
    {0x80, "power brake", true},
    {0x100, "display clock setting", false},
};

bool bench_gpu_reasons_text(uint64_t reasons, char *buf, size_t n) {
    char slow[256] = "", settings[256] = "";
    uint64_t known = 0;
    for (size_t i = 0; i < sizeof reason_names / sizeof reason_names[0]; i++) {
        known |= reason_names[i].bit;
        if (!(reasons & reason_names[i].bit)) continue;
        char *list = reason_names[i].throttles ? slow : settings;
        size_t len = strlen(list);
        snprintf(list + len, sizeof slow - len, "%s%s", len ? ", " : "", reason_names[i].name);
    }
    if (reasons & ~known) {
        size_t len = strlen(settings);
        snprintf(settings + len, sizeof settings - len, "%sother bits 0x%llx", len ? ", " : "",
                 (unsigned long long)(reasons & ~known));
    }
    snprintf(buf, n, "%s%s%s%s", slow[0] ? slow : "none", settings[0] ? " (" : "", settings,
             settings[0] ? ")" : "");
    return slow[0] != '\0';
}

bench_gpu_monitor *bench_gpu_monitor_open(const char *pci_bus_id, char *why, size_t n) {
    if (!pci_bus_id || !*pci_bus_id) {
        snprintf(why, n, "NVML not available: no PCI bus id to find the device by");
        return NULL;
    }
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        snprintf(why, n, "NVML not available: %s", err ? err : "dlopen libnvidia-ml.so.1 failed");
        return NULL;
    }
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_init_fn shutdown = (nvml_init_fn)dlsym(lib, "nvmlShutdown");
    nvml_error_string_fn error_string = (nvml_error_string_fn)dlsym(lib, "nvmlErrorString");
    nvml_by_bus_id_fn by_bus_id = (nvml_by_bus_id_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml_reasons_fn reasons = (nvml_reasons_fn)dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!reasons) reasons = (nvml_reasons_fn)dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (!init || !shutdown || !error_string || !by_bus_id || !reasons) {
        snprintf(why, n, "NVML not available: libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlShutdown, nvmlErrorString, "
                         "nvmlDeviceGetHandleByPciBusId_v2 or the clock-event reasons");
        dlclose(lib);
        return NULL;
    }
    nvml_return rc = init();
    if (rc != 0) {
        snprintf(why, n, "NVML not available: nvmlInit: %s", error_string(rc));
        dlclose(lib);
        return NULL;
    }
    nvml_device dev;
    rc = by_bus_id(pci_bus_id, &dev);
    bench_gpu_monitor *m = rc == 0 ? malloc(sizeof *m) : NULL;
    if (!m) {
        snprintf(why, n, "NVML not available: device %s: %s", pci_bus_id,
                 rc != 0 ? error_string(rc) : "out of host memory");
        shutdown();
        dlclose(lib);
        return NULL;
    }
    *m = (bench_gpu_monitor){
        .lib = lib,
        .shutdown = shutdown,
        .clock = (nvml_clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo"),
        .temperature = (nvml_temperature_fn)dlsym(lib, "nvmlDeviceGetTemperature"),
        .power = (nvml_power_fn)dlsym(lib, "nvmlDeviceGetPowerUsage"),
        .reasons = reasons,
        .energy = (nvml_energy_fn)dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"),
        .error_string = error_string,
        .dev = dev,
    };
    return m;
}

/* "1980 MHz", or "?" where NVML refuses */
static void reading(char *out, size_t n, bool ok, double v, const char *unit) {
    if (ok) snprintf(out, n, "%.0f %s", v, unit);
    else snprintf(out, n, "?");
}

void bench_gpu_monitor_snapshot(bench_gpu_monitor *m, char *buf, size_t n, const char *when) {
    if (!m) return;
    unsigned sm = 0, mem = 0, temp = 0, mw = 0;
    unsigned long long bits = 0;
    char s_sm[32], s_mem[32], s_temp[32], s_pow[32], s_why[320];
    /* each call before its value is read: inside one argument list the
     * order of evaluation is unspecified, and GCC read the zeros first */
    bool ok_sm = m->clock && m->clock(m->dev, NVML_CLOCK_SM, &sm) == 0;
    bool ok_mem = m->clock && m->clock(m->dev, NVML_CLOCK_MEM, &mem) == 0;
    bool ok_temp = m->temperature && m->temperature(m->dev, NVML_TEMPERATURE_GPU, &temp) == 0;
    bool ok_pow = m->power && m->power(m->dev, &mw) == 0;
    reading(s_sm, sizeof s_sm, ok_sm, sm, "MHz");
    reading(s_mem, sizeof s_mem, ok_mem, mem, "MHz");
    reading(s_temp, sizeof s_temp, ok_temp, temp, "C");
    reading(s_pow, sizeof s_pow, ok_pow, mw / 1000.0, "W");
    if (m->reasons(m->dev, &bits) == 0) bench_gpu_reasons_text(bits, s_why, sizeof s_why);
    else snprintf(s_why, sizeof s_why, "?");
    size_t len = strnlen(buf, n);
    if (len + 1 >= n) return;
    snprintf(buf + len, n - len, "# gpu at %s: sm %s, mem %s, %s, %s, throttle: %s\n", when, s_sm, s_mem, s_temp,
             s_pow, s_why);
    /* a line cut by the end of buf still ends the '#' block */
    len = strlen(buf);
    if (len > 0 && buf[len - 1] != '\n') buf[len - 1] = '\n';
}

bool bench_gpu_monitor_throttled(bench_gpu_monitor *m, char *why, size_t n) {
    unsigned long long bits = 0;
    if (!m || m->reasons(m->dev, &bits) != 0) {
        if (n) why[0] = '\0';
        return false;
    }
    return bench_gpu_reasons_text(bits, why, n);
}

bool bench_gpu_monitor_energy_mj(bench_gpu_monitor *m, uint64_t *mj, char *why, size_t n) {
    if (!m) {
        snprintf(why, n, "no NVML device");
        return false;
    }
    if (!m->energy) {
        snprintf(why, n, "libnvidia-ml.so.1 lacks nvmlDeviceGetTotalEnergyConsumption");
        return false;
    }
    unsigned long long v = 0;
    nvml_return rc = m->energy(m->dev, &v);
    if (rc != 0) {
        snprintf(why, n, "nvmlDeviceGetTotalEnergyConsumption: %s", m->error_string(rc));
        return false;
    }
    *mj = v;
    return true;
}

void bench_gpu_monitor_close(bench_gpu_monitor *m) {
    if (!m) return;
    m->shutdown();
    dlclose(m->lib);
    free(m);
}
