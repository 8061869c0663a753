/* cpu_backend.h: the OpenMP + OpenBLAS backend, and its GEMM kernels, which
 * the bench also calls directly. */
#ifndef DG_CPU_BACKEND_H
#define DG_CPU_BACKEND_H

#include <stdbool.h>

#include "../core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dg_cpu_gemm {
    DG_CPU_GEMM_OPENBLAS,  /* cblas_sgemm, OpenBLAS's OpenMP build            */
    DG_CPU_GEMM_OWN,       /* the blocked, vectorisable OpenMP kernel below   */
    DG_CPU_GEMM_NAIVE,     /* triple loop: a reference, small sizes only      */
    DG_CPU_GEMM_ONEDNN,    /* oneDNN's matmul primitive (a DG_ONEDNN build):
                            * matmuls only; a convolution given it runs
                            * OpenBLAS's sgemm                              */
} dg_cpu_gemm;

/* How the convolutions spread over the threads (cpu_conv.c):
 * PASSES: the batch in passes of whole images, unfolded by all threads,
 *   each image's GEMMs split between the threads by the sgemm (images of
 *   few columns multiplied side by side, one GEMM per pass);
 * BATCH: OpenMP over the batch, each thread unfolding its own images (in
 *   blocks of rows, if large; cut into units of rows or channels when
 *   there are fewer images than threads) into its own slot of the scratch
 *   and multiplying them with a one-thread sgemm (the weight's gradient
 *   summed from per-thread partials);
 * DEFAULT, as measured on a 16-core host (docs/PERF.md): the forward and
 *   dx as SHIFT where it applies to layers of 16 channels or more, wrap
 *   columns an eighth of the grid or less and units of 256 columns or
 *   more (cpu_kernels.h); else as BATCH once half the threads or more get
 *   a unit, except images under 32 columns that PASSES can multiply side
 *   by side; the weight's gradient as CHANNELS with 144 columns of dw a
 *   thread or more (16 channels of a 3x3 kernel), else as BATCH only with a unit for every thread and a
 *   partial dw no larger than an image's columns, else PASSES.
 * SHIFT: the forward and dx of convolutions of both strides 1 (not 1x1
 *   unpadded), no im2col: OpenMP over the batch as BATCH, each thread
 *   copying its image's input into zero-padded planes and multiplying
 *   each tap's weights with a shifted view of them (cpu_conv_shift.c);
 *   elsewhere as BATCH, and the weight's gradient as DEFAULT.
 * CHANNELS: the weight's gradient split by input channels, each thread
 *   unfolding its channels' columns of a pass of images and multiplying
 *   them straight into its rows of dw (no partials; cpu_conv.c); the
 *   forward and dx as DEFAULT.
 * BATCH, SHIFT and CHANNELS fall back to PASSES where they do not apply:
 * one thread, one image (BATCH), an sgemm that cannot run on every thread
 * at once (the own one, a pthreads OpenBLAS), or a scratch too small for
 * two slots.
 * ONEDNN: oneDNN's convolution primitives (a DG_ONEDNN build; refused with
 *   DG_ERR_UNSUPPORTED without), every direction, on oneDNN's blocked
 *   formats with our NCHW/OIHW operands reordered in the scratch; 16-bit
 *   operands by oneDNN's bf16 kernel, or widened to float32 where it has
 *   none (f16). Primitives are made when a plan is laid out, one per
 *   convolution (dg_cpu_onednn_conv_counts). Under a plan that leaves the
 *   choice to this setting, a step runs in a workspace the backend keeps
 *   (the plan reserved the im2col columns, as for the others).
 * AUTO, the backend's setting unless changed: per convolution, ONEDNN or
 *   the own DEFAULT by its precision, layer and pass and oneDNN's ISA,
 *   from the ResNet-18 layers measured on a 16-core AMX host and a 2-core
 *   AVX512-BF16 VM (docs/PERF.md, "The CPU's default convolution per
 *   precision and layer"): bf16 by oneDNN where its ISA has AMX, by the
 *   own elsewhere (oneDNN's AVX512-BF16 kernels ran at half its float32
 *   rate); float32 and f16 (float32 arithmetic in both) by oneDNN but for
 *   layers of fewer than 16 input channels a group (the stem) and the
 *   weight's gradient of a strided layer, which the own ran faster. In a
 *   build without oneDNN, AUTO is DEFAULT everywhere (dg_cpu_onednn_info
 *   says so). dg_plan_node_impl names what each node runs. */
