/* onnx_internal.h: what the importer's files share (onnx.h is the API).
 * onnx_load.c reads and checks a file, onnx_tensor.c turns TensorProtos
 * into host tensors, onnx_build.c walks the graph making duograd nodes,
 * onnx_ops.c and onnx_fold.c are its operators (on nodes, on constants). */
#ifndef DG_ONNX_INTERNAL_H
#define DG_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>

#include "onnx.h"
#include "onnx.pb-c.h"

#define OX_MAX_RANK 8  /* of a constant (shapes, axes): graph tensors have DG_MAX_DIMS */
#define OX_MAX_FOLD (1 << 24) /* elements of a constant folded while building */
#define OX_MAX_INPUTS 16      /* graph inputs beside the initializers */
#define OX_MAX_OUTPUTS 16     /* outputs of one node (Split's parts) */
#define OX_MAX_FOLD_AXIS 4096 /* entries of an axis that Concat, Split and Gather move (onnx_select.c) */

typedef enum ox_dtype { OX_F32, OX_I64, OX_OTHER } ox_dtype;
/* what an initializer becomes in the model */
typedef enum ox_role { OX_ROLE_NONE, OX_ROLE_PARAM, OX_ROLE_STATE } ox_role;

/* A tensor known while building: an initializer, a Constant's value or a
 * folded result. f or i holds numel values as dtype says (OX_OTHER: none,
 * onnx_dtype is the file's code, refused where it is read). */
typedef struct ox_tensor {
    const char *name;
    ox_dtype    dtype;
    int         onnx_dtype;
    int         ndim;
    int64_t     dims[OX_MAX_RANK];
    int64_t     numel;
    float      *f;
    int64_t    *i;
    ox_role     role; /* initializers: what the model makes of it  */
    int         slot; /* its index in the model's params or state  */
    bool        identity_copy; /* made by load from an Identity of an
                                  initializer (onnx_load.c)            */
} ox_tensor;

/* float data handed to constant leaves (DG_INIT_DATA): kept until
 * dg_onnx_free, as the graphs built from the model read them */
typedef struct ox_pool { float **data; int n, cap; } ox_pool;

struct dg_onnx {
    char               name[256];   /* the file's name, for messages   */
    Onnx__ModelProto  *pb;
    const Onnx__GraphProto *graph;
    int64_t            opset;
    ox_tensor         *inits;       /* [n_inits], the graph's initializers */
    int                n_inits;
    const char        *input, *output; /* input: inputs[0]             */
    int                n_inputs;
    const char        *inputs[OX_MAX_INPUTS];
    dg_shape           in_shapes[OX_MAX_INPUTS]; /* the file's: d[0] 0 where symbolic */
    dg_dtype           in_dtypes[OX_MAX_INPUTS]; /* DG_F32, or DG_I32 for int64 or int32 ids */
    dg_shape           example;     /* the first input less its batch axis */
    int64_t            file_batch;  /* the first input's first axis; 0: symbolic */
    int                classes;     /* the output's last axis            */
    int                out_ndim;    /* and its axes, at load's scratch build */
    char               digest[64];  /* dg_onnx_digest                   */
    int                n_params, n_state;
    ox_tensor         *param_of[DG_MODEL_MAX_PARAMS], *state_of[DG_MODEL_MAX_PARAMS];
    ox_pool           *pool;
};

/* onnx_load.c: the initializer of that name (the file's, a given
 * constant's, or load's copy behind an Identity), or NULL */
const ox_tensor *dg__onnx_init(const dg_onnx *o, const char *name);

/* One value of a build: a duograd node or a constant (or neither: an
 * optional input left empty). */
typedef struct ox_value { const char *name; dg_node *node; const ox_tensor *k; } ox_value;

/* The state of one walk over the graph (a forward, or load's checks). */
typedef struct ox_ctx {
    dg_graph            *g;
    const dg_onnx       *o;
    const dg_model      *m;     /* NULL while load classifies initializers */
    dg_forward_mode     *mode;
    ox_value            *vals;
    int                  n_vals, cap_vals;
    ox_tensor          **tmp;   /* constants folded in this walk, freed after it */
    int                  n_tmp, cap_tmp;
    const Onnx__NodeProto *node; /* the node being built, and its index */
    int                  index;
} ox_ctx;

/* One operator: its builder (false with c->g in an error state), the
 * attributes it reads, the inputs it takes as constants (bit i), and the
 * oldest opset whose definition of it the builder follows. The
 * builder fills out[k] for the node's output k (out[0] for all but Split:
 * the walk names them). */
