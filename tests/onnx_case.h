/* onnx_case.h: one case of the ONNX project's test data (Debian's
 * libonnx-testdata: DIR/model.onnx and DIR/test_data_set_0/
 * {input,output}_N.pb, serialized TensorProtos) through the importer
 * (core/onnx/onnx.h), as test_onnx_nodes.c (the node tests) and
 * test_onnx_pytorch.c (the PyTorch-converted models) run them: read the
 * tensors, make the model's inputs at the file's shapes, run forward on
 * a backend, compare with the reference at the ONNX backend test
 * runner's tolerances, and check the tables of cases that must pass or
 * be refused. A function that returns const char * returns NULL on
 * success, else why not, in a buffer of its own that its next call
 * overwrites. */
#ifndef DG_TEST_ONNX_CASE_H
#define DG_TEST_ONNX_CASE_H

#include <stdbool.h>

#include "core/onnx/onnx.h"
#include "core/plan.h"

#define ONNX_TESTDATA "/usr/share/libonnx-testdata/data/"
/* the runner's tolerances: |got - want| <= ATOL + RTOL |want| */
#define ONNX_CASE_RTOL 1e-3
#define ONNX_CASE_ATOL 1e-7

/* skips the test where folder (one of libonnx-testdata's) is missing */
void onnx_case_need(const char *folder);

/* whether DIR/test_data_set_0/KIND_K.pb exists (kind "input" or "output") */
bool        onnx_case_has(const char *dir, const char *kind, int k);
/* DIR/test_data_set_0/KIND_K.pb into *t (freed with dg_onnx_tensor_free) */
const char *onnx_case_tensor(const char *dir, const char *kind, int k, dg_onnx_tensor *t);
/* input_0.pb, input_1.pb, ... while there is one (at most max) into
 * in[], *n of them loaded, to be freed by the caller also on failure */
const char *onnx_case_inputs(const char *dir, dg_onnx_tensor *in, int max, int *n);

/* the model's input i as an input of g at its fixed shape (int64 ids as
 * int32, as the importer reads them) into *x */
const char *onnx_case_input(dg_graph *g, const dg_onnx *o, int i, dg_node **x);

/* y of g planned on be, each xs[i] (i < n) set from vals[i] (NULL: not
 * set, y does not read it), run, and compared element by element with
 * want (floats of y's element count) */
const char *onnx_case_run(dg_graph *g, dg_backend *be, dg_node *y, dg_node *const *xs,
                          const dg_onnx_tensor *const *vals, int n, const dg_onnx_tensor *want);

/* run(TEST, be) for TEST = "test_" names[i] on the CPU backend or the
 * GPU one (skipped without a device), each failure logged with its
 * reason; fails the test where any did, after logging "cpu: M of N
 * <what> match the reference" */
void onnx_case_check_all(const char *const *names, int n, bool gpu, const char *what,
                         const char *(*run)(const char *test, dg_backend *be));

/* a case refused at load: "test_" test in its folder, with words that
 * its message must hold */
typedef struct onnx_refusal {
    const char *test, *names;
} onnx_refusal;

/* loads every refused[i] of folder; fails the test, after logging each,
 * where one loads or its message lacks the names */
void onnx_case_check_refused(const char *folder, const onnx_refusal *refused, int n);

#endif
