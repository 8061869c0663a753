/* onnx.h: an ONNX model file (opset 13 and later, or older where its
 * operators are defined alike there) as a dg_model.
 *
 * dg_onnx_load reads the file (the reader protobuf-c generates from
 * Debian's onnx.proto at build time), checks everything it can before any
 * graph exists, then builds the forward once on a scratch graph so that a
 * shape that does not fit is reported at load too. What it refuses, with
 * DG_ERR_INVALID (DG_ERR_IO for a file that cannot be read or parsed) and
 * a message for dg_last_error():
 *   - a path that is no regular file (a directory, a device such as
 *     /dev/zero, a pipe: refused by kind before any read, never blocking);
 *   - a file that is not a ModelProto: its size, the byte offset where the
 *     top-level framing breaks (a field running past the end), or that
 *     protobuf-c could not unpack it;
 *   - an operator of an opset older than the definition the importer
 *     follows (Softmax before 13 flattens to 2-D; Conv of opset 1 reads
 *     as of 13 but for auto_pad SAME, refused before 11), any other
 *     domain than the default;
 *   - an operator outside the supported list, an attribute it does not
 *     read or a value of one it cannot honour (asymmetric padding,
 *     ceil_mode, dilated pooling), a tensor whose
 *     dtype is not float32 where a float is needed (int64 for shapes and
 *     axes): each naming the operator, the node's index and name, and what
 *     is missing;
 *   - a graph input (beside initializers) that is not a float32 tensor
 *     (or int64 or int32 ids, read as int32) of 1 to DG_MAX_DIMS axes of
 *     fixed sizes but the first, more than 16 of them, an output name
 *     that the graph lacks.
 *
 * Operators: Gemm, MatMul, Add, Sub, Mul, Div (numpy broadcasting), Relu,
 * LeakyRelu, Sigmoid, Tanh, Exp, Log, Sqrt, Pow (a constant exponent),
 * Conv (2-D: groups, strides, symmetric pads, dilations, auto_pad),
 * BatchNormalization (inference; training in a training forward), MaxPool,
 * AveragePool, GlobalAveragePool, LayerNormalization (last axis),
 * Flatten, Reshape, Transpose, Softmax, LogSoftmax (any axis), Identity, Dropout (identity), Constant,
 * ReduceMean, ReduceSum, Squeeze, Unsqueeze, Erf, Gelu (opset 20: exact
 * through Erf, or tanh), Split and Concat (any axis), Gather (int ids
 * into a table on axis 0: an embedding; constant indices into a computed
 * tensor on any axis) -- Split, Concat and the latter Gather are products
 * with 0/1 matrices (onnx_select.c: exact, n_in * n_out multiply-adds a
 * row); and, on constants alone (folded while building: PyTorch's Shape ->
 * Gather -> Unsqueeze -> Concat chains that compute a Reshape's target),
 * Shape, Gather, Concat, Cast, Slice (1-D).
 *
 * The model (dg_onnx_model_new) is for a file of one input [batch, ...]
 * and an output [batch, ...]; dg_onnx_forward builds any file's forward
 * from one node per input (several inputs, 1-D ones).
 *
 * The model: float32 initializers become parameters (batch norm's mean
 * and variance: state, its running statistics) initialised with the
 * file's values (DG_INIT_DATA), in the order the nodes first use them;
 * int64 initializers are constants (shapes, axes). The input's first axis
 * is the batch: free, whatever the file declares there (a Reshape target
 * whose first entry is the file's fixed batch follows the graph's batch).
 * The forward returns the chosen output; classes is its last axis. */
#ifndef DG_ONNX_H
#define DG_ONNX_H

#include <stddef.h>

#include "../nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_onnx dg_onnx;

/* A serialized TensorProto (the ONNX backend tests' input_N.pb and
 * output_N.pb): float32 into f, int64 into i, the other NULL; dims[ndim]
 * (0 axes: a scalar); another dtype, a damaged file: an error naming it.
 * Freed with dg_onnx_tensor_free. */
typedef struct dg_onnx_tensor {
    char     name[128];
    int      ndim;
    int64_t  dims[8];
    int64_t  numel;
    float   *f;
    int64_t *i;
} dg_onnx_tensor;

typedef struct dg_onnx_opts {
    const char *output; /* the graph output the forward returns; NULL: the first */
    int64_t     batch;  /* the scratch build's batch; 0: the file's, or 2 where it is symbolic */
    /* graph inputs given values at load, as initializers (a Reshape's
     * shape, an axes list fed as an input), matched by name; the
     * dg_onnx keeps copies */
    const dg_onnx_tensor *consts;
    int                   n_consts;
} dg_onnx_opts;

/* Reads and checks path (opts NULL: the defaults); *out is freed with
 * dg_onnx_free. */
dg_status dg_onnx_load(const char *path, const dg_onnx_opts *opts, dg_onnx **out);
/* The same from size bytes in memory; name is what messages call it. */
dg_status dg_onnx_load_buffer(const void *data, size_t size, const char *name, const dg_onnx_opts *opts,
                              dg_onnx **out);
void      dg_onnx_free(dg_onnx *o);

/* A dg_model_new_fn: cfg is a dg_onnx (seed unused: the file has the
 * values). The model's parameters read the dg_onnx's memory: it must
 * outlive g and every plan and reference of g. */
dg_status dg_onnx_model_new(dg_graph *g, const void *cfg, uint64_t seed, dg_model *out);

/* The model's input and output as the file names them, and its example
 * shape (the input without the batch axis) */
const char *dg_onnx_input_name(const dg_onnx *o);
const char *dg_onnx_output_name(const dg_onnx *o);
dg_shape    dg_onnx_example_shape(const dg_onnx *o);
/* The graph's inputs beside the initializers, in the file's order (the
 * first is dg_onnx_input_name): count, names, dtypes (DG_F32, DG_I32 for
 * int64 or int32 ids). dg_onnx_input_shape gives input i's shape with its
 * first axis set to batch where that is the batch (the first input's;
 * another's where symbolic or the first's size in the file); batch 0: the
 * file's. false for i out of range or a symbolic batch left at 0. */
int         dg_onnx_n_inputs(const dg_onnx *o);
const char *dg_onnx_input_name_at(const dg_onnx *o, int i);
dg_dtype    dg_onnx_input_dtype(const dg_onnx *o, int i);
bool        dg_onnx_input_shape(const dg_onnx *o, int i, int64_t batch, dg_shape *out);

/* The forward on g from inputs[i] for the file's input i (shapes as
 * dg_onnx_input_shape gives them, or any that fit): the chosen output, or
 * NULL with g in an error state. Initializers become parameters made on g
 * at each call (m's fixed order is dg_onnx_model_new's); mode as a
 * model's forward (NULL: inference). */
dg_node *dg_onnx_forward(dg_graph *g, const dg_onnx *o, dg_node *const *inputs, dg_forward_mode *mode);

/* reads a serialized TensorProto (dg_onnx_tensor above) */
dg_status dg_onnx_tensor_load(const char *path, dg_onnx_tensor *out);
void      dg_onnx_tensor_free(dg_onnx_tensor *t);

/* the output's last axis (its classes) at load's scratch build */
int         dg_onnx_classes(const dg_onnx *o);
/* "<bytes> bytes, crc32 <8 hex digits>" of the loaded bytes (zlib's
 * CRC-32, which the library links already): which file a result came from */
const char *dg_onnx_digest(const dg_onnx *o);

#ifdef __cplusplus
}
#endif
#endif