typedef bool (*ox_build_fn)(ox_ctx *c, ox_value *out);
typedef struct ox_op {
    const char  *name;
    ox_build_fn  build;
    const char  *attrs;     /* space-separated names, "" for none */
    unsigned     const_in;  /* inputs read on the host            */
    unsigned     state_in;  /* float inputs that are running statistics */
    int          max_outputs;
    int          since;     /* the oldest opset it reads alike        */
} ox_op;

const ox_op *dg__onnx_op(const char *name);  /* NULL: not supported */

/* path opened for reading, refused (DG_ERR_IO naming `what` and path)
 * unless it is a regular file: a pipe without a writer would block the
 * open, /dev/zero never ends, a directory reads as an error. */
dg_status dg__onnx_open(const char *path, const char *what, FILE **out);

/* TensorProto -> t (owned arrays); DG_ERR_INVALID naming `what` */
dg_status dg__onnx_tensor(const Onnx__TensorProto *p, const char *what, ox_tensor *t);
void      dg__onnx_tensor_clear(ox_tensor *t);
const char *dg__onnx_dtype_name(int onnx_dtype);

/* Walks o's graph on g from xs[i] for its input i; returns the chosen
 * output (NULL with g in an error state). m NULL: parameters are made on
 * the spot (load's scratch graph, dg_onnx_forward). */
dg_node *dg__onnx_walk(dg_graph *g, const dg_onnx *o, const dg_model *m, dg_node *const *xs, dg_forward_mode *mode,
                       int *failed);  /* failed (may be NULL): the node that failed, -1: none */

/* for the operators: fail naming the node; NULL with g in an error state */
dg_node *dg__onnx_fail(ox_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
bool              dg__onnx_has_in(const ox_ctx *c, int i);
ox_value         *dg__onnx_in_value(ox_ctx *c, int i); /* NULL: missing (failed) */
dg_node          *dg__onnx_in_node(ox_ctx *c, int i);    /* constants become leaves */
const ox_tensor  *dg__onnx_in_const(ox_ctx *c, int i);   /* NULL: not a constant (failed) */
ox_tensor        *dg__onnx_new_const(ox_ctx *c, ox_dtype t, int ndim, const int64_t *dims);
dg_node          *dg__onnx_const_leaf(ox_ctx *c, const ox_tensor *k); /* a float32 constant of this walk */
/* attributes: the value, or def where the node lacks it; a wrong type
 * fails (the *_ok flag false) */
int64_t      dg__onnx_attr_int(ox_ctx *c, const char *name, int64_t def, bool *ok);
float        dg__onnx_attr_float(ox_ctx *c, const char *name, float def, bool *ok);
/* a string attribute as one of the words a supported operator reads
 * (auto_pad's NOTSET, VALID, SAME_UPPER, SAME_LOWER; Gelu's none, tanh),
 * "?" for any other bytes */
const char  *dg__onnx_attr_string(ox_ctx *c, const char *name, const char *def, bool *ok);
/* ints: up to max values into v; returns the count (-1: absent, -2: wrong) */
int          dg__onnx_attr_ints(ox_ctx *c, const char *name, int64_t *v, int max);
const Onnx__AttributeProto *dg__onnx_attr(const ox_ctx *c, const char *name);

/* the folding operators (onnx_fold.c) */
bool dg__onnx_shape(ox_ctx *c, ox_value *out);
bool dg__onnx_gather(ox_ctx *c, ox_value *out);
bool dg__onnx_concat(ox_ctx *c, ox_value *out);
bool dg__onnx_cast(ox_ctx *c, ox_value *out);
bool dg__onnx_slice(ox_ctx *c, ox_value *out);
bool dg__onnx_constant(ox_ctx *c, ox_value *out);
/* on computed tensors (onnx_select.c): all-constant inputs go to the
 * folding Concat and Gather */
bool dg__onnx_concat_nodes(ox_ctx *c, ox_value *out);
bool dg__onnx_gather_nodes(ox_ctx *c, ox_value *out);
bool dg__onnx_split(ox_ctx *c, ox_value *out);
/* axes of a constant input or attribute, normalised to 0..rank-1 as a
 * bit mask; false (failed) for an axis out of range or repeated */
bool dg__onnx_axes(ox_ctx *c, const int64_t *v, int n, int rank, uint32_t *mask);

#endif
