#!/usr/bin/python3
"""Writes the ONNX importer's test models (tests/test_onnx.c) with
python3-onnx's helper API, and for the models that run, a seeded input
(NAME.in.f32) and the output NumPy computes for it (NAME.out.f32), raw
little-endian float32. Run from anywhere: python3 make_models.py [DIR]."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(41)


def f32(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def save(name, nodes, inits, in_shape, out_shape, opset=13):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *in_shape])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", *out_shape])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="duograd-tests")
    onnx.save(model, os.path.join(OUT, name + ".onnx"))


def io(name, x, y):
    x.astype("<f4").tofile(os.path.join(OUT, name + ".in.f32"))
    y.astype("<f4").tofile(os.path.join(OUT, name + ".out.f32"))


# mlp: 6-5-3, W [in, out] as the built-in MLP keeps them (Gemm, transB 0)
w0, b0, w1, b1 = f32(6, 5), f32(5), f32(5, 3), f32(3)
save("mlp", [helper.make_node("Gemm", ["x", "w0", "b0"], ["h"], name="fc0"),
             helper.make_node("Relu", ["h"], ["r"], name="relu0"),
             helper.make_node("Gemm", ["r", "w1", "b1"], ["y"], name="fc1")],
     {"w0": w0, "b0": b0, "w1": w1, "b1": b1}, [6], [3])
x = f32(4, 6, scale=1.0)
io("mlp", x, np.maximum(x @ w0 + b0, 0) @ w1 + b1)

# cnn: Conv(3x3, pad 1) + BN + Relu + MaxPool 2 + Flatten + Gemm (transB 1, as PyTorch's Linear)
cw, cb = f32(4, 2, 3, 3), f32(4)
sc, sh, mu, var = f32(4) + 1, f32(4), f32(4), np.abs(f32(4)) + 0.5
fw, fb = f32(3, 4 * 3 * 3), f32(3)
save("cnn", [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("BatchNormalization", ["c", "sc", "sh", "mu", "var"], ["b"], name="bn", epsilon=1e-5),
             helper.make_node("Relu", ["b"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1)],
     {"cw": cw, "cb": cb, "sc": sc, "sh": sh, "mu": mu, "var": var, "fw": fw, "fb": fb}, [2, 6, 6], [3])
x = f32(3, 2, 6, 6, scale=1.0)
xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
conv = np.zeros((3, 4, 6, 6), np.float64)
for i in range(3):
    for j in range(3):
        conv += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 6, j:j + 6], cw[:, :, i, j])
conv += cb[None, :, None, None]
bn = (conv - mu[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5) * sc[None, :, None, None] \
    + sh[None, :, None, None]
pool = np.maximum(bn, 0).reshape(3, 4, 3, 2, 3, 2).max(axis=(3, 5))
io("cnn", x, pool.reshape(3, -1) @ fw.T + fb)

# a Reshape whose target PyTorch's way computes: Shape -> Gather -> Unsqueeze -> Concat
save("reshape_chain", [
    helper.make_node("Shape", ["x"], ["s"], name="shape"),
    helper.make_node("Constant", [], ["zero"], name="c0", value=numpy_helper.from_array(np.array(0, np.int64))),
    helper.make_node("Gather", ["s", "zero"], ["n"], name="gather"),
    helper.make_node("Constant", [], ["ax"], name="c1", value=numpy_helper.from_array(np.array([0], np.int64))),
    helper.make_node("Unsqueeze", ["n", "ax"], ["n1"], name="unsq"),
    helper.make_node("Constant", [], ["m1"], name="c2", value=numpy_helper.from_array(np.array([-1], np.int64))),
    helper.make_node("Concat", ["n1", "m1"], ["target"], name="concat", axis=0),
    helper.make_node("Reshape", ["x", "target"], ["t"], name="reshape"),
    helper.make_node("Tanh", ["t"], ["y"], name="tanh")], {}, [2, 3], [6])
x = f32(2, 2, 3, scale=1.0)
io("reshape_chain", x, np.tanh(x.reshape(2, -1)))

# refusals: each names its node and what is missing
save("unknown_op", [helper.make_node("Relu", ["x"], ["r"], name="ok"),
                    helper.make_node("Hardmax", ["r"], ["y"], name="hm")], {}, [4], [4])
save("bad_attr", [helper.make_node("Gemm", ["x", "w0", "b0"], ["y"], name="fc0", gamma=2.0)],
     {"w0": w0, "b0": b0}, [6], [5])
save("int64_weight", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
     {"w": np.ones((6, 5), np.int64)}, [6], [5])
save("asym_pad", [helper.make_node("Conv", ["x", "cw"], ["y"], name="conv", pads=[0, 0, 1, 1])],
     {"cw": cw}, [2, 6, 6], [4, 5, 5])
save("bad_shape", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
     {"w": f32(5, 2)}, [6], [2])
save("old_opset", [helper.make_node("Relu", ["x"], ["y"], name="r")], {}, [4], [4], opset=12)
