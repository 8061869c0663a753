/* gpu_cudnn.h: the plan-time decisions of the GPU's cuDNN convolutions
 * (gpu_cudnn_plan.cu): what a node asks of cuDNN, how much workspace its
 * algorithm may take, which of cuDNN's measured answers is taken, and
 * the algorithm's name. Host code that calls neither cuDNN nor the device,
 * so the tests check it on a machine without either; gpu_cudnn.cu makes
 * the descriptors and the calls from it. */
#ifndef DG_GPU_CUDNN_H
#define DG_GPU_CUDNN_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cuDNN's three calls: y from (x, w); dx from (dy, w); dw from (dy, x) */
typedef enum dg_cudnn_dir {
    DG_CUDNN_FORWARD,         /* conv2d                 */
    DG_CUDNN_BACKWARD_DATA,   /* conv2d_backward_data   */
    DG_CUDNN_BACKWARD_FILTER, /* conv2d_backward_weight */
} dg_cudnn_dir;

/* Everything the algorithm depends on, and the cache's key (compared
 * whole: dg__cudnn_key_of zeroes it first). Tensors NCHW, the weight
 * [o, c/groups, kh, kw], as the graph lays them out. */
typedef struct dg_cudnn_key {
    int    dir;                       /* dg_cudnn_dir                               */
    int    dtype;                     /* the io tensors' dg_dtype: F32, BF16 or F16 */
    bool   tf32;                      /* float32 on TF32 tensor cores (DG_STEP_TF32);
                                         false for 16-bit io, whose compute is float
                                         on tensor cores anyway                     */
    int    x[4], w[4], y[4];          /* n,c,h,w; o,c/groups,kh,kw; n,o,oh,ow       */
    int    pad[2], stride[2], dilation[2], groups;
    size_t cap;                       /* the most workspace bytes the algorithm may
                                         take (dg__cudnn_workspace_cap, or 0)       */
} dg_cudnn_key;

/* The key of a conv2d, conv2d_backward_data or conv2d_backward_weight node
 * under a step's flags; workspace: the step has the workspace its plan
 * reserved (a plan that names DG_CONV_VENDOR), else the cap is 0 (a
 * DEFAULT plan's scratch is that of the kernels set when it was made, which
 * a later dg_gpu_set_conv cannot grow). DG_ERR_UNSUPPORTED, naming the
 * node, for another op, io tensors of mixed dtypes or of another dtype
 * than f32, bf16, f16, or a size beyond cuDNN's int. */
dg_status dg__cudnn_key_of(const dg_node *n, unsigned flags, bool workspace, dg_cudnn_key *key);

/* The workspace an algorithm for n may take: 4 times the largest of its
 * three tensors, at least DG_CUDNN_WS_MIN and at most DG_CUDNN_WS_MAX. The
 * fast algorithms' workspaces (FFT, Winograd's transformed tiles) grow with
 * the tensors, so a fixed cap would shut them out of large layers or let a
 * small layer reserve far more than its data; the plan's arena shares one
 * step's scratch with the next steps' buffers, so only the largest counts. */
#define DG_CUDNN_WS_MIN ((size_t)16 << 20)
#define DG_CUDNN_WS_MAX ((size_t)1 << 30)
size_t dg__cudnn_workspace_cap(const dg_node *n);

/* One answer of cuDNN's search (cudnnFind*Algorithm: each algorithm run
 * once), fastest first. */
typedef struct dg_cudnn_candidate {
    int    algo;          /* the direction's cudnnConvolution*Algo_t       */
    bool   ok;            /* its status is CUDNN_STATUS_SUCCESS            */
    size_t bytes;         /* its workspace                                 */
    bool   deterministic; /* CUDNN_DETERMINISTIC: no float atomics         */
    bool   tensor_ops;    /* its math type runs on tensor cores (TENSOR_OP,
                             or TENSOR_OP_ALLOW_CONVERSION)                 */
} dg_cudnn_candidate;

/* The index of the answer to take among c[0..n), or -1 where none fits:
 * the first usable one (ok, workspace within cap, and no tensor cores where
 * fma_only: float32 without TF32) that is deterministic, so that a plan
 * gives the same bits run after run as the own kernels do; where none
 * is, the first usable one all the same. */
int dg__cudnn_pick(const dg_cudnn_candidate *c, int n, size_t cap, bool fma_only);

/* "implicit-precomp-gemm", "winograd-nonfused", "algo-1", ...: the short
 * name of direction dir's algorithm algo; "unknown" for another value. */
const char *dg__cudnn_algo_name(int dir, int algo);

#ifdef __cplusplus
}
#endif
#endif
