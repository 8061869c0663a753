/* gpu_cublas.cu: cuBLAS, loaded when the first GPU backend is made (dlopen
 * of libcublas.so.<the headers' major>), not linked, as NCCL is
 * (gpu_collective.cu): libduograd.so and the bench then need none of
 * NVIDIA's libraries to load, so a CUDA build runs on the CPU on a machine
 * without them (the CUDA runtime is linked statically and finds the driver
 * itself; dg_gpu_backend_new reports what is missing). Only cublas_v2.h is
 * needed at build time. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gpu_common.cuh"

dg__cublas_api dg__cublas;

/* the name a cuBLAS macro stands for (cublasCreate -> "cublasCreate_v2") */
#define DG_STR_(x) #x
#define DG_STR(x)  DG_STR_(x)

/* NULL when every entry point is resolved, else why not */
static const char *load_cublas(void) {
    static char why[384];
    char name[32];
    snprintf(name, sizeof name, "libcublas.so.%d", CUBLAS_VER_MAJOR);
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        snprintf(why, sizeof why, "cuBLAS cannot be loaded (%s): the GPU backend needs %s on the library path",
                 err ? err : name, name);
        return why;
    }
    dg__cublas_api api;
    bool ok = true;
#define DG_CUBLAS_ENTRY(field, fn)                                                       \
    api.field = reinterpret_cast<decltype(api.field)>(dlsym(lib, DG_STR(fn)));          \
    ok = ok && api.field
    DG_CUBLAS_ENTRY(create, cublasCreate);
    DG_CUBLAS_ENTRY(destroy, cublasDestroy);
    DG_CUBLAS_ENTRY(set_stream, cublasSetStream);
    DG_CUBLAS_ENTRY(set_workspace, cublasSetWorkspace);
    DG_CUBLAS_ENTRY(set_math_mode, cublasSetMathMode);
    DG_CUBLAS_ENTRY(get_version, cublasGetVersion);
    DG_CUBLAS_ENTRY(status_name, cublasGetStatusName);
    DG_CUBLAS_ENTRY(status_string, cublasGetStatusString);
    DG_CUBLAS_ENTRY(sgemm, cublasSgemm);
    DG_CUBLAS_ENTRY(sgemm_strided_batched, cublasSgemmStridedBatched);
    DG_CUBLAS_ENTRY(gemm_strided_batched_ex, cublasGemmStridedBatchedEx);
#undef DG_CUBLAS_ENTRY
    if (!ok) {
        dlclose(lib);
        snprintf(why, sizeof why, "%s lacks an entry point duograd calls", name);
        return why;
    }
    dg__cublas = api; /* kept loaded for the process: handles may outlive any one backend */
    return NULL;
}

dg_status dg__cublas_load(void) {
    static const char *why = load_cublas(); /* once per process; C++ makes it thread-safe */
    return why ? dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s", why) : DG_OK;
}
