#include "cli/backends.h"

#include <string.h>

#include "core/status.h"
#include "cpu_backend/cpu_backend.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

dg_status bench_backend_open(const char *name, int threads, dg_backend **out) {
    *out = NULL;
    if (strcmp(name, "cpu") == 0) return dg_cpu_backend_new(out, threads);
    if (strcmp(name, "gpu") == 0) {
#ifdef DG_HAVE_CUDA
        return dg_gpu_backend_new(out, NULL);
#else
        return dg_fail(DG_ERR_NO_DEVICE, "built without CUDA: this bench has no GPU backend (rebuild with a CUDA toolkit, -DDG_CUDA=ON)");
#endif
    }
    return dg_fail(DG_ERR_INVALID, "unknown backend '%s' (expected cpu or gpu)", name);
}
