/* test_gpu_device.c: the GPU backend's view of its device. dg_gpu_probe
 * (absent vs broken; the cases without a GPU run on any machine, the
 * broken ones under fake drivers, fake_libcuda.c), and the facts and the
 * L2 flush the bench asks of a device (they skip where none answers, or
 * fail under DG_REQUIRE_GPU=1, gpu_util.h). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <duograd/testing.h>

#include "cpu_backend/cpu_backend.h"
#include "gpu_backend/gpu_backend.h"
#include "gpu_util.h"
#include "shell_util.h"
#include "test_util.h"

/* ---- dg_gpu_probe ---- */

static bool starts_with(const char *s, const char *head) { return strncmp(s, head, strlen(head)) == 0; }

Test(gpu_device, without_a_driver_library_the_probe_says_absent_and_names_it) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        dlclose(lib);
        cr_skip_test("libcuda.so.1 loads on this machine: the case without a driver cannot be checked");
    }
    char why[512];
    cr_assert_eq(dg_gpu_probe(why, sizeof why), DG_GPU_ABSENT, "%s", why);
    cr_assert(starts_with(why, "no CUDA device: the NVIDIA driver is not installed"), "%s", why);
    cr_assert(strstr(why, "libcuda.so.1"), "the reason must name the missing library: %s", why);
    /* the constructor gives the same words, with the status of an absent device */
    dg_backend *be = (dg_backend *)1;
    cr_assert_eq(dg_gpu_backend_new(&be, NULL), DG_ERR_NO_DEVICE, "%s", dg_last_error());
    cr_assert_null(be);
    cr_assert_str_eq(dg_last_error(), why);
    /* no room for the reason: the state all the same */
    cr_assert_eq(dg_gpu_probe(NULL, 0), DG_GPU_ABSENT);
    char tiny[4] = "xyz";
    cr_assert_eq(dg_gpu_probe(tiny, sizeof tiny), DG_GPU_ABSENT);
    cr_assert_str_eq(tiny, "no ");
}

/* gpu_probe's line with the fake driver of dir first on LD_LIBRARY_PATH;
 * its exit code */
static int probe_under(const char *dir, char *line, size_t n) {
    if (access(DG_GPU_PROBE, X_OK) != 0 || access(dir, R_OK) != 0)
        cr_skip_test("%s or %s is missing (a packed copy of the suite has no fake drivers)", DG_GPU_PROBE, dir);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "LD_LIBRARY_PATH='%s' '%s'", dir, DG_GPU_PROBE);
    return sh(cmd, line, n);
}

/* the runtime answers cudaErrorInsufficientDriver both without a driver
 * and with an outdated one: the second is broken, and says both versions */
Test(gpu_device, an_outdated_driver_is_broken_not_absent) {
    char line[1024];
    int rc = probe_under(DG_FAKE_OLD_DRIVER_DIR, line, sizeof line);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, line);
    cr_assert(starts_with(line, "broken: CUDA device broken: the driver supports CUDA 11.0, older than this runtime's "),
              "%s", line);
    cr_assert(strstr(line, "cudaErrorInsufficientDriver"), "%s", line);
}

Test(gpu_device, a_library_that_is_no_driver_is_broken_not_absent) {
    char line[1024];
    int rc = probe_under(DG_FAKE_STUB_DRIVER_DIR, line, sizeof line);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, line);
    cr_assert(starts_with(line, "broken: CUDA device broken: libcuda.so.1 loads but reports no driver version"), "%s",
              line);
}

/* Where no device is usable, a GPU test of this suite, run again by itself,
 * skips with the probe's reason, and under DG_REQUIRE_GPU=1 fails with it
 * (gpu_util.h's own failure, not only skip_report.c's count). */
