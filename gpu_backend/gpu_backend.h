/* gpu_backend.h: the CUDA + cuBLAS (+ cuDNN) backend (C API). Built whenever nvcc is
 * found; available only where a CUDA device answers. */
#ifndef DG_GPU_BACKEND_H
#define DG_GPU_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dg_gpu_gemm {
    DG_GPU_GEMM_CUBLAS,  /* cublasSgemm / StridedBatched                  */
    DG_GPU_GEMM_NAIVE,   /* one thread per element of C                   */
    DG_GPU_GEMM_TILED,   /* shared-memory tiles, 8x8 register blocking    */
} dg_gpu_gemm;

/* How conv2d and its backward ops run: the geometry is core/layout.h's
 * dg_conv_dims either way. A plan names its kernels in its options
 * (dg_plan_opts.conv: DG_CONV_IM2COL, DG_CONV_IMPLICIT, DG_CONV_OWN, which
 * is the implicit kernels, or DG_CONV_VENDOR, which is cuDNN), and each of its
 * steps runs with them whatever other plans chose; a plan that leaves
 * DG_CONV_DEFAULT gets this backend's setting (dg_gpu_set_conv, AUTO
 * unless set: by the node's precision, below) when each step runs. A node whose sizes overflow the
 * implicit kernels' 32-bit indexing runs as IM2COL. A plan reserves the
 * scratch its convolutions need with its kernels (for DEFAULT: those set
 * when it is made): made for IMPLICIT it holds no im2col columns, and a
 * DEFAULT plan's convolution run after switching the setting to IM2COL
 * fails with DG_ERR_INVALID and says so; made for IM2COL it runs with
 * either. A plan that replays a CUDA graph keeps the kernels of the run it
 * captured.
 *
 * cuDNN (CUDNN): libcudnn.so.9, loaded when a plan first asks for it; where
 * it cannot be loaded that plan is refused with DG_ERR_UNSUPPORTED, naming
 * the library and where to find it (dg_gpu_has_cudnn asks beforehand).
 * Each convolution's algorithm is chosen once when the plan is made, by
 * cuDNN's search (cudnnFind*Algorithm, every algorithm run once: the
 * fastest deterministic answer whose workspace fits the cap of gpu_cudnn.h), and its workspace
 * is the step's scratch in the plan's arena: runs allocate nothing and
 * replay as a CUDA graph. dg_plan_node_impl names the algorithm
 * ("gpu-cudnn:implicit-precomp-gemm"; "gpu-cudnn-tf32:...", "gpu-cudnn-bf16:..."
 * and "gpu-cudnn-f16:..." for the other precisions). Float32 runs on FMA
 * units (no tensor cores), or on TF32 tensor cores where the plan allows
 * TF32; bf16 and f16 convolutions read and write 16 bits and accumulate
 * in float32. A plan that leaves DEFAULT with the setting at CUDNN gets
 * the algorithms that need no workspace (its scratch is that of the
 * kernels set when it was made); a node cuDNN cannot take fails its step,
 * saying why. */
typedef enum dg_gpu_conv {
    DG_GPU_CONV_IM2COL,   /* im2col into the step's scratch + cuBLAS GEMMs  */
    DG_GPU_CONV_IMPLICIT, /* the project's implicit-GEMM kernels: columns
                             gathered from x (or dy) tile by tile, no im2col
                             buffer                                          */
    DG_GPU_CONV_CUDNN,    /* cuDNN's convolutions, loaded at run time
                             (dg_gpu_has_cudnn); DG_CONV_VENDOR in a plan    */
    DG_GPU_CONV_AUTO,     /* per convolution, the faster of the two measured
                             in its precision: float32 without TF32 on the
                             IMPLICIT kernels, TF32 and bf16/f16 on CUDNN
                             (with the workspace its algorithm needs in the
                             plan's scratch) where cuDNN loads, else IMPLICIT */
} dg_gpu_conv;
/* AUTO's rule, from ResNet-18's step on an H200 (reports/h200/resnet.csv,
 * batch 64, ImageNet stem, CUDA-graph replay): float32 implicit 41.1 ms,
 * cuDNN 48.4 (cuDNN's float32 runs on FMA units too, with less fusion);
 * TF32 implicit 41.0 (the own kernels are float32 FMAs whatever the flag),
 * cuDNN 23.4; bf16 implicit (widened copies) 45.4, cuDNN 22.5; fp16 45.9
 * and 22.5. The CIFAR stem orders them the same way at batch 64 and 128. */
