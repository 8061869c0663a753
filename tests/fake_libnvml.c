/* fake_libnvml.c: a stand-in for libnvidia-ml.so.1 with one device at
 * 0000:00:06.0 that reports fixed, non-zero readings (and an energy
 * counter of a steady 300 W), so test_env checks
 * that bench's GPU monitor prints what NVML answered (it once printed zeros
 * while the real library answered 345 MHz) on a machine without a GPU.
 * The test loads it by path first; bench's dlopen of the soname then finds
 * it already loaded. */
#include <string.h>
#include <time.h>

typedef struct fake_device { int unused; } fake_device;
static fake_device the_device;

int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int rc);
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, fake_device **dev);
int nvmlDeviceGetClockInfo(fake_device *dev, int type, unsigned *mhz);
int nvmlDeviceGetTemperature(fake_device *dev, int sensor, unsigned *celsius);
int nvmlDeviceGetPowerUsage(fake_device *dev, unsigned *milliwatts);
int nvmlDeviceGetCurrentClocksEventReasons(fake_device *dev, unsigned long long *reasons);
int nvmlDeviceGetTotalEnergyConsumption(fake_device *dev, unsigned long long *millijoules);

enum { NVML_SUCCESS = 0, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_FOUND = 6 };

int nvmlInit_v2(void) { return NVML_SUCCESS; }
int nvmlShutdown(void) { return NVML_SUCCESS; }
const char *nvmlErrorString(int rc) { return rc == NVML_ERROR_NOT_FOUND ? "Not Found" : "fake error"; }

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, fake_device **dev) {
    if (strcmp(bus_id, "0000:00:06.0") != 0) return NVML_ERROR_NOT_FOUND;
    *dev = &the_device;
    return NVML_SUCCESS;
}

int nvmlDeviceGetClockInfo(fake_device *dev, int type, unsigned *mhz) {
    if (dev != &the_device || (type != 1 && type != 2)) return NVML_ERROR_INVALID_ARGUMENT;
    *mhz = type == 1 ? 1980 : 2619; /* NVML_CLOCK_SM, NVML_CLOCK_MEM */
    return NVML_SUCCESS;
}

int nvmlDeviceGetTemperature(fake_device *dev, int sensor, unsigned *celsius) {
    if (dev != &the_device || sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    *celsius = 38;
    return NVML_SUCCESS;
}

int nvmlDeviceGetPowerUsage(fake_device *dev, unsigned *milliwatts) {
    if (dev != &the_device) return NVML_ERROR_INVALID_ARGUMENT;
    *milliwatts = 204500;
    return NVML_SUCCESS;
}

int nvmlDeviceGetCurrentClocksEventReasons(fake_device *dev, unsigned long long *reasons) {
    if (dev != &the_device) return NVML_ERROR_INVALID_ARGUMENT;
    *reasons = 0x4 | 0x1; /* sw power cap, gpu idle */
    return NVML_SUCCESS;
}

/* A board drawing 300 W whose counter the driver updates every 10 ms: 3000
 * mJ per update, from the monotonic clock (test_energy checks the meter's
 * period and watts against these). */
int nvmlDeviceGetTotalEnergyConsumption(fake_device *dev, unsigned long long *millijoules) {
    if (dev != &the_device) return NVML_ERROR_INVALID_ARGUMENT;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    unsigned long long updates = (unsigned long long)ts.tv_sec * 100 + (unsigned long long)ts.tv_nsec / 10000000;
    *millijoules = updates * 3000;
    return NVML_SUCCESS;
}
