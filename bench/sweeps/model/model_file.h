/* model_file.h: the ONNX file of `bench --model FILE.onnx` (the model
 * sweep, sweep_model.c): loaded and checked before any backend opens, and
 * the training step every row of it times. */
#ifndef DG_BENCH_MODEL_FILE_H
#define DG_BENCH_MODEL_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/check/step_check.h"
#include "core/onnx/onnx.h"

/* Loads path (dg_onnx_load's checks and messages: no such file, not a
 * ModelProto, an operator it lacks) and refuses, with DG_ERR_INVALID and
 * a message naming the file and its output, a model whose output cannot
 * take the step's softmax cross-entropy: anything but [batch, classes]
 * with 2 classes or more, or a forward dg_train_step_build cannot
 * differentiate. *has_batch_norm: the model has a batch norm (with running
 * statistics or not), so its check step needs the batch-norm tolerances. *out is freed
 * with dg_onnx_free. */
dg_status bench_model_load(const char *path, dg_onnx **out, bool *has_batch_norm);

/* The step of every row: the file's model, softmax cross-entropy on its
 * output, SGD with momentum 0.9, lr 0.1 and weight decay 5e-4 (the resnet
 * sweep's and `bench profile --model FILE.onnx`'s optimizer: Adam's first
 * step, lr * g / |g|, would flip the sign of near-zero gradients), checked
 * per tensor with ResNet-18's tolerances (core/check/step_check.h). */
bench_step_spec bench_model_step(const dg_onnx *o);

/* "# model: PATH (onnx-STEM, N bytes, crc32 X, input 'x' of examples
 * [c,h,w], output 'y')\n"
 * appended to meta (n bytes): which file a result came from */
void bench_model_meta(const dg_onnx *o, const char *path, char *meta, size_t n);

#endif
