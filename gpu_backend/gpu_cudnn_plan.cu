/* gpu_cudnn_plan.cu: the plan-time decisions of the cuDNN convolutions
 * (gpu_cudnn.h), host code only: no cuDNN and no device call, and no
 * cudnn.h (the algorithm values are cuDNN 9's, checked against its enums
 * in gpu_cudnn.cu). */
#include <limits.h>
#include <string.h>

#include "../core/layout.h"
#include "../core/status_internal.h"
#include "gpu_cudnn.h"

/* the product of v[0..n) fits an int (so does each factor, all >= 1) */
static bool fits_int(const int64_t *v, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (v[i] > INT_MAX) return false;
        p *= v[i];
        if (p > INT_MAX) return false; /* a descriptor's strides are int */
    }
    return true;
}

static dg_status refuse(const dg_node *n, const char *why) {
    return dg__fail(DG_ERR_UNSUPPORTED, "gpu: node '%s' (%s) cannot run on cuDNN: %s", n->name, dg_op_name(n->op),
                    why);
}

dg_status dg__cudnn_key_of(const dg_node *n, unsigned flags, bool workspace, dg_cudnn_key *key) {
    memset(key, 0, sizeof *key); /* compared whole, padding included */
    if (n->op == DG_OP_CONV2D) key->dir = DG_CUDNN_FORWARD;
    else if (n->op == DG_OP_CONV2D_BACKWARD_DATA) key->dir = DG_CUDNN_BACKWARD_DATA;
    else if (n->op == DG_OP_CONV2D_BACKWARD_WEIGHT) key->dir = DG_CUDNN_BACKWARD_FILTER;
    else return refuse(n, "not a convolution");
    /* the low-precision rule: both inputs and the output of one dtype */
    dg_dtype t = n->in[0]->dtype;
    if (n->in[1]->dtype != t || n->dtype != t)
        return refuse(n, "its inputs and output are of different dtypes");
    if (t != DG_F32 && t != DG_BF16 && t != DG_F16) return refuse(n, "its tensors are neither f32, bf16 nor f16");
    key->dtype = (int)t;
    key->tf32 = t == DG_F32 && (flags & DG_STEP_TF32);
    dg_conv_dims d = dg_conv_dims_of(n);
    const int64_t x[4] = {d.n, d.c, d.h, d.w}, w[4] = {d.o, d.cg, d.kh, d.kw}, y[4] = {d.n, d.o, d.oh, d.ow};
    if (!fits_int(x, 4) || !fits_int(w, 4) || !fits_int(y, 4))
        return refuse(n, "a tensor has more than 2^31 - 1 elements (cuDNN's descriptors take int strides)");
    /* padding, stride and dilation are int attributes: they fit */
    for (int i = 0; i < 4; i++) key->x[i] = (int)x[i], key->w[i] = (int)w[i], key->y[i] = (int)y[i];
    key->pad[0] = (int)d.ph, key->pad[1] = (int)d.pw;
    key->stride[0] = (int)d.sh, key->stride[1] = (int)d.sw;
    key->dilation[0] = (int)d.dh, key->dilation[1] = (int)d.dw;
    key->groups = (int)d.groups;
    key->cap = workspace ? dg__cudnn_workspace_cap(n) : 0;
    return DG_OK;
}

size_t dg__cudnn_workspace_cap(const dg_node *n) {
    size_t most = dg_node_bytes(n);
    for (int i = 0; i < 2; i++) {
        size_t b = dg_node_bytes(n->in[i]);
        most = b > most ? b : most;
    }
    size_t cap = most > DG_CUDNN_WS_MAX / 4 ? DG_CUDNN_WS_MAX : 4 * most;
    return cap < DG_CUDNN_WS_MIN ? DG_CUDNN_WS_MIN : cap;
}

int dg__cudnn_pick(const dg_cudnn_candidate *c, int n, size_t cap, bool fma_only) {
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (!c[i].ok || c[i].bytes > cap || (fma_only && c[i].tensor_ops)) continue;
        if (c[i].deterministic) return i;
        if (first < 0) first = i;
    }
    return first;
}

const char *dg__cudnn_algo_name(int dir, int algo) {
    /* indexed by cudnnConvolutionFwdAlgo_t, ...BwdDataAlgo_t, ...BwdFilterAlgo_t */
    static const char *const fwd[] = {"implicit-gemm", "implicit-precomp-gemm", "gemm", "direct",
                                      "fft", "fft-tiling", "winograd", "winograd-nonfused"};
    static const char *const data[] = {"algo-0", "algo-1", "fft", "fft-tiling", "winograd", "winograd-nonfused"};
    static const char *const filter[] = {"algo-0", "algo-1", "fft", "algo-3", "winograd", "winograd-nonfused",
                                         "fft-tiling"};
    const char *const *names = dir == DG_CUDNN_FORWARD ? fwd : dir == DG_CUDNN_BACKWARD_DATA ? data : filter;
    int count = dir == DG_CUDNN_FORWARD ? 8 : dir == DG_CUDNN_BACKWARD_DATA ? 6 : 7;
    if (dir < DG_CUDNN_FORWARD || dir > DG_CUDNN_BACKWARD_FILTER || algo < 0 || algo >= count) return "unknown";
    return names[algo];
}
