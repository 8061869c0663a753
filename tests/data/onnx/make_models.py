#!/usr/bin/python3
"""Writes the ONNX importer's test models (tests/test_onnx.c) with
python3-onnx's helper API, and for the models that run, a seeded input
(NAME.in.f32) and the output NumPy computes for it (NAME.out.f32), raw
little-endian float32. Run from anywhere: python3 make_models.py [DIR]."""
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(41)


def f32(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def save(name, nodes, inits, in_shape, out_shape, opset=13, batch="N"):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, *in_shape])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, *out_shape])],
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
# (-> Slice, clamped past the end)
save("reshape_chain", [
    helper.make_node("Shape", ["x"], ["s"], name="shape"),
    helper.make_node("Constant", [], ["zero"], name="c0", value=numpy_helper.from_array(np.array(0, np.int64))),
    helper.make_node("Gather", ["s", "zero"], ["n"], name="gather"),
    helper.make_node("Constant", [], ["ax"], name="c1", value=numpy_helper.from_array(np.array([0], np.int64))),
    helper.make_node("Unsqueeze", ["n", "ax"], ["n1"], name="unsq"),
    helper.make_node("Constant", [], ["m1"], name="c2", value=numpy_helper.from_array(np.array([-1], np.int64))),
    helper.make_node("Concat", ["n1", "m1"], ["target0"], name="concat", axis=0),
    helper.make_node("Constant", [], ["s0"], name="c3", value=numpy_helper.from_array(np.array([0], np.int64))),
    helper.make_node("Constant", [], ["s9"], name="c4", value=numpy_helper.from_array(np.array([9], np.int64))),
    helper.make_node("Slice", ["target0", "s0", "s9"], ["target"], name="slice"),
    helper.make_node("Reshape", ["x", "target"], ["t"], name="reshape"),
    helper.make_node("Tanh", ["t"], ["y"], name="tanh")], {}, [2, 3], [6])
x = f32(2, 2, 3, scale=1.0)
io("reshape_chain", x, np.tanh(x.reshape(2, -1)))


# each operator alone (op_NAME.onnx): its forward for a seeded input
def op(name, nodes, inits, x, y, const_nodes=(), batch="N", opset=13):
    save("op_" + name, list(const_nodes) + nodes, inits, list(x.shape[1:]), list(y.shape[1:]), opset=opset,
         batch=batch)
    io("op_" + name, x, y)


def node(op_type, inputs, **attrs):
    return helper.make_node(op_type, ["x"] + inputs, ["y"], name=op_type.lower(), **attrs)


def const(name, value):
    return helper.make_node("Constant", [], [name], name="c_" + name, value=numpy_helper.from_array(value))


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


x = f32(3, 4, 5, scale=1.0)
pos = np.abs(x) + 0.1
b45, b5, r1 = f32(4, 5), f32(5), f32(1, 5)
op("sub", [node("Sub", ["b"])], {"b": b5}, x, x - b5)
op("mul", [node("Mul", ["b"])], {"b": b45}, x, x * b45)
op("div", [node("Div", ["b"])], {"b": np.abs(r1) + 0.5}, x, x / (np.abs(r1) + 0.5))
op("add_const", [node("Add", ["k"])], {}, x, x + np.float32(0.25), [const("k", np.array(0.25, np.float32))])
op("leaky_relu", [node("LeakyRelu", [], alpha=0.2)], {}, x, np.where(x > 0, x, 0.2 * x))
op("sigmoid", [node("Sigmoid", [])], {}, x, sigmoid(x))
op("tanh", [node("Tanh", [])], {}, x, np.tanh(x))
op("exp", [node("Exp", [])], {}, x, np.exp(x))
op("log", [node("Log", [])], {}, pos, np.log(pos))
op("sqrt", [node("Sqrt", [])], {}, pos, np.sqrt(pos))
op("pow", [node("Pow", ["e"])], {}, pos, pos ** 3, [const("e", np.array(3.0, np.float32))])
op("identity_dropout", [helper.make_node("Identity", ["x"], ["i"], name="id"),
                        helper.make_node("Dropout", ["i"], ["y"], name="drop")], {}, x, x)
