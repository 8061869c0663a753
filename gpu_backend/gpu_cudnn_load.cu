/* gpu_cudnn_load.cu: cuDNN, loaded when a plan first asks for its
 * convolutions (dlopen of libcudnn.so.9), not linked, as cuBLAS
 * (gpu_cublas.cu) and NCCL (gpu_collective.cu) are: a CUDA build then
 * runs everywhere else without it, and where it is missing only the plans
 * that name it are refused, saying why. Only cudnn.h is needed at build
 * time (DG_HAVE_CUDNN). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gpu_common.cuh"
#include "gpu_cudnn_api.cuh"

/* what the loader opens: libcudnn.so.9 unless a test named another first */
static char cudnn_soname[128] = "libcudnn.so.9";

void dg_gpu_set_cudnn_library(const char *soname) {
    if (soname) snprintf(cudnn_soname, sizeof cudnn_soname, "%s", soname);
}

#ifdef DG_HAVE_CUDNN
dg__cudnn_api dg__cudnn;

/* the name a function stands for */
#define DG_STR_(x) #x
#define DG_STR(x)  DG_STR_(x)

/* NULL when every entry point is resolved, else why not; version: the
 * loaded library's cudnnGetVersion() */
static const char *load_cudnn(size_t *version) {
    static char why[512];
    void *lib = dlopen(cudnn_soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        snprintf(why, sizeof why, "cuDNN cannot be loaded (%s): DG_CONV_VENDOR on the GPU needs %s on the library "
                 "path (LD_LIBRARY_PATH); PyTorch's installation carries it in site-packages/nvidia/cudnn/lib",
                 err ? err : cudnn_soname, cudnn_soname);
        return why;
    }
    dg__cudnn_api api;
    const char *missing = NULL; /* the first entry point not found */
#define DG_CUDNN_ENTRY(field, fn)                                               \
    api.field = reinterpret_cast<decltype(api.field)>(dlsym(lib, DG_STR(fn))); \
    if (!api.field && !missing) missing = DG_STR(fn)
    DG_CUDNN_ENTRY(create, cudnnCreate);
    DG_CUDNN_ENTRY(destroy, cudnnDestroy);
    DG_CUDNN_ENTRY(set_stream, cudnnSetStream);
    DG_CUDNN_ENTRY(error_string, cudnnGetErrorString);
    DG_CUDNN_ENTRY(get_version, cudnnGetVersion);
    DG_CUDNN_ENTRY(create_tensor, cudnnCreateTensorDescriptor);
    DG_CUDNN_ENTRY(set_tensor_4d, cudnnSetTensor4dDescriptor);
    DG_CUDNN_ENTRY(destroy_tensor, cudnnDestroyTensorDescriptor);
    DG_CUDNN_ENTRY(create_filter, cudnnCreateFilterDescriptor);
    DG_CUDNN_ENTRY(set_filter_4d, cudnnSetFilter4dDescriptor);
    DG_CUDNN_ENTRY(destroy_filter, cudnnDestroyFilterDescriptor);
    DG_CUDNN_ENTRY(create_conv, cudnnCreateConvolutionDescriptor);
    DG_CUDNN_ENTRY(set_conv_2d, cudnnSetConvolution2dDescriptor);
    DG_CUDNN_ENTRY(set_group_count, cudnnSetConvolutionGroupCount);
    DG_CUDNN_ENTRY(set_math_type, cudnnSetConvolutionMathType);
    DG_CUDNN_ENTRY(destroy_conv, cudnnDestroyConvolutionDescriptor);
    DG_CUDNN_ENTRY(forward_algos, cudnnFindConvolutionForwardAlgorithm);
    DG_CUDNN_ENTRY(backward_data_algos, cudnnFindConvolutionBackwardDataAlgorithm);
    DG_CUDNN_ENTRY(backward_filter_algos, cudnnFindConvolutionBackwardFilterAlgorithm);
    DG_CUDNN_ENTRY(forward_workspace, cudnnGetConvolutionForwardWorkspaceSize);
    DG_CUDNN_ENTRY(backward_data_workspace, cudnnGetConvolutionBackwardDataWorkspaceSize);
    DG_CUDNN_ENTRY(backward_filter_workspace, cudnnGetConvolutionBackwardFilterWorkspaceSize);
    DG_CUDNN_ENTRY(forward, cudnnConvolutionForward);
    DG_CUDNN_ENTRY(backward_data, cudnnConvolutionBackwardData);
    DG_CUDNN_ENTRY(backward_filter, cudnnConvolutionBackwardFilter);
#undef DG_CUDNN_ENTRY
    if (missing) {
        snprintf(why, sizeof why, "%s lacks %s, an entry point of the convolution API duograd calls", cudnn_soname,
                 missing);
        dlclose(lib);
        return why;
    }
    *version = api.get_version();
    if (*version / 10000 != CUDNN_MAJOR) { /* the headers' major: the descriptors' layout and enums */
        dlclose(lib);
        snprintf(why, sizeof why, "%s is cuDNN %zu.%zu; this build's cudnn.h is %d.x", cudnn_soname,
                 *version / 10000, *version / 100 % 100, CUDNN_MAJOR);
        return why;
    }
    dg__cudnn = api; /* kept loaded for the process: handles may outlive any one backend */
    return NULL;
}

static size_t cudnn_version;

static const char *cudnn_why(void) {
    static const char *why = load_cudnn(&cudnn_version); /* once per process; C++ makes it thread-safe */
    return why;
}
#else
static size_t cudnn_version;

static const char *cudnn_why(void) {
    return "this build has no cuDNN: cudnn.h was not found when it was configured (the CUDA toolkit's include "
           "folder holds it where cuDNN is installed)";
}
#endif

dg_status dg__cudnn_load(void) {
    const char *why = cudnn_why();
    return why ? dg__fail(DG_ERR_UNSUPPORTED, "gpu: %s", why) : DG_OK;
}

bool dg_gpu_has_cudnn(char *why, size_t n) {
    const char *no = cudnn_why();
    if (why && n) {
        if (no) snprintf(why, n, "%s", no);
        else snprintf(why, n, "cuDNN %zu.%zu.%zu", cudnn_version / 10000, cudnn_version / 100 % 100,
                      cudnn_version % 100);
    }
    return !no;
}
