#!/usr/bin/python3
"""Writes the whole models that duograd's forward is compared on with
onnxruntime's (tests/onnx_models/test_onnxruntime.py) and trained a few
steps (tests/test_onnx_models.c), with python3-onnx's helper API, seeded
weights inside each file, the batch axis symbolic:
  mlp.onnx          x [N, 16] -> Gemm, Relu, Gemm, Tanh, Gemm -> [N, 5]
  cnn_bn.onnx       x [N, 3, 12, 12] -> Conv, BatchNormalization, Relu,
                    MaxPool, Conv (stride 2), BatchNormalization, Relu,
                    AveragePool, GlobalAveragePool, Flatten, Gemm -> [N, 4]
  transformer.onnx  x [N, 8, 16]: one pre-norm block (LayerNormalization;
                    two-head attention through MatMul, Reshape, Transpose,
                    Mul by 1/sqrt(8), Softmax; a ReLU MLP; residual Adds),
                    ReduceMean over the positions, Gemm -> [N, 4]
  bn_shared.onnx    x [N, 3, 8, 8] -> Conv, BatchNormalization, Relu, Conv,
                    BatchNormalization, Relu, GlobalAveragePool, Flatten,
                    Gemm -> [N, 4], the two batch norms' scale, shift,
                    mean and variance each one initializer handed to both
                    through Identity nodes, as PyTorch's TorchScript
                    exporter writes equal-valued parameters in evaluation
                    mode (the importer unties them: onnx_load.c)
Run from anywhere: python3 make_models.py [DIR]."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(4141)


def w(*shape, fan_in=None):
    """weights of a layer with fan_in inputs: standard normal / sqrt(fan_in)"""
    return (rng.standard_normal(shape) / np.sqrt(fan_in or shape[0])).astype(np.float32)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, [outs] if isinstance(outs, str) else outs, name=f"{op.lower()}_{outs}", **attrs)


def save(name, nodes, inits, in_shape, out_shape, opset):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *in_shape])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", *out_shape])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="duograd-tests")
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(OUT, name + ".onnx"))


def bn(c):
    """a batch norm's scale, shift, running mean and variance, away from 1 and 0"""
    return (1 + 0.2 * rng.standard_normal(c)).astype(np.float32), (0.1 * rng.standard_normal(c)).astype(np.float32), \
        (0.1 * rng.standard_normal(c)).astype(np.float32), (0.5 + rng.random(c)).astype(np.float32)


# mlp: PyTorch's Linear layout (W [out, in], transB 1)
save("mlp", [node("Gemm", ["x", "w0", "b0"], "h0", transB=1), node("Relu", ["h0"], "r0"),
             node("Gemm", ["r0", "w1", "b1"], "h1", transB=1), node("Tanh", ["h1"], "t1"),
             node("Gemm", ["t1", "w2", "b2"], "logits", transB=1)],
     {"w0": w(32, 16, fan_in=16), "b0": w(32, fan_in=16), "w1": w(32, 32), "b1": w(32),
      "w2": w(5, 32, fan_in=32), "b2": w(5, fan_in=32)}, [16], [5], opset=13)

