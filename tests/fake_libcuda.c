/* fake_libcuda.c: stand-ins for the NVIDIA driver library, libcuda.so.1,
 * which test_gpu_device puts first on LD_LIBRARY_PATH of gpu_probe, so
 * that dg_gpu_probe's "broken" answers are checked on a machine without a
 * GPU. Built twice (tests/CMakeLists.txt):
 * - FAKE_DRIVER_VERSION set: a driver for CUDA 11.0, older than any
 *   runtime this project builds with (cudaErrorInsufficientDriver);
 * - unset: a library that loads but is no driver, as the toolkit's stub. */
#ifdef FAKE_DRIVER_VERSION
int cuDriverGetVersion(int *version);
int cuInit(unsigned flags);

int cuDriverGetVersion(int *version) {
    *version = FAKE_DRIVER_VERSION;
    return 0; /* CUDA_SUCCESS */
}

int cuInit(unsigned flags) {
    (void)flags;
    return 0;
}
#else
int fake_libcuda_is_no_driver(void);

int fake_libcuda_is_no_driver(void) { return 1; }
#endif
