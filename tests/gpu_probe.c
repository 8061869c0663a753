/* gpu_probe: prints what dg_gpu_probe finds, "present|absent|broken: why",
 * and exits 0 only where a usable CUDA device answers. test_gpu_device runs
 * it under fake drivers (fake_libcuda.c); scripts/gpu-run.sh puts its line
 * at the top of the GPU machine's summary. */
#include <stdio.h>

#include "gpu_backend/gpu_backend.h"

int main(void) {
    static const char *const names[] = {"present", "absent", "broken"};
    char why[512];
    dg_gpu_state s = dg_gpu_probe(why, sizeof why);
    printf("%s: %s\n", names[s], why);
    return s == DG_GPU_PRESENT ? 0 : 1;
}