typedef enum dg_cpu_conv {
    DG_CPU_CONV_DEFAULT,
    DG_CPU_CONV_PASSES,
    DG_CPU_CONV_BATCH,
    DG_CPU_CONV_SHIFT,
    DG_CPU_CONV_CHANNELS,
    DG_CPU_CONV_ONEDNN,
    DG_CPU_CONV_AUTO,
} dg_cpu_conv;

/* threads <= 0: OpenMP's default (OMP_NUM_THREADS or the core count). The
 * backend applies its count to OpenMP and OpenBLAS whenever it runs work. */
dg_status dg_cpu_backend_new(dg_backend **out, int threads);
int       dg_cpu_threads(const dg_backend *be);
/* The backend's defaults: what the steps of a plan that leaves its choice
 * at DG_GEMM_DEFAULT / DG_CONV_DEFAULT (dg_plan_opts) run with, read when
 * each step runs (OPENBLAS and AUTO unless set). A plan that names its
 * implementation runs with that one whatever these say (an impl outside the
 * enum leaves the setting as it was). The plan choices
 * map onto these enums: DG_GEMM_VENDOR, OWN, NAIVE are OPENBLAS, OWN,
 * NAIVE (a matmul of bf16 operands under OPENBLAS runs by oneDNN where its
 * kernel is AMX's: cpu_onednn.h); DG_CONV_IM2COL, IM2COL_BATCH, SHIFT, IM2COL_CHANNELS are PASSES,
 * BATCH, SHIFT, CHANNELS, DG_CONV_VENDOR is ONEDNN, DG_CONV_OWN is DEFAULT
 * (the own rule per node: no oneDNN; the CPU has no DG_CONV_IMPLICIT). */
void      dg_cpu_set_gemm(dg_backend *be, dg_cpu_gemm impl);
void      dg_cpu_set_conv(dg_backend *be, dg_cpu_conv impl);
/* Data parallelism across processes (one backend per process, say one
 * MPI rank each): sum_in_place(buf, count, arg) replaces buf[0..count)
 * with its sum over every process, the same on all of them; the
 * backend's all_reduce nodes then divide by `processes`, so each holds
 * the mean over the processes as a GPU group's does. The collective is
 * the caller's (the bench passes MPI_Allreduce's, bench/train/train_mpi.c):
 * the library links no MPI. Every process runs the same plan, so their
 * calls pair up in the same order. A failing call's status fails the step
 * (its message through dg_fail). NULL sum_in_place: alone again (the node
 * is a copy). DG_ERR_INVALID for a NULL or non-CPU backend, processes < 1
 * with a function, or other than 1 without. */
typedef dg_status (*dg_cpu_sum_fn)(float *buf, size_t count, void *arg);
dg_status dg_cpu_set_all_reduce(dg_backend *be, dg_cpu_sum_fn sum_in_place, void *arg, int processes);
/* The same mean, overlapped with the steps after the node (the rest of
 * the backward): the nodes are queued into buckets of up to bucket_bytes
 * (0: DG_CPU_BUCKET_BYTES_DEFAULT; < 0: every node alone), cut as a GPU
 * group cuts them (core/comm_bucket.h); a bucket is packed into a buffer
 * of its own and start(buf, count, arg, &req) begins its sum over the
 * processes in place (MPI_Iallreduce in the bench); before each later
 * step the buckets it touches are waited for (wait(req, arg)) and the
 * others tested (test(req, arg, &done): lets the sum progress, done when
 * finished); a plan's run returns with every bucket done. A request ends
 * at the test that says done or at its wait. A node computed outside a
 * plan's run (dg_backend_compute) waits at once. The calls pair up over
 * the processes as the blocking sum's do. DG_ERR_INVALID for a NULL or
 * non-CPU backend, a NULL sum or one of its functions, processes < 1. */
typedef struct dg_cpu_async_sum {
    dg_status (*start)(float *buf, size_t count, void *arg, void **req);
    dg_status (*test)(void *req, void *arg, bool *done);
    dg_status (*wait)(void *req, void *arg);
    void      *arg;
} dg_cpu_async_sum;
#define DG_CPU_BUCKET_BYTES_DEFAULT (1 << 20) /* 1 MiB: an MLP's layers go in several */
dg_status dg_cpu_set_all_reduce_overlap(dg_backend *be, const dg_cpu_async_sum *sum, int processes,
                                        long long bucket_bytes);
