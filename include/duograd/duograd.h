/* duograd.h: the public API in one include. A program using duograd
 * writes #include <duograd/duograd.h> (installed, or this folder, include/,
 * under add_subdirectory). The umbrella sits above every layer: it is the
 * one header that includes both the core's and the backends' headers, and
 * no header below includes it. The paths below are relative to
 * include/duograd/, where the installed headers keep the source layout (in
 * the source tree they resolve through the source root). The hooks of the
 * tests and the bench (<duograd/testing.h>) are not part of it.
 *
 *   version.h              DG_VERSION_*, DG_HAVE_CUDA, dg_version()
 *   core/status.h          dg_status, dg_last_error()
 *   core/graph.h, ops.h    graphs, shapes, the builders
 *   core/cost.h            a node's FLOPs, bytes and scratch memory
 *   core/precision.h       fp32, tf32, bf16, fp16: the precision axis
 *   core/autodiff.h        dg_grad, the optimizers' update nodes
 *   core/backend.h         memory, copies, events of a backend
 *   core/plan.h            memory plan and run of a graph on a backend
 *   core/nn/               models (MLP, CNN, ResNet, the char-LM), their
 *                          layers, the training step and the trainers
 *   core/data/dataset.h    IDX (MNIST, Fashion-MNIST) and CIFAR-10 readers
 *   core/data/text.h       a text file as character ids
 *   core/onnx/onnx.h       an ONNX model file as a dg_model
 *   cpu_backend/           the OpenMP + OpenBLAS backend
 *   gpu_backend/           the CUDA backend, where it was built */
#ifndef DG_DUOGRAD_H
#define DG_DUOGRAD_H

#include <duograd/version.h>

#include "core/autodiff.h"
#include "core/backend.h"
#include "core/cost.h"
#include "core/data/dataset.h"
#include "core/data/text.h"
#include "core/graph.h"
#include "core/nn/cnn.h"
#include "core/nn/data_parallel.h"
#include "core/nn/layers.h"
#include "core/nn/lm_trainer.h"
#include "core/nn/mlp.h"
#include "core/nn/model.h"
#include "core/nn/resnet.h"
#include "core/nn/train_step.h"
#include "core/nn/trainer.h"
#include "core/nn/transformer.h"
#include "core/onnx/onnx.h"
#include "core/ops.h"
#include "core/plan.h"
#include "core/precision.h"
#include "core/rng.h"
#include "core/status.h"
#include "cpu_backend/cpu_backend.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

#endif