#define DG_GPU_CONV_DEFAULT DG_GPU_CONV_AUTO

/* Which of the own TF32 tensor-core kernels the tiled GEMM runs when TF32
 * is allowed. AUTO: Hopper's wgmma (compute capability 9.0, in a build
 * whose targets include it) where its 128-row tiles fill the SMs, mma.sync
 * otherwise; the others force one (WGMMA on another device or build: the
 * product fails with DG_ERR_UNSUPPORTED). */
typedef enum dg_gpu_tf32_kernel {
    DG_GPU_TF32_AUTO,
    DG_GPU_TF32_MMA_SYNC, /* mma.sync.m16n8k8, compute capability 8.0 and up */
    DG_GPU_TF32_WGMMA,    /* wgmma.mma_async, compute capability 9.0        */
} dg_gpu_tf32_kernel;

/* TF32 and CUDA-graph replay are not backend settings: they are options of
 * each plan (dg_plan_opts) and an argument of dg_gpu_sgemm. */
typedef struct dg_gpu_opts {
    int  device;       /* CUDA device index (default 0); the backend makes it
                          current on every entry, so backends on several
                          devices can live in one process                    */
    bool sync_debug;   /* synchronise after every node so a fault names it; also
                          on when the environment sets DG_GPU_SYNC=1          */
    dg_gpu_tf32_kernel tf32_kernel; /* default AUTO                          */
    long long all_reduce_bucket_bytes; /* in a group of several GPUs: the
                          all-reduces a run queues one after another are
                          packed into buckets of at most this many bytes, each
                          averaged by one NCCL call (fewer, larger messages,
                          as PyTorch's DistributedDataParallel buckets its
                          gradients); 0: DG_GPU_BUCKET_BYTES_DEFAULT; negative:
                          every all-reduce alone                             */
} dg_gpu_opts;

#define DG_GPU_BUCKET_BYTES_DEFAULT (4ll << 20)

/* Whether this machine has a usable CUDA device, without making a backend.
 * ABSENT: nothing to use (no driver library, or a driver that sees no
 * device); BROKEN: a driver is there but fails (older than the runtime,
 * initialisation error, any other CUDA error). why: "no CUDA device: ..."
 * or "CUDA device broken: ..." with the cause (versions, the CUDA error's
 * name and string); may be NULL. */
typedef enum dg_gpu_state {
    DG_GPU_PRESENT,
    DG_GPU_ABSENT,
    DG_GPU_BROKEN,
} dg_gpu_state;
dg_gpu_state dg_gpu_probe(char *why, size_t n);

/* opts NULL: defaults. Absent device: DG_ERR_NO_DEVICE, "no CUDA device:
 * ..."; broken device: DG_ERR_BACKEND, "CUDA device broken: ..." (both as
 * dg_gpu_probe words them); a device index out of range: DG_ERR_INVALID. */
dg_status dg_gpu_backend_new(dg_backend **out, const dg_gpu_opts *opts);
/* CUDA devices that answer (0 where none does or the driver is missing) */
int       dg_gpu_device_count(void);
int       dg_gpu_device(const dg_backend *be);
/* The backend's defaults: what the steps of a plan that leaves its choice
 * at DG_GEMM_DEFAULT / DG_CONV_DEFAULT (dg_plan_opts) run with, read when
 * each step runs (CUBLAS and IMPLICIT unless set). A plan that names its
 * implementation runs with that one whatever these say. The plan choices
 * map onto these enums: DG_GEMM_VENDOR, OWN, NAIVE are CUBLAS, TILED,
 * NAIVE; DG_CONV_IM2COL, DG_CONV_IMPLICIT, DG_CONV_OWN and DG_CONV_VENDOR
 * are IM2COL, IMPLICIT, IMPLICIT and CUDNN (the CPU's strategies are
 * refused with DG_ERR_UNSUPPORTED). */
void      dg_gpu_set_gemm(dg_backend *be, dg_gpu_gemm impl);
void      dg_gpu_set_conv(dg_backend *be, dg_gpu_conv impl);
/* Whether cuDNN can be loaded (libcudnn.so.9, once per process; no device
 * call). why: "cuDNN 9.19.0", or the reason it cannot (the loader's error,
 * the library to put on LD_LIBRARY_PATH, or a build without cudnn.h), for
 * a bench to skip the vendor's rows saying so; may be NULL. */
bool      dg_gpu_has_cudnn(char *why, size_t n);
/* "NVIDIA H100 80GB HBM3, 132 SMs, cc 9.0, driver 13.0, runtime 13.0, cuBLAS 130100" */
const char *dg_gpu_info(const dg_backend *be, char *buf, size_t n);