/* "OpenBLAS 0.3.21 ... (parallel: OpenMP)": what the library reports */
const char *dg_cpu_blas_info(char *buf, size_t n);
/* The core (kernel set) OpenBLAS runs the backend's sgemm with:
 * "SkylakeX", "Haswell", or "Prescott" where a DYNAMIC_ARCH OpenBLAS did
 * not know the CPU and fell back to its generic SSE3 kernels (several
 * times slower on a CPU with AVX-512). One for the whole process, every
 * backend alike: OpenBLAS chooses it when it loads, by the CPU's model or
 * by OPENBLAS_CORETYPE, so no backend argument. */
const char *dg_cpu_blas_core(void);

/* Whether this build has oneDNN (the DG_ONEDNN option); and what the
 * library reports: "oneDNN 2.6.3 (CPU runtime: OpenMP; ISA:
 * avx512_core_bf16)", or "none (built with DG_ONEDNN=OFF: the default
 * convolutions are the own)". */
bool        dg_cpu_has_onednn(void);
const char *dg_cpu_onednn_info(char *buf, size_t n);
/* The backend's oneDNN primitive cache: primitives created, and products
 * oneDNN ran (both 0 before its first oneDNN product): a shape's product
 * repeated runs again without creating its primitive again.
 * Its 16 entries are keyed by (dtype, ta, tb, batch, m, n, k) and made at
 * a shape's first product (the bench's warm-up runs, or dg_backend_step_impl
 * for a plan's matmul), the least recently used one replaced. */
void        dg_cpu_onednn_counts(const dg_backend *be, long *created, long *runs);
/* The same for its oneDNN convolutions: primitives created and
 * convolutions run (0 and 0 without oneDNN). A table keyed by (direction,
 * geometry, dtype, layout, threads) that grows by one primitive for each
 * convolution asked for and drops none while the backend lives: a plan
 * makes its steps' primitives as it is laid out (dg_backend_step_scratch_bytes),
 * so a plan of ResNet-18 made twice, or run, makes none again. */
void        dg_cpu_onednn_conv_counts(const dg_backend *be, long *created, long *runs);

/* Row-major packed C[m,n] = op(A) op(B) by `impl`, with the backend's
 * threads and packing scratch (the bench times these directly). DG_OK
 * always but for DG_CPU_GEMM_ONEDNN, whose library may fail (DG_ERR_OOM,
 * DG_ERR_BACKEND) or be absent from the build (DG_ERR_UNSUPPORTED). */
dg_status dg_cpu_sgemm(dg_backend *be, dg_cpu_gemm impl, bool ta, bool tb, int m, int n, int k, const float *A,
                  const float *B, float *C);
/* The same product of `dtype` operands (DG_F32, DG_BF16, DG_F16; A and B
 * hold elements of it), float32 accumulation and output C[m,n].
 * DG_CPU_GEMM_ONEDNN multiplies bf16 operands with oneDNN's bf16 kernel
 * (AVX512-BF16 where the CPU has it). Every other bf16 or f16 product is
 * widened to float32 (exactly, into a buffer the backend keeps and grows)
 * and multiplied by `impl`'s sgemm (oneDNN's own for ONEDNN: oneDNN 2.6
 * has no f16 matmul on the CPU). DG_ERR_INVALID for NULL operands or an
 * empty product, DG_ERR_UNSUPPORTED for another dtype or ONEDNN in a
 * build without it, DG_ERR_OOM, DG_ERR_BACKEND. */
dg_status dg_cpu_gemm_ex(dg_backend *be, dg_cpu_gemm impl, dg_dtype dtype, bool ta, bool tb, int m, int n, int k,
                         const void *A, const void *B, float *C);

/* The kernels themselves, for any strides (tests); they run with the
 * calling thread's OpenMP settings.
 * Row-major C[m,n] = op(A) op(B), op = transpose when the flag is set;
 * lda/ldb/ldc are row strides; accumulate: C += op(A) op(B) instead.
 * `pack` is per-thread scratch, see dg_cpu_gemm_own_pack_floats. */
void dg_cpu_sgemm_openblas(bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                           const float *B, int ldb, float *C, int ldc, bool accumulate);
void dg_cpu_sgemm_naive(bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                        const float *B, int ldb, float *C, int ldc, bool accumulate);
void dg_cpu_sgemm_own(bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                      const float *B, int ldb, float *C, int ldc, bool accumulate, float *pack);
/* floats of packing scratch that dg_cpu_sgemm_own needs for `threads` threads */
size_t dg_cpu_gemm_own_pack_floats(int threads);

#ifdef __cplusplus
}
#endif
#endif
