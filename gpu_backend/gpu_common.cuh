/* gpu_common.cuh: the backend's context, error checking, launch helpers and
 * the device helpers more than one kernel file uses, shared by the .cu
 * files (each a counterpart of a cpu_backend/ file). */
#ifndef DG_GPU_COMMON_CUH
#define DG_GPU_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "../core/backend_impl.h"
#include "../core/layout.h"
#include "../core/status_internal.h"
#include "gpu_backend.h"
#include "gpu_testing.h"

struct gpu_comm;  /* gpu_collective.cu */
struct gpu_cudnn; /* gpu_cudnn.cu */

/* strips a one-pass column sum can count (gpu_ctx.col_arrivals): 32 columns
 * each, so sums over up to 2^21 columns in row slices; wider ones take a
 * single slice (no count) or the general kernel */
#define GPU_COL_ARRIVALS 65536

struct gpu_ctx {
    int            device;         /* made current on every entry (cudaSetDevice) */
    cudaStream_t   stream;
    cublasHandle_t cublas;
    bool           cublas_tf32;    /* the handle's math mode: TF32 tensor ops or default */
    void          *cublas_ws;      /* fixed workspace: cuBLAS is graph-capture safe */
    size_t         cublas_ws_bytes;
    float         *staging;        /* pinned host buffer for pageable copies, */
    cudaEvent_t    staged[2];      /* in two halves (gpu_transfer.cu)         */
    float         *scratch;        /* device partial sums of two-pass reductions,  */
    size_t         scratch_floats; /* allocated once: runs stay allocation-free     */
    unsigned      *col_arrivals;   /* a column sum's blocks arrived per strip
                                      (GPU_COL_ARRIVALS, gpu_reduce.cu): zero
                                      between launches, each reset by its last
                                      block, so a replayed graph finds them zero.
                                      One set: column sums must not run at once
                                      (they share the scratch too: one stream) */
    size_t         staging_bytes;
    size_t         l2_bytes;       /* cudaDevAttrL2CacheSize, read once at creation  */
    void          *l2_flush;       /* dg_gpu_flush_l2's buffer (2 x L2), made on first use */
    float         *tf32_ws;        /* dg_gpu_sgemm's room for the wgmma kernel's     */
    size_t         tf32_ws_floats; /* transposes (and dg_gpu_gemm_ex_tiled's packed
                                      operands), grown on first use of a size       */
    size_t         l2_flush_bytes;
    dg_gpu_opts    opts;
    dg_gpu_gemm    gemm;
    dg_gpu_conv    conv;
    cudaDeviceProp prop;
    gpu_comm      *comm;           /* the all-reduce group's part here; NULL: in none */
    gpu_cudnn     *cudnn;          /* cuDNN's handle and chosen algorithms, made when a
                                      plan first asks for cuDNN; NULL until then    */
};

static inline gpu_ctx *gpu_of(const dg_backend *be) { return (gpu_ctx *)be->ctx; }

/* cuBLAS's entry points, resolved when the first backend is made
 * (gpu_cublas.cu: dg__cublas_load, which every backend's creation calls
 * before its first cuBLAS call); the backend calls cuBLAS through these */
struct dg__cublas_api {
    decltype(&cublasCreate)              create;
    decltype(&cublasDestroy)             destroy;
    decltype(&cublasSetStream)           set_stream;
    decltype(&cublasSetWorkspace)        set_workspace;
    decltype(&cublasSetMathMode)         set_math_mode;
    decltype(&cublasGetVersion)          get_version;
    decltype(&cublasGetStatusName)       status_name;
    decltype(&cublasGetStatusString)     status_string;
    decltype(&cublasSgemm)               sgemm;
    decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
    /* bf16 and f16 operands: the C entry point (C++ also declares an inline
     * overload taking the compute type as a cudaDataType) */
    cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                              const void *, const void *, cudaDataType, int, long long, const void *,
                                              cudaDataType, int, long long, const void *, void *, cudaDataType, int,
                                              long long, int, cublasComputeType_t, cublasGemmAlgo_t);
};
extern dg__cublas_api dg__cublas;
dg_status dg__cublas_load(void);