/* Row-major C[m,n] = op(A) op(B) on device pointers, on the backend's
 * stream (the bench times these directly); tf32: TF32 tensor cores
 * allowed: cuBLAS's TF32 math, or for DG_GPU_GEMM_TILED the own TF32
 * kernels (dg_gpu_tf32_kernel; the wgmma kernel's operand transposes go
 * to a device workspace allocated on first use and kept with the
 * backend); the naive kernel stays fp32. */
dg_status dg_gpu_sgemm(dg_backend *be, dg_gpu_gemm impl, bool tf32, bool ta, bool tb, int m, int n, int k,
                       const float *A, const float *B, float *C);
/* The same product of `dtype` operands (A, B hold DG_BF16 or DG_F16
 * elements on the device): cuBLAS GemmEx with float32 accumulation and
 * float32 C[m,n], the very call a matmul node of such operands makes; for
 * DG_F32, dg_gpu_sgemm by cuBLAS in fp32. DG_ERR_INVALID for NULL
 * operands or an empty product, DG_ERR_UNSUPPORTED for another dtype. */
dg_status dg_gpu_gemm_ex(dg_backend *be, dg_dtype dtype, bool ta, bool tb, int m, int n, int k, const void *A,
                         const void *B, float *C);
/* Whether the own bf16/fp16 tensor-core GEMM runs on be: Hopper's wgmma,
 * in a build whose CUDA targets include compute capability 9.0, on such a
 * device. Where it runs, a matmul of bf16 or f16 operands whose step has
 * the tiled GEMM (DG_GEMM_OWN, or DG_GPU_GEMM_TILED for DEFAULT) runs it
 * ("gpu-tiled-bf16", "gpu-tiled-f16" by dg_plan_node_impl); elsewhere it
 * runs cuBLAS GemmEx whatever the choice ("gpu-cublas-bf16", ...). why:
 * the reason it does not run, may be NULL. */
bool      dg_gpu_has_tiled16(const dg_backend *be, char *why, size_t n);
/* dg_gpu_gemm_ex's product by that kernel, with leading dimensions (in
 * elements) and C of dtype out (DG_F32 or dtype, rounded once to nearest
 * even): the gemm sweep's gpu-tiled bf16 and fp16 rows. DG_ERR_INVALID
 * for NULL operands, an empty product or a leading dimension below its
 * row; DG_ERR_UNSUPPORTED where dg_gpu_has_tiled16 says no, or for
 * another dtype. */
dg_status dg_gpu_gemm_ex_tiled(dg_backend *be, dg_dtype dtype, dg_dtype out, bool ta, bool tb, int m, int n, int k,
                               const void *A, int lda, const void *B, int ldb, void *C, int ldc);

/* Whether the backend's device has had a sticky fault (an illegal address
 * in a kernel, ...): then every call fails at once with DG_ERR_BACKEND, for
 * the rest of the process. why: the first fault's error, call and place.
 * (Tests fault a device on purpose with dg_gpu_inject_fault, one of the
 * hooks in <duograd/testing.h>.) */
bool      dg_gpu_faulted(const dg_backend *be, char *why, size_t n);

/* The replicas of be's all-reduce group (dg_backend_group, or the
 * processes of dg_gpu_join_ranks); 1 outside one. */
int       dg_gpu_group_size(const dg_backend *be);

/* Data parallelism across processes, one GPU each (say an MPI rank per
 * GPU): one process draws NCCL's unique id into id (DG_GPU_RANKS_ID_BYTES,
 * ncclGetUniqueId) and hands it to the others (the bench broadcasts it
 * over MPI); each then joins its backend as `rank` of `ranks` with it
 * (ncclCommInitRank: returns once every rank has joined). Its all_reduce
 * nodes then average over the processes, bucketed on its comm stream as
 * in a group of one process (dg_backend_group), and a captured plan
 * replays them. DG_ERR_INVALID: NULL arguments, rank outside 0..ranks-1,
 * ranks < 2, a backend already grouped; DG_ERR_UNSUPPORTED: a build
 * without NCCL or no libnccl.so.2; NCCL's failures as DG_ERR_BACKEND. */
#define DG_GPU_RANKS_ID_BYTES 128
dg_status dg_gpu_ranks_id(unsigned char *id);
dg_status dg_gpu_join_ranks(dg_backend *be, const unsigned char *id, int rank, int ranks);

#ifdef __cplusplus
}
#endif
#endif