Test(gpu_device, a_missing_gpu_skips_the_test_or_fails_it_when_required) {
    char why[512];
    if (dg_gpu_probe(why, sizeof why) == DG_GPU_PRESENT) cr_skip_test("a CUDA device answered: nothing to check here");
    char self[1024], cmd[2048], out[8192];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(len, 0);
    self[len] = '\0';
    const char *filter = "--filter gpu_device/l2_size_is_plausible";
    /* BXFI_MAP would make the child think it is this worker's sandbox */
    snprintf(cmd, sizeof cmd, "env -u BXFI_MAP DG_REQUIRE_GPU=0 '%s' %s", self, filter);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "Skipped: 1 of 1 tests: ") && strstr(out, why), "%s", out);
    snprintf(cmd, sizeof cmd, "env -u BXFI_MAP DG_REQUIRE_GPU=1 '%s' %s", self, filter);
    cr_assert_eq(sh(cmd, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "DG_REQUIRE_GPU=1, but ") && strstr(out, why), "%s", out);
    cr_assert(strstr(out, "Failing: 1 "), "%s", out);
}

/* with a device the probe's reason counts them; the constructor agrees */
Test(gpu_device, a_present_device_is_counted) {
    gpu_usable_or_skip();
    char why[512];
    cr_assert_eq(dg_gpu_probe(why, sizeof why), DG_GPU_PRESENT);
    char want[64];
    int count = dg_gpu_device_count();
    snprintf(want, sizeof want, "%d CUDA device%s", count, count == 1 ? "" : "s");
    cr_assert_str_eq(why, want);
    dg_backend_free(gpu_open_or_skip(NULL));
}

/* ---- device facts and the L2 flush ---- */

Test(gpu_device, the_device_calls_refuse_a_backend_that_is_not_a_gpu) {
    dg_backend *cpu;
    ASSERT_OK(dg_cpu_backend_new(&cpu, 1));
    cr_assert_eq(dg_gpu_l2_bytes(cpu), 0);
    cr_assert_eq(dg_gpu_l2_bytes(NULL), 0);
    cr_assert_eq(dg_gpu_flush_l2(cpu), DG_ERR_INVALID);
    cr_assert(strstr(dg_last_error(), "not a GPU backend"), "%s", dg_last_error());
    cr_assert_eq(dg_gpu_flush_l2(NULL), DG_ERR_INVALID);
    char id[32] = "";
    cr_assert_eq(dg_gpu_pci_bus_id(cpu, id, sizeof id), DG_ERR_INVALID);
    cr_assert_str_empty(id);
    dg_backend_free(cpu);
}

/* every CUDA GPU since Kepler has between 256 KiB and 1 GiB of L2 (an
 * H100 has 50 MiB) */
Test(gpu_device, l2_size_is_plausible) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    size_t l2 = dg_gpu_l2_bytes(gpu);
    cr_log_info("L2: %zu bytes", l2);
    cr_assert(l2 >= ((size_t)256 << 10) && l2 <= ((size_t)1 << 30), "L2 of %zu bytes", l2);
    dg_backend_free(gpu);
}

/* A flush queued between a copy and its read-back leaves the copy's result
 * as it was, however often it runs (the buffer is made once). Ten flushes
 * between two events on the backend's stream take at least the time their
 * writes need at 20 TB/s (faster than any device's memory): a flush queued
 * elsewhere, or smaller than L2, would leave the events microseconds apart. */