dg_status dg__cuda_fail(cudaError_t e, const char *expr, const char *file, int line);
dg_status dg__cublas_fail(cublasStatus_t s, const char *expr, const char *file, int line);

/* Evaluate a CUDA runtime call; on failure log it and return the mapped status. */
#define DG_CUDA_CHECK(expr)                                                         \
    do {                                                                            \
        cudaError_t e_ = (expr);                                                    \
        if (e_ != cudaSuccess) return dg__cuda_fail(e_, #expr, __FILE__, __LINE__); \
    } while (0)

/* Where no status can be returned (teardown): a failure is recorded as the
 * last error and cleared from the runtime, so the next launch check does
 * not report it as its own, and the caller goes on releasing the rest. */
#define DG_CUDA_NOTE(expr)                                                           \
    do {                                                                             \
        cudaError_t e_ = (expr);                                                     \
        if (e_ != cudaSuccess) (void)dg__cuda_fail(e_, #expr, __FILE__, __LINE__);   \
    } while (0)

#define DG_CUBLAS_CHECK(expr)                                                                  \
    do {                                                                                       \
        cublasStatus_t s_ = (expr);                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) return dg__cublas_fail(s_, #expr, __FILE__, __LINE__); \
    } while (0)

/* after every launch */
#define DG_CUDA_CHECK_LAUNCH() DG_CUDA_CHECK(cudaGetLastError())

/* First thing in every entry point that touches the device: fails at once
 * on a device that faulted (a sticky error, gpu_backend.cu), else makes the
 * backend's device current (backends on different devices share the
 * calling thread's current device). */
dg_status dg__gpu_enter(const gpu_ctx *c);
#define DG_GPU_USE_DEVICE(c)                        \
    do {                                            \
        dg_status enter_ = dg__gpu_enter(c);        \
        if (enter_ != DG_OK) return enter_;         \
    } while (0)

/* The handle's math mode for the next cuBLAS call: TF32 tensor cores only
 * where the step allows them (DG_STEP_TF32). Set on the host, so a CUDA-graph
 * capture bakes in each captured call's mode; changed only when it differs. */
static inline dg_status dg__gpu_cublas_math(gpu_ctx *c, bool tf32) {
    if (c->cublas_tf32 != tf32) {
        DG_CUBLAS_CHECK(dg__cublas.set_math_mode(c->cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
        c->cublas_tf32 = tf32;
    }
    return DG_OK;
}

/* kern<<<(gx, gy, slice), block, smem, stream>>>(args..., z0) for z0 from 0
 * up to batch in slices of at most 65535 (gridDim.z's limit): the batched
 * kernels index their matrix as z0 + blockIdx.z */
template <class... P, class... A>
static dg_status launch_z_sliced(void (*kern)(P...), unsigned gx, unsigned gy, dim3 block, size_t smem,
                                 cudaStream_t stream, int batch, A... args) {
    for (int z0 = 0; z0 < batch; z0 += 65535) {
        dim3 grid(gx, gy, (unsigned)(batch - z0 < 65535 ? batch - z0 : 65535));
        kern<<<grid, block, smem, stream>>>(args..., z0);
        DG_CUDA_CHECK_LAUNCH();
    }
    return DG_OK;
}

/* grid for a grid-stride loop over n items */
static inline unsigned grid_for(long long n, int block) {
    long long g = (n + block - 1) / block;
    return (unsigned)(g < 1 ? 1 : g > 65535LL * 16 ? 65535LL * 16 : g);
}

/* a grid-stride loop of each thread over the items i < n (64-bit indices) */
#define GRID_STRIDE(i, n) \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

/* ---- device helpers shared by several kernel files ---- */

/* the sum of v over the 32 lanes of a warp, in every lane */
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* flat index i of a 4-D shape o -> element offset through 4-D strides st */
static __device__ __forceinline__ long long strided(long long i, const dg_dims4 &o, const dg_dims4 &st) {
    long long i3 = i % o.d[3], r = i / o.d[3];
    long long i2 = r % o.d[2];
    r /= o.d[2];
    long long i1 = r % o.d[1], i0 = r / o.d[1];
    return i0 * st.d[0] + i1 * st.d[1] + i2 * st.d[2] + i3 * st.d[3];
}

/* The output position along one axis whose window has its tap k on input
 * position i (i = o*stride - pad + k*dilation), or -1 where none has: lets
 * a backward kernel gather, each input element summing what its windows
 * send it, instead of scattering with atomics. */
/* I: long long, or int where every position and product fits one
 * (cheaper division: the pools' backward kernels, gpu_pool.cu) */
template <class I>
static __device__ __forceinline__ I window_at(I i, I k, I stride, I pad, I dilation, I out) {
    I t = i + pad - k * dilation;
    if (t < 0 || t % stride) return -1;
    t /= stride;
    return t < out ? t : -1;
}

/* A range of taps [k0, k1) of a window of kk taps. */
template <class I> struct tap_range_of { I k0, k1; };
typedef tap_range_of<long long> tap_range;

/* The taps of a window whose tap 0 lies on input position `start` (taps
 * `dilation` apart) that land inside the input [0, extent): a forward loops
 * over these alone, so it reads nothing outside the input and takes no
 * time over padding, whatever the attributes say (a pool's kernel may be
 * 2^31 - 1 taps long over a few rows of input). */
static __device__ __forceinline__ tap_range taps_inside(long long start, long long dilation, long long kk,
                                                        long long extent) {
    long long k0 = start >= 0 ? 0 : (-start + dilation - 1) / dilation;
    long long k1 = extent <= start ? 0 : (extent - start + dilation - 1) / dilation;
    return {k0, k1 < kk ? k1 : kk};
}

/* The taps k of a window of kk taps for which some output position in
 * [0, out) has input position i under tap k (window_at's t = i + pad -
 * k*dilation in [0, (out - 1)*stride]): a backward loops over these alone.
 * i + pad >= 0 always (pad >= 0). */
template <class I>
static __device__ __forceinline__ tap_range_of<I> taps_reaching(I i, I stride, I pad, I dilation, I kk, I out) {
    I far = i + pad - (out - 1) * stride; /* k*dilation >= far */
    I k0 = far <= 0 ? 0 : (far + dilation - 1) / dilation, k1 = (i + pad) / dilation + 1;
    return {k0, k1 < kk ? k1 : kk};
}

/* gpu_transfer.cu: host <-> device copies and pinned host memory */
dg_status dg__gpu_staging_init(gpu_ctx *c);
void      dg__gpu_staging_free(gpu_ctx *c);
dg_status dg__gpu_upload(dg_backend *be, void *dst, const void *src, size_t bytes);
dg_status dg__gpu_download(dg_backend *be, void *dst, const void *src, size_t bytes);
dg_status dg__gpu_host_alloc(dg_backend *be, size_t bytes, void **out);
void      dg__gpu_host_free(dg_backend *be, void *ptr);

/* gpu_collective.cu: all_reduce over NCCL on the comm stream; before a
 * step, the compute stream waits for the all-reduces whose memory the step
 * touches; join: for all of them (before a download, a sync, the end of a
 * run or a capture) */
dg_status dg__gpu_all_reduce(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_comm_before(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_comm_join(gpu_ctx *c);
void      dg__gpu_comm_free(gpu_ctx *c);
dg_status dg__gpu_group(dg_backend *const *bes, int n);
#define DG_GPU_MAX_GROUP 64

/* kernels, by family (one .cu file each); each returns the launch status.
 * The caller (gpu_backend.cu) has made the backend's device current. */
/* gpu_elementwise.cu */
dg_status dg__gpu_unary(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_binary(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_unary_backward(gpu_ctx *c, const dg_step *s);
/* gpu_gather.cu */
dg_status dg__gpu_broadcast_to(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_permute(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_cast(gpu_ctx *c, const dg_step *s); /* f32 <-> bf16 or f16 (gpu_cast.cu) */
/* n values of dtype t (bf16 or f16) widened to float32 into y, exactly; n
 * floats rounded to t into y (gpu_cast.cu), on c's stream */
dg_status dg__gpu_widen(gpu_ctx *c, dg_dtype t, const void *x, float *y, long long n);
dg_status dg__gpu_narrow(gpu_ctx *c, dg_dtype t, const float *x, void *y, long long n);
dg_status dg__gpu_gather_rows(gpu_ctx *c, void *dst, const void *src, const int32_t *idx, int n,
                              size_t row_bytes);
/* gpu_reduce.cu */
dg_status dg__gpu_reduce(gpu_ctx *c, const dg_step *s);
/* gpu_softmax.cu */
dg_status dg__gpu_softmax(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_softmax_backward(gpu_ctx *c, const dg_step *s);
/* whether a softmax_cross_entropy node's per-row losses fit the scratch */
bool      dg__gpu_softmax_ce_fits(const gpu_ctx *c, const dg_node *n);
/* gpu_norm.cu: a batch norm node (or its backward ops) whose channels'
 * partial sums fit the backend's scratch (at most scratch_floats / 4) */
bool      dg__gpu_batch_norm_fits(const gpu_ctx *c, const dg_node *n);
dg_status dg__gpu_softmax_ce(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_softmax_ce_backward(gpu_ctx *c, const dg_step *s);
/* gpu_optim.cu */
dg_status dg__gpu_update(gpu_ctx *c, const dg_step *s);
/* gpu_loss_scale.cu: found_inf and loss_scale_update (dg__gpu_update's) */
dg_status dg__gpu_loss_scale(gpu_ctx *c, const dg_step *s);
/* 16-byte access to a matrix X + i * stride (i < batch) with rows ld
 * floats apart: the GEMM kernels' test for float4 loads and 16-byte
 * cp.async copies */
static inline bool dg__gpu_vec4_ok(const void *X, int ld, long long stride, int batch) {
    return ((uintptr_t)X & 15) == 0 && ld % 4 == 0 && (batch == 1 || stride % 4 == 0);
}
/* the same for 16-bit elements: copies of 8 (the wgmma 16-bit kernel's) */
static inline bool dg__gpu_vec8_ok(const void *X, int ld, long long stride, int batch) {
    return ((uintptr_t)X & 15) == 0 && ld % 8 == 0 && (batch == 1 || stride % 8 == 0);
}

/* gpu_backend.cu: a step's GEMM and convolution kernels, its plan's
 * choice (DG_STEP_GEMM, DG_STEP_CONV in its flags) or, for DEFAULT, the
 * backend's setting (dg_gpu_set_gemm / dg_gpu_set_conv); -1 for a choice
 * the GPU does not offer (the CPU's strategies) */
int       dg__gpu_step_gemm(const gpu_ctx *c, unsigned flags);
int       dg__gpu_step_conv(const gpu_ctx *c, unsigned flags);
/* the kernels conv node n runs on under flags: dg__gpu_step_conv with
 * AUTO resolved for n (IMPLICIT or CUDNN); -1 as it */
int       dg__gpu_node_conv(const gpu_ctx *c, const dg_node *n, unsigned flags);
/* gpu_gemm.cu; dg__gpu_sgemm's tf32: cuBLAS's TF32 math (the own kernels
 * ignore it: the own TF32 products are dg__gpu_sgemm_tf32, which
 * dg__gpu_matmul and dg_gpu_sgemm call with room for its transposes) */
dg_status dg__gpu_matmul(gpu_ctx *c, const dg_step *s);
/* the room a matmul node's own tensor-core product takes with GEMM `impl`
 * (the step's: 0 unless DG_GPU_GEMM_TILED): float32 operands' TF32
 * transposes, reserved whether or not the plan allows TF32; bf16 and f16
 * operands' packed copies (dg__gpu_gemm16_scratch_bytes, in floats) */
size_t    dg__gpu_matmul_scratch_floats(const gpu_ctx *c, const dg_node *n, dg_gpu_gemm impl);
dg_status dg__gpu_sgemm(gpu_ctx *c, dg_gpu_gemm impl, bool tf32, bool ta, bool tb, int m, int n, int k,
                        const float *A, int lda, const float *B, int ldb, float *C, int ldc, int batch,
                        long long sa, long long sb, long long sc);
/* gpu_gemm.cu: the same product of bf16 (dtype DG_BF16) or f16 operands
 * (DG_F16) by cuBLAS GemmEx, float32 accumulation (CUBLAS_COMPUTE_32F), C
 * float32 (out DG_F32) or of the operands' dtype: the kernel of a
 * low-precision matmul node and of dg_gpu_gemm_ex */
dg_status dg__gpu_gemm_low(gpu_ctx *c, dg_dtype dtype, dg_dtype out, bool ta, bool tb, int m, int n, int k,
                           const void *A, int lda, const void *B, int ldb, void *C, int ldc, int batch, long long sa,
                           long long sb, long long sc);
/* gpu_gemm_tf32.cu: the same product on TF32 tensor cores, by the kernel
 * dg_gpu_tf32_kernel picks; scratch (may be NULL) of scratch_floats: room
 * for the wgmma kernel's operand transposes, which it needs
 * dg__gpu_tf32_scratch_floats of (0 where another kernel runs) and does
 * without, slower, when given less. DG_ERR_UNSUPPORTED below compute
 * capability 8.0. */
dg_status dg__gpu_sgemm_tf32(gpu_ctx *c, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                             const float *B, int ldb, float *C, int ldc, int batch, long long sa, long long sb,
                             long long sc, float *scratch, size_t scratch_floats);
size_t    dg__gpu_tf32_scratch_floats(const gpu_ctx *c, bool ta, bool tb, int m, int n, int k, int batch);
/* gpu_gemm_wgmma.cu (built where the targets include compute capability
 * 9.0: DG_HAVE_WGMMA): the same on Hopper's wgmma, block tiles 128 x bn
 * (bn 128 or 256), MN-major operands transposed into scratch first where
 * it holds dg__gpu_wgmma_transpose_floats; DG_ERR_UNSUPPORTED on any
 * device but compute capability 9.0 */
dg_status dg__gpu_sgemm_wgmma(gpu_ctx *c, int bn, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                              const float *B, int ldb, float *C, int ldc, int batch, long long sa, long long sb,
                              long long sc, float *scratch, size_t scratch_floats);
size_t    dg__gpu_wgmma_transpose_floats(bool ta, bool tb, int m, int n, int k, int batch);
/* gpu_gemm_wgmma_lowp.cu (built as gpu_gemm_wgmma.cu): dg__gpu_gemm_low's
 * product by the own kernel on Hopper's wgmma (C float32 or the operands'
 * dtype); scratch (may be NULL) of scratch_bytes (16-byte aligned): room
 * to pack an operand whose base, rows or items are not 16-byte aligned
 * (dg__gpu_gemm16_pack_bytes of it), without which such an operand is read
 * 2 bytes at a time; DG_ERR_UNSUPPORTED on any device but compute
 * capability 9.0 */
dg_status dg__gpu_gemm_wgmma_lowp(gpu_ctx *c, dg_dtype dtype, dg_dtype out, bool ta, bool tb, int m, int n, int k,
                                  const void *A, int lda, const void *B, int ldb, void *C, int ldc, int batch,
                                  long long sa, long long sb, long long sc, void *scratch, size_t scratch_bytes);
/* gpu_gemm.cu: the bytes of a packed 16-bit operand, batch items of rows x
 * cols in rows padded to multiples of 8, rounded up to 16; the k slices
 * the own kernel splits a product into on this device (1: none) and the
 * bytes of their float32 partials; and the room a product needs: a packed
 * copy of every operand that dg__gpu_vec8_ok refuses (A, B NULL: not known
 * yet, a plan's buffers, 256-byte aligned), then the partials */
size_t    dg__gpu_gemm16_pack_bytes(int rows, int cols, int batch);
int       dg__gpu_gemm16_splits(const gpu_ctx *c, int m, int n, int k, int batch);
size_t    dg__gpu_gemm16_partial_bytes(int splits, int m, int n, int batch);
size_t    dg__gpu_gemm16_scratch_bytes(const gpu_ctx *c, bool ta, bool tb, int m, int n, int k, const void *A, int lda,
                                       const void *B, int ldb, int batch, long long sa, long long sb);
/* gpu_gemm.cu: whether the own bf16/f16 kernel runs here (a build with the
 * wgmma kernels, a compute capability 9.0 device), why not into why (may
 * be NULL); and whether a 16-bit matmul step under flags runs it: the
 * tiled GEMM chosen where it runs (else cuBLAS GemmEx) */
bool      dg__gpu_has_wgmma_lowp(const gpu_ctx *c, char *why, size_t n);
bool      dg__gpu_lowp_own(const gpu_ctx *c, unsigned flags);
/* gpu_gemm.cu: dg__gpu_gemm_wgmma_lowp where the build has it, else
 * DG_ERR_UNSUPPORTED saying why */
dg_status dg__gpu_gemm_tiled16(gpu_ctx *c, dg_dtype dtype, dg_dtype out, bool ta, bool tb, int m, int n, int k,
                               const void *A, int lda, const void *B, int ldb, void *C, int ldc, int batch,
                               long long sa, long long sb, long long sc, void *scratch, size_t scratch_bytes);
/* gpu_conv.cu; conv_fits: the node's GEMM dimensions fit cuBLAS's int */
bool      dg__gpu_conv_fits(const dg_node *n);
/* the scratch a conv node's step needs with kernels `impl` (the step's) */
size_t    dg__gpu_conv_scratch_bytes(const gpu_ctx *c, const dg_node *n, dg_gpu_conv impl);
/* the three convolution ops on the step's kernels: float32 nodes on
 * them directly, bf16 and f16 nodes widened to float32 in the step's
 * scratch first and rounded back (dg_conv_widened_of) */
dg_status dg__gpu_conv(gpu_ctx *c, const dg_step *s);
/* gpu_cudnn.cu: the three convolution directions by cuDNN
 * (DG_GPU_CONV_CUDNN). cudnn_load: dlopen of libcudnn.so.9 once per
 * process (gpu_cudnn_load.cu), DG_ERR_UNSUPPORTED naming it and how to
 * provide it where it fails. scratch_bytes: the workspace of the algorithm
 * chosen for n under flags, chosen here (once per geometry, direction,
 * dtype and TF32 flag, kept in c->cudnn): 0 where it cannot be chosen
 * (the step then fails with the reason). impl: its name
 * ("gpu-cudnn:implicit-precomp-gemm"). */
dg_status dg__cudnn_load(void);
size_t    dg__gpu_cudnn_scratch_bytes(gpu_ctx *c, const dg_node *n, unsigned flags);
dg_status dg__gpu_cudnn_impl(gpu_ctx *c, const dg_node *n, unsigned flags, char *buf, size_t size);
dg_status dg__gpu_cudnn_conv(gpu_ctx *c, const dg_step *s);
void      dg__gpu_cudnn_free(gpu_ctx *c);
/* gpu_conv_implicit.cu: the implicit-GEMM kernels (DG_GPU_CONV_IMPLICIT);
 * implicit_fits: the node's tensors and geometry fit their 32-bit indices
 * (a node that does not runs as im2col) */
bool      dg__gpu_conv_implicit_fits(const dg_node *n);
dg_status dg__gpu_conv2d_implicit(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_conv2d_backward_data_implicit(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_conv2d_backward_weight_implicit(gpu_ctx *c, const dg_step *s);
/* gpu_pool.cu, the pool family (DG_OPS_POOL); pool_fits: the kernels take
 * the node (max: every h*W+w of the plane fits the int32 argmax) */
bool      dg__gpu_pool_fits(const dg_node *n);
dg_status dg__gpu_pool(gpu_ctx *c, const dg_step *s);
/* gpu_norm.cu */
dg_status dg__gpu_batch_norm(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_batch_norm_backward(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_batch_norm_backward_scale(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_batch_norm_running(gpu_ctx *c, const dg_step *s);
/* gpu_layer_norm.cu */
dg_status dg__gpu_layer_norm(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_layer_norm_backward(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_layer_norm_backward_scale(gpu_ctx *c, const dg_step *s);
/* gpu_embedding.cu */
dg_status dg__gpu_embedding(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_embedding_backward(gpu_ctx *c, const dg_step *s);
/* gpu_attention.cu: the fused (flash) attention kernels; attention_fits:
 * the node's head size and extents are ones the kernels handle */
bool      dg__gpu_attention_fits(const dg_node *n);
dg_status dg__gpu_attention(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_attention_backward(gpu_ctx *c, const dg_step *s);
/* gpu_attention16.cu: the same in bf16 and f16 (the step's node in that
 * dtype; gpu_attention.cu's entry points hand such nodes on, checked) */
dg_status dg__gpu_attention16(gpu_ctx *c, const dg_step *s);
dg_status dg__gpu_attention16_backward(gpu_ctx *c, const dg_step *s);

#endif