# cnn_bn
s1, h1, m1, v1 = bn(8)
s2, h2, m2, v2 = bn(8)
save("cnn_bn", [
    node("Conv", ["x", "c1w", "c1b"], "c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    node("BatchNormalization", ["c1", "s1", "h1", "m1", "v1"], "n1", epsilon=1e-5),
    node("Relu", ["n1"], "r1"),
    node("MaxPool", ["r1"], "p1", kernel_shape=[2, 2], strides=[2, 2]),
    node("Conv", ["p1", "c2w", "c2b"], "c2", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
    node("BatchNormalization", ["c2", "s2", "h2", "m2", "v2"], "n2", epsilon=1e-5),
    node("Relu", ["n2"], "r2"),
    node("AveragePool", ["r2"], "p2", kernel_shape=[1, 1]),
    node("GlobalAveragePool", ["p2"], "g"),
    node("Flatten", ["g"], "f"),
    node("Gemm", ["f", "fw", "fb"], "logits", transB=1)],
    {"c1w": w(8, 3, 3, 3, fan_in=27), "c1b": w(8, fan_in=27), "s1": s1, "h1": h1, "m1": m1, "v1": v1,
     "c2w": w(8, 8, 3, 3, fan_in=72), "c2b": w(8, fan_in=72), "s2": s2, "h2": h2, "m2": m2, "v2": v2,
     "fw": w(4, 8, fan_in=8), "fb": w(4, fan_in=8)}, [3, 12, 12], [4], opset=13)

# transformer: T 8 positions of width D 16, H 2 heads of Dh 8; opset 17
# (LayerNormalization's first; ReduceMean still takes its axes as an attribute)
T, D, H, DH, F = 8, 16, 2, 8, 32
ones, zeros = np.ones(D, np.float32), np.zeros(D, np.float32)
save("transformer", [
    node("LayerNormalization", ["x", "g1", "b1"], "ln1", axis=-1, epsilon=1e-5),
    node("MatMul", ["ln1", "wq"], "q"), node("MatMul", ["ln1", "wk"], "k"), node("MatMul", ["ln1", "wv"], "v"),
    node("Reshape", ["q", "heads"], "qh"), node("Reshape", ["k", "heads"], "kh"), node("Reshape", ["v", "heads"], "vh"),
    node("Transpose", ["qh"], "qt", perm=[0, 2, 1, 3]),   # [N, H, T, Dh]
    node("Transpose", ["kh"], "kt", perm=[0, 2, 3, 1]),   # [N, H, Dh, T]
    node("Transpose", ["vh"], "vt", perm=[0, 2, 1, 3]),
    node("MatMul", ["qt", "kt"], "s"), node("Mul", ["s", "scale"], "ss"),
    node("Softmax", ["ss"], "a", axis=-1),
    node("MatMul", ["a", "vt"], "o"),                      # [N, H, T, Dh]
    node("Transpose", ["o"], "ot", perm=[0, 2, 1, 3]), node("Reshape", ["ot", "merged"], "om"),
    node("MatMul", ["om", "wo"], "proj"), node("Add", ["x", "proj"], "h"),
    node("LayerNormalization", ["h", "g2", "b2"], "ln2", axis=-1, epsilon=1e-5),
    node("MatMul", ["ln2", "w1"], "f1"), node("Add", ["f1", "bf1"], "f1b"), node("Relu", ["f1b"], "f1r"),
    node("MatMul", ["f1r", "w2"], "f2"), node("Add", ["f2", "bf2"], "f2b"), node("Add", ["h", "f2b"], "h2"),
    node("ReduceMean", ["h2"], "pooled", axes=[1], keepdims=0),
    node("Gemm", ["pooled", "wc", "bc"], "logits")],
    {"g1": ones + 0.1 * w(D), "b1": 0.1 * w(D), "wq": w(D, D), "wk": w(D, D), "wv": w(D, D), "wo": w(D, D),
     "heads": np.array([0, T, H, DH], np.int64), "merged": np.array([0, T, D], np.int64),
     "scale": np.array([1 / np.sqrt(DH)], np.float32), "g2": ones + 0.1 * w(D), "b2": zeros + 0.1 * w(D),
     "w1": w(D, F), "bf1": 0.1 * w(F), "w2": w(F, D), "bf2": 0.1 * w(D), "wc": w(D, 4), "bc": 0.1 * w(4)},
    [T, D], [4], opset=17)

# bn_shared: as torch.onnx.export(..., dynamo=False) of a model in eval mode
# merges equal initializers (every fresh batch norm's ones, zeros, zeros,
# ones) and fans them out through Identity nodes
C = 6
ident = [node("Identity", [src], f"{layer}_{what}") for layer in ("bn1", "bn2")
         for what, src in (("scale", "ones"), ("shift", "zeros"), ("mean", "zeros"), ("var", "ones"))]
save("bn_shared", ident + [
    node("Conv", ["x", "k1"], "c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    node("BatchNormalization", ["c1", "bn1_scale", "bn1_shift", "bn1_mean", "bn1_var"], "n1", epsilon=1e-5,
         momentum=0.9),
    node("Relu", ["n1"], "r1"),
    node("Conv", ["r1", "k2"], "c2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    node("BatchNormalization", ["c2", "bn2_scale", "bn2_shift", "bn2_mean", "bn2_var"], "n2", epsilon=1e-5,
         momentum=0.9),
    node("Relu", ["n2"], "r2"),
    node("GlobalAveragePool", ["r2"], "g"),
    node("Flatten", ["g"], "f"),
    node("Gemm", ["f", "fw", "fb"], "logits", transB=1)],
    {"k1": w(C, 3, 3, 3, fan_in=27), "k2": w(C, C, 3, 3, fan_in=9 * C), "ones": np.ones(C, np.float32),
     "zeros": np.zeros(C, np.float32), "fw": w(4, C, fan_in=C), "fb": np.zeros(4, np.float32)},
    [3, 8, 8], [4], opset=13)