op("transpose", [node("Transpose", [], perm=[0, 2, 1])], {}, x, x.transpose(0, 2, 1))
op("softmax", [node("Softmax", [], axis=-1)], {}, x, np.exp(x) / np.exp(x).sum(-1, keepdims=True))
op("log_softmax", [node("LogSoftmax", [], axis=2)], {}, x, x - np.log(np.exp(x).sum(-1, keepdims=True)))
op("reduce_mean", [node("ReduceMean", [], axes=[2], keepdims=0)], {}, x, x.mean(2))
op("reduce_sum", [node("ReduceSum", ["ax"], keepdims=1)], {}, x, x.sum(1, keepdims=True),
   [const("ax", np.array([1], np.int64))])
op("squeeze_unsqueeze", [helper.make_node("Unsqueeze", ["x", "a1"], ["u"], name="unsq"),
                         helper.make_node("Squeeze", ["u", "a1"], ["y"], name="sq")], {}, x, x,
   [const("a1", np.array([1], np.int64))])
op("flatten_axis2", [node("Flatten", [], axis=2)], {}, x.reshape(3, 2, 2, 5), x.reshape(6, 10))
w3 = f32(5, 2)
op("matmul3d", [node("MatMul", ["w"])], {"w": w3}, x, x @ w3)
xa, wa, ca = f32(4, 3, scale=1.0), f32(2, 4), f32(2)
op("gemm_alpha_beta_trans", [node("Gemm", ["w", "c"], alpha=0.5, beta=2.0, transA=1, transB=1)],
   {"w": wa, "c": ca}, xa, 0.5 * xa.T @ wa.T + 2.0 * ca, batch=4)  # transA ties the batch to W


