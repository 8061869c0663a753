/* gpu_testing.h: the CUDA backend's hooks for the tests and the bench:
 * fault injection, the L2 cache's size and flush, the device's PCI bus id
 * (the key of the bench's NVML monitor), the reference copies and
 * all-reduce the bench measures the backend against, and the name cuDNN's
 * loader opens. Part of
 * <duograd/testing.h>, which says what these hooks are (and are not); no
 * header of the user API includes this one. */
#ifndef DG_GPU_TESTING_H
#define DG_GPU_TESTING_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For tests of fault handling: runs a kernel that stores through a null
 * pointer, which leaves the device faulted (dg_gpu_faulted). Returns
 * DG_ERR_BACKEND. */
dg_status dg_gpu_inject_fault(dg_backend *be);

/* A host <-> device copy handed to cudaMemcpyAsync as it is, waited for:
 * for pageable host memory the CUDA driver stages it itself. The bench's
 * reference for the backend's own staging (dg_backend_upload/download). */
dg_status dg_gpu_copy_unstaged(dg_backend *be, void *dst, const void *src, size_t bytes, bool upload);
/* Device-to-device copy on the backend's stream (the bandwidth ceiling). */
dg_status dg_gpu_copy(dg_backend *be, void *dst, const void *src, size_t bytes);

/* The device's L2 cache in bytes (cudaDevAttrL2CacheSize); 0 when be is
 * NULL or not a GPU backend. No device call after the backend's creation. */
size_t    dg_gpu_l2_bytes(const dg_backend *be);
/* Queues on the backend's stream a write over a device buffer of at least
 * twice the L2 size, so the next kernel on the stream starts with a cold L2
 * (the buffer is allocated on first use and freed with the backend).
 * Asynchronous like a kernel; DG_ERR_INVALID when be is not a GPU backend. */
dg_status dg_gpu_flush_l2(dg_backend *be);
/* The device's PCI bus id, "0000:41:00.0" (cudaDeviceGetPCIBusId), the key
 * under which NVML finds the same device; DG_ERR_INVALID when be is not a
 * GPU backend or buf cannot hold it (n >= 13 always can). */
dg_status dg_gpu_pci_bus_id(const dg_backend *be, char *buf, size_t n);

/* The file name cuDNN's loader opens instead of libcudnn.so.9: for the
 * test of a machine without it (a name that does not exist). It takes
 * effect only before the process's first load (dg_gpu_has_cudnn, or a
 * plan that asks for cuDNN), which happens once; NULL changes nothing. */
void      dg_gpu_set_cudnn_library(const char *soname);

/* NCCL's own all-reduce (average, in place) of count floats at bufs[i] on
 * each backend of a group, issued as one NCCL group call from this thread
 * and waited for: the ceiling the all_reduce node is measured against.
 * bes: the whole group, in the order it was made. */
dg_status dg_gpu_all_reduce_raw(dg_backend *const *bes, int n, float *const *bufs, size_t count);

#ifdef __cplusplus
}
#endif
#endif