Test(gpu_device, flush_is_queued_on_the_backend_stream_and_changes_no_result) {
    enum { N = 1 << 20, FLUSHES = 10 };
    dg_backend *gpu = gpu_open_or_skip(NULL);
    static float host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = (float)i * 0.5f - 7.0f;
    void *src, *dst;
    ASSERT_OK(dg_backend_alloc(gpu, sizeof host, &src));
    ASSERT_OK(dg_backend_alloc(gpu, sizeof host, &dst));
    ASSERT_OK(dg_backend_upload(gpu, src, host, sizeof host));
    for (int round = 0; round < 3; round++) {
        memset(back, 0, sizeof back);
        ASSERT_OK(dg_backend_upload(gpu, dst, back, sizeof back));
        ASSERT_OK(dg_gpu_copy(gpu, dst, src, sizeof host));
        ASSERT_OK(dg_gpu_flush_l2(gpu));
        ASSERT_OK(dg_backend_download(gpu, back, dst, sizeof back));
        cr_assert(memcmp(back, host, sizeof host) == 0, "round %d: the copy's result changed", round);
    }
    dg_event *start, *stop;
    ASSERT_OK(dg_event_new(gpu, &start));
    ASSERT_OK(dg_event_new(gpu, &stop));
    ASSERT_OK(dg_event_record(start));
    for (int i = 0; i < FLUSHES; i++) ASSERT_OK(dg_gpu_flush_l2(gpu));
    ASSERT_OK(dg_event_record(stop));
    double ms = 0;
    ASSERT_OK(dg_event_elapsed(start, stop, &ms));
    double floor_ms = FLUSHES * 2.0 * (double)dg_gpu_l2_bytes(gpu) / 20e12 * 1e3;
    cr_log_info("%d flushes of 2 x %zu bytes: %.3f ms", FLUSHES, dg_gpu_l2_bytes(gpu), ms);
    cr_assert(ms >= floor_ms, "%d flushes took %.4f ms between events on the stream, less than %.4f ms", FLUSHES, ms,
              floor_ms);
    dg_event_free(start);
    dg_event_free(stop);
    dg_backend_release(gpu, src);
    dg_backend_release(gpu, dst);
    dg_backend_free(gpu);
}

/* "0000:41:00.0": domain:bus:device.function in hex, what NVML takes */
Test(gpu_device, pci_bus_id_is_well_formed_and_bounded) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    char id[64];
    ASSERT_OK(dg_gpu_pci_bus_id(gpu, id, sizeof id));
    cr_log_info("PCI bus id %s", id);
    unsigned dom, bus, dev, fn;
    char tail;
    cr_assert_eq(sscanf(id, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail), 4, "malformed bus id \"%s\"", id);
    cr_assert(bus <= 0xff && dev <= 0x1f && fn <= 0x7, "out of PCI ranges: \"%s\"", id);
    /* a buffer one byte short is refused and left alone; an exact one fits */
    size_t len = strlen(id);
    char small[64] = "untouched";
    cr_assert_eq(dg_gpu_pci_bus_id(gpu, small, len), DG_ERR_INVALID);
    cr_assert_str_eq(small, "untouched");
    ASSERT_OK(dg_gpu_pci_bus_id(gpu, small, len + 1));
    cr_assert_str_eq(small, id);
    dg_backend_free(gpu);
}

/* after a sticky fault the device calls fail at once, naming it; the L2
 * size, read at creation, is still known */
Test(gpu_device, after_a_fault_flush_and_bus_id_fail_at_once) {
    dg_backend *gpu = gpu_open_or_skip(NULL);
    size_t l2 = dg_gpu_l2_bytes(gpu);
    cr_assert_eq(dg_gpu_inject_fault(gpu), DG_ERR_BACKEND);
    cr_assert_eq(dg_gpu_flush_l2(gpu), DG_ERR_BACKEND);
    cr_assert(strstr(dg_last_error(), "unusable since its fault"), "%s", dg_last_error());
    char id[64];
    cr_assert_eq(dg_gpu_pci_bus_id(gpu, id, sizeof id), DG_ERR_BACKEND);
    cr_assert(strstr(dg_last_error(), "unusable since its fault"), "%s", dg_last_error());
    cr_assert_eq(dg_gpu_l2_bytes(gpu), l2);
    char why[512];
    cr_assert_eq(dg_gpu_probe(why, sizeof why), DG_GPU_BROKEN, "%s", why);
    cr_assert(strstr(why, "faulted earlier in this process"), "%s", why);
    dg_backend_free(gpu);
}