def conv_ref(xx, ww, stride, pad, dil, groups):
    n, c, h, w_ = xx.shape
    o, cg, kh, kw = ww.shape
    xp_ = np.pad(xx, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (w_ + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp_[:, g * cg:(g + 1) * cg, i * dil:i * dil + stride * oh:stride, j * dil:j * dil + stride * ow:stride]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ww[g * og:(g + 1) * og, :, i, j])
    return out


xc = f32(2, 4, 7, 7, scale=1.0)
wg = f32(6, 2, 3, 3)
op("conv_groups_stride_dil", [node("Conv", ["w"], group=2, strides=[2, 2], pads=[2, 2, 2, 2], dilations=[2, 2])],
   {"w": wg}, xc, conv_ref(xc, wg, 2, 2, 2, 2))
ws = f32(3, 4, 3, 3)
op("conv_same_upper", [node("Conv", ["w"], auto_pad="SAME_UPPER")], {"w": ws}, xc, conv_ref(xc, ws, 1, 1, 1, 1))
op("avg_pool", [node("AveragePool", [], kernel_shape=[3, 3], strides=[2, 2])], {}, xc,
   np.stack([np.stack([xc[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].mean((2, 3)) for j in range(3)], -1)
             for i in range(3)], -2))
op("global_avg_pool", [node("GlobalAveragePool", [])], {}, xc, xc.mean((2, 3), keepdims=True))


# LayerNormalization (opset 17) over the last axis, with and without its bias
lx, lsc, lb = f32(3, 4, 6, scale=1.0), f32(6) + 1, f32(6)


def ln_ref(v, sc, b):
    mu = v.mean(-1, keepdims=True)
    return (v - mu) / np.sqrt(((v - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * sc + b


save("op_layer_norm", [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln", axis=-1,
                                        epsilon=1e-5)], {"s": lsc, "b": lb}, [4, 6], [4, 6], opset=17)
io("op_layer_norm", lx, ln_ref(lx, lsc, lb))
save("op_layer_norm_nobias", [helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", axis=2)],
     {"s": lsc}, [4, 6], [4, 6], opset=17)
io("op_layer_norm_nobias", lx, ln_ref(lx, lsc, 0))

# a ResNet in miniature, in the form PyTorch's exporter gives torchvision's
# resnet18 (TrainingMode.PRESERVE, eval): a 7x7 stride-2 stem without bias,
# batch norm, a padded 3x3 stride-2 max pool, one basic block whose
# shortcut is an Add, global average pooling, Flatten, Gemm with transB
def bn_ref(v, p):
    s_, b_, m_, var_ = p
    sh_ = (1, -1, 1, 1)
    return (v - m_.reshape(sh_)) / np.sqrt(var_.reshape(sh_) + 1e-5) * s_.reshape(sh_) + b_.reshape(sh_)


def bn_params(c):
    return [f32(c) + 1, f32(c), f32(c), np.abs(f32(c)) + 0.5]


def maxpool_ref(v, k, st, pad):
    vp = np.pad(v, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    oh = (v.shape[2] + 2 * pad - k) // st + 1
    return np.stack([np.stack([vp[:, :, st * i:st * i + k, st * j:st * j + k].max((2, 3)) for j in range(oh)], -1)
                     for i in range(oh)], -2)


rw = {"stem.w": f32(4, 3, 7, 7, scale=0.2), "b1.w": f32(4, 4, 3, 3, scale=0.3), "b2.w": f32(4, 4, 3, 3, scale=0.3),
      "fc.w": f32(5, 4), "fc.b": f32(5)}
rbn = {name: bn_params(4) for name in ("bn0", "bn1", "bn2")}
inits = dict(rw)
bn_nodes = {}
for name, prm in rbn.items():
    for suffix, v in zip(("scale", "bias", "mean", "var"), prm):
        inits[f"{name}.{suffix}"] = v
    bn_nodes[name] = [f"{name}.{s}" for s in ("scale", "bias", "mean", "var")]
rn = [helper.make_node("Conv", ["x", "stem.w"], ["c0"], name="stem", kernel_shape=[7, 7], strides=[2, 2],
                       pads=[3, 3, 3, 3]),
      helper.make_node("BatchNormalization", ["c0"] + bn_nodes["bn0"], ["n0"], name="bn0"),
      helper.make_node("Relu", ["n0"], ["r0"], name="relu0"),
      helper.make_node("MaxPool", ["r0"], ["p0"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                       pads=[1, 1, 1, 1]),
      helper.make_node("Conv", ["p0", "b1.w"], ["c1"], name="b1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
      helper.make_node("BatchNormalization", ["c1"] + bn_nodes["bn1"], ["n1"], name="bn1"),
      helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
      helper.make_node("Conv", ["r1", "b2.w"], ["c2"], name="b2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
      helper.make_node("BatchNormalization", ["c2"] + bn_nodes["bn2"], ["n2"], name="bn2"),
      helper.make_node("Add", ["n2", "p0"], ["s"], name="shortcut"),
      helper.make_node("Relu", ["s"], ["r2"], name="relu2"),
      helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
      helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
      helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["y"], name="fc", alpha=1.0, beta=1.0, transB=1)]
save("resnet_tiny", rn, inits, [3, 16, 16], [5])
x = f32(2, 3, 16, 16, scale=1.0)
h = np.maximum(bn_ref(conv_ref(x, rw["stem.w"], 2, 3, 1, 1), rbn["bn0"]), 0)
p0 = maxpool_ref(h, 3, 2, 1)
h = np.maximum(bn_ref(conv_ref(p0, rw["b1.w"], 1, 1, 1, 1), rbn["bn1"]), 0)
h = np.maximum(bn_ref(conv_ref(h, rw["b2.w"], 1, 1, 1, 1), rbn["bn2"]) + p0, 0)
io("resnet_tiny", x, h.mean((2, 3)) @ rw["fc.w"].T + rw["fc.b"])

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
# opset 12's Unsqueeze takes its axes as an attribute: not the Unsqueeze read
save("old_opset", [helper.make_node("Unsqueeze", ["x"], ["y"], name="us", axes=[2])], {}, [4], [4, 1], opset=12)

# Erf, Gelu, Split, Concat and Gather on computed tensors, int ids, two
# inputs (appended last: the models above keep their random values)
erf = np.vectorize(math.erf)
xg = f32(3, 4, 5, scale=1.5)
gelu_exact = xg * 0.5 * (1 + erf(xg / math.sqrt(2)))
op("erf", [node("Erf", [])], {}, xg, erf(xg))
# PyTorch's export of nn.GELU(): x * 0.5 * (1 + Erf(x / sqrt 2)), as Div, Erf, Add, Mul, Mul
op("gelu_erf_export", [helper.make_node("Div", ["x", "sq2"], ["d"], name="div"),
                       helper.make_node("Erf", ["d"], ["e"], name="erf"),
                       helper.make_node("Add", ["e", "one"], ["a"], name="add"),
                       helper.make_node("Mul", ["x", "a"], ["m"], name="mul"),
                       helper.make_node("Mul", ["m", "half"], ["y"], name="mul_half")], {}, xg, gelu_exact,
   [const("sq2", np.array(math.sqrt(2), np.float32)), const("one", np.array(1, np.float32)),
    const("half", np.array(0.5, np.float32))])
op("gelu", [node("Gelu", [])], {}, xg, gelu_exact, opset=20)
op("gelu_tanh", [node("Gelu", [], approximate="tanh")], {}, xg,
   0.5 * xg * (1 + np.tanh(math.sqrt(2 / math.pi) * (xg + 0.044715 * xg ** 3))), opset=20)
xs6 = f32(3, 6, 5, scale=1.0)
op("split_concat", [helper.make_node("Split", ["x", "parts"], ["a", "b"], name="split", axis=1),
                    helper.make_node("Relu", ["b"], ["rb"], name="relu"),
                    helper.make_node("Concat", ["rb", "a"], ["y"], name="concat", axis=1)], {}, xs6,
   np.concatenate([np.maximum(xs6[:, 2:], 0), xs6[:, :2]], 1), [const("parts", np.array([2, 4], np.int64))])
# x[..., [4, 0, 0, 2]][:, 1]: constant indices into a computed tensor, the last a scalar
x45 = f32(3, 4, 5, scale=1.0)
op("gather_const_indices", [helper.make_node("Gather", ["x", "cols"], ["g"], name="cols", axis=2),
                            helper.make_node("Gather", ["g", "row"], ["y"], name="row", axis=1)], {}, x45,
   x45[:, :, [4, 0, 0, 2]][:, 1], [const("cols", np.array([4, 0, 0, 2], np.int64)),
                                  const("row", np.array(1, np.int64))])

# Gather as an embedding: int64 ids [N, 3] into a table [7, 4] (the ids
# file holds int32, as duograd feeds ids)
table = f32(7, 4)
ids = rng.integers(0, 7, (2, 3))
graph = helper.make_graph([helper.make_node("Gather", ["table", "x"], ["y"], name="embed")], "embedding",
                          [helper.make_tensor_value_info("x", TensorProto.INT64, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 4])],
                          [numpy_helper.from_array(table, "table")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="duograd-tests"),
          os.path.join(OUT, "op_embedding.onnx"))
ids.astype("<i4").tofile(os.path.join(OUT, "op_embedding.in.f32"))
table[ids].astype("<f4").tofile(os.path.join(OUT, "op_embedding.out.f32"))

# two inputs, x [N, 5] and t [N, 3], concatenated into a Gemm; the input
# file holds x's values, then t's
x2, t2, w8, b2 = f32(2, 5, scale=1.0), f32(2, 3, scale=1.0), f32(8, 2), f32(2)
graph = helper.make_graph([helper.make_node("Concat", ["x", "t"], ["xt"], name="cat", axis=1),
                           helper.make_node("Gemm", ["xt", "w", "b"], ["y"], name="fc")], "two_inputs",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5]),
                           helper.make_tensor_value_info("t", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
                          [numpy_helper.from_array(w8, "w"), numpy_helper.from_array(b2, "b")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="duograd-tests"),
          os.path.join(OUT, "two_inputs.onnx"))
io("two_inputs", np.concatenate([x2.ravel(), t2.ravel()]), np.concatenate([x2, t2], 1) @ w8 + b2)

# Softmax and LogSoftmax before opset 13: the input flattened to 2-D at
# `axis` (default 1), the softmax over everything after it (appended last:
# the models above keep their random values)
xo = f32(2, 3, 4, scale=1.5)
flat = xo.reshape(2, -1)
op("softmax_opset12", [node("Softmax", [])], {}, xo,
   (np.exp(flat) / np.exp(flat).sum(-1, keepdims=True)).reshape(xo.shape), opset=12)
xl = f32(2, 2, 3, 4, scale=1.5)
flat = xl.reshape(2 * 2, -1)
op("log_softmax_opset11", [node("LogSoftmax", [], axis=2)], {}, xl,
   (flat - np.log(np.exp(flat).sum(-1, keepdims=True))).reshape(xl.shape), opset=11)
