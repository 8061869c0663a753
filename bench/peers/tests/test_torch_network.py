#!/usr/bin/env python3
"""Self-test of the checked, timed step that peers.torch_resnet and
peers.torch_model share (torch_resnet.run_network), on a stand-in for
torch that needs neither PyTorch nor NumPy: each peer's network (its
rows, tolerances, FLOPs and check batch) through the shared code, the
first step checked against the float64 one (a bf16 error between the
plain and the batch-norm update tolerance: wrong for the exported MLP,
ok for ResNet-18), fp16's GradScaler retries, timed rows and an
out-of-memory row. Plain Python (no pytest):

    python3 bench/peers/tests/test_torch_network.py      # exit status 1 when a check fails
"""
import contextlib
import io
import math
import os
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:] = [os.path.join(ROOT, "bench")] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers import torch_model as tm  # noqa: E402
from peers import torch_resnet as tr  # noqa: E402
from peers.tests import runner  # noqa: E402

TMP = tempfile.mkdtemp(prefix="torchnet-")
OOM_BATCH = 64       # the stand-in model runs out of memory from this batch on
GRAD_ERR = {"bfloat16": 0.3}  # the gradient's relative error under autocast in that dtype
FP16_SKIPS = 2       # first steps the stand-in GradScaler skips (overflow)
CPU = types.SimpleNamespace(type="cpu")


# ---- the stand-in for torch: a model whose loss is |w|^2 / 2 ----

class Tensor:
    """a flat list of floats: what the step, its check and its timing call
    on a tensor (moves between devices, dtypes and layouts change nothing)"""

    def __init__(self, values):
        self.v = [float(x) for x in values]
        self.grad = None

    def to(self, *args, **kwargs):
        return self

    def contiguous(self, memory_format=None):
        return self

    def detach(self):
        return self

    def double(self):
        return self

    def cpu(self):
        return self

    def flatten(self):
        return self

    def clone(self):
        return Tensor(self.v)

    def item(self):
        return self.v[0]

    def __len__(self):
        return len(self.v)

    def __sub__(self, other):
        return Tensor(a - b for a, b in zip(self.v, other.v))

    def __truediv__(self, d):
        return Tensor(a / d for a in self.v)


class Model:
    """w the weights; its forward records the batch; the loss |w|^2 / 2,
    its gradient w (times 1 + GRAD_ERR under autocast in that dtype)"""

    def __init__(self, torch):
        self.torch, self.w, self.channels_last = torch, Tensor([0.5, -1.0, 2.0]), False

    def parameters(self):
        return [self.w]

    def state_dict(self):
        return {"w": self.w.clone()}

    def load_state_dict(self, state):
        self.w.v = list(state["w"].v)

    def to(self, *args, memory_format=None):
        self.channels_last = self.channels_last or memory_format is not None
        return self

    def double(self):
        return self

    def train(self):
        return self

    def __call__(self, x):
        self.torch.batches.append(len(x))
        if len(x) >= OOM_BATCH:
            raise self.torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB\nmore lines")
        return self


class Loss:
    """the forward's loss value; backward() sets the weights' gradient"""

    def __init__(self, model, grad_err):
        self.model, self.grad_err = model, grad_err
        self.value = 0.5 * sum(w * w for w in model.w.v)

    def item(self):
        return self.value

    def detach(self):
        return self

    def backward(self):
        self.model.w.grad = Tensor(w * (1 + self.grad_err) for w in self.model.w.v)


class SGD:
    """torch.optim.SGD's first step: w -= lr (grad + weight_decay w)"""

    def __init__(self, params, lr, momentum, weight_decay):
        self.params, self.lr, self.wd = list(params), lr, weight_decay

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None

    def step(self):
        for p in self.params:
            p.v = [w - self.lr * (g + self.wd * w) for w, g in zip(p.v, p.grad.v)]


class GradScaler:
    """skips its first FP16_SKIPS steps (the scale halved each time)"""

    def __init__(self, device_type):
        self.s, self.skips, self.skipped = 65536.0, FP16_SKIPS, False

    def get_scale(self):
        return self.s

    def scale(self, loss):
        return loss

    def step(self, opt):
        self.skipped = self.skips > 0
        if self.skipped:
            self.skips -= 1
        else:
            opt.step()

    def update(self):
        if self.skipped:
            self.s /= 2


def fake_torch():
    """a module object standing in for torch, with its submodules"""
    torch = types.ModuleType("torch")
    torch.batches = []  # the batch of every forward
    torch.autocast_dtype = None
    torch.float32, torch.bfloat16, torch.float16 = "float32", "bfloat16", "float16"
    torch.channels_last = "channels_last"
    matmul = types.SimpleNamespace(allow_tf32=False, allow_bf16_reduced_precision_reduction=True,
                                   allow_fp16_reduced_precision_reduction=True)
    torch.backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=matmul),
                                           cudnn=types.SimpleNamespace(allow_tf32=True, benchmark=False))
    torch.cuda = types.SimpleNamespace(OutOfMemoryError=type("OutOfMemoryError", (RuntimeError,), {}))
    torch.cpu = types.SimpleNamespace(synchronize=lambda: None)
    torch.optim = types.SimpleNamespace(SGD=SGD)
    torch.amp = types.SimpleNamespace(GradScaler=GradScaler)
    torch.Generator = lambda: types.SimpleNamespace(manual_seed=lambda seed: None)
    torch.rand = lambda batch, *shape, generator=None: Tensor([0.0] * batch)
    torch.randint = lambda lo, hi, size, generator=None: Tensor([0.0] * size[0])
    torch.cat = lambda parts: Tensor(v for t in parts for v in t.v)
    torch.linalg = types.SimpleNamespace(vector_norm=lambda t: Tensor([math.sqrt(sum(v * v for v in t.v))]))

    @contextlib.contextmanager
    def autocast(device_type, dtype):
        torch.autocast_dtype = dtype
        try:
            yield
        finally:
            torch.autocast_dtype = None
    torch.autocast = autocast
    torch.nn = types.ModuleType("torch.nn")
    torch.nn.functional = types.ModuleType("torch.nn.functional")
    torch.nn.functional.cross_entropy = lambda model, y: Loss(model, GRAD_ERR.get(torch.autocast_dtype, 0.0))
    return torch


@contextlib.contextmanager
def torch_replaced(torch):
    """`import torch` answers the stand-in; after, it raises ImportError again"""
    names = ("torch", "torch.nn", "torch.nn.functional")
    sys.modules.update(zip(names, (torch, torch.nn, torch.nn.functional)))
    try:
        yield
    finally:
        for n in names:
            del sys.modules[n]


def run(net, impls, batches):
    """run_network's rows for net on the stand-in, as written to a new CSV
    and read back, and its messages"""
    path = os.path.join(TMP, f"{net.case}.csv")
    out = common.CsvOut(path, ["torch: stand-in"], net.prog)
    err, summary = io.StringIO(), []
    with contextlib.redirect_stderr(err):
        tr.run_network(out, net, impls, batches, CPU, 2, summary)
    out.close()
    cols, rows = common.read_rows(path)
    assert cols == common.bench_header() and len(rows) == len(summary), (cols, rows)
    return rows, summary, err.getvalue()


def timed(status):
    """a timed row's status: "ok", or "noisy" where the stand-in's steps
    of microseconds spread"""
    return "timed" if status in ("ok", "noisy") else status


def test_exported_model_rows():
    """the exported MLP (no batch norm) through the shared step: fp32
    checked and timed (gflops from its FLOPs per example) then out of
    memory; bf16's 0.3 update error above the plain tolerance 0.15: wrong,
    not timed; fp16 checked after GradScaler's skips, timed"""
    torch = fake_torch()
    a = tm.parse(["--onnx", "dir/m.onnx", "--out", TMP, "--model", "mlp", "--widths", "5-4-3"])
    net = tm.network(a, Model(torch).state_dict(), has_batch_norm=False, flops_per_example=1000)
    net.build = lambda: Model(torch)
    with torch_replaced(torch):
        rows, summary, err = run(net, [("torch-eager", "fp32", False, False),
                                       ("torch-eager-cudnn-bench-nhwc", "bf16", True, True),
                                       ("torch-eager-cudnn-bench", "fp16", True, False)], [8, OOM_BATCH])
    got = [(r["impl"], r["dtype"], r["batch"], timed(r["status"])) for r in rows]
    assert got == [("torch-eager", "fp32", "8", "timed"), ("torch-eager", "fp32", "64", "oom"),
                   ("torch-eager-cudnn-bench-nhwc", "bf16", "8", "wrong"),
                   ("torch-eager-cudnn-bench-nhwc", "bf16", "64", "wrong"),
                   ("torch-eager-cudnn-bench", "fp16", "8", "timed"),
                   ("torch-eager-cudnn-bench", "fp16", "64", "oom")], got
    for r, s in zip(rows, summary):  # the model sweep's columns: case, input size, classes, check batch
        assert (r["sweep"], r["case"], r["backend"], r["threads"], r["n"], r["k"], r["check"]) == \
            ("model", "onnx-m", "cpu", "2", "5", "3", "f64-step@b2"), r
        assert r["m"] == r["batch"] and r["tf32"] == "0", r
        if timed(s["status"]) == "timed":
            assert s["reps"] >= 20 and s["gflops"] == 1000 * s["batch"] / (s["median_ms"] * 1e6), s
        else:
            assert s["reps"] == 0 and math.isnan(s["median_ms"]), s
    assert rows[1]["note"] == "CUDA out of memory. Tried to allocate 2 GiB", rows[1]
    wrong = "loss rel err 0 (tol 0.02); update rel err 0.3 (tol 0.15)"
    assert rows[2]["note"] == wrong and abs(summary[2]["max_rel_err"] - 0.3 / (1 + tr.WEIGHT_DECAY)) < 1e-12, \
        summary[2]
    assert summary[4]["note"] in ("GradScaler skipped 2 first steps (overflow; scale down to 16384)",
                                  "cv_pct above 5 (not measured again)"), summary[4]
    assert f"torch_model: onnx-m torch-eager-cudnn-bench-nhwc bf16: first step WRONG: {wrong}" in err, err
    assert "torch_model: onnx-m torch-eager fp32: first step ok: loss rel err 0 (tol 0.0001); " \
           "update rel err 0 (tol 0.05)" in err, err
    assert "torch_model: onnx-m torch-eager fp32 batch 64: oom median nan ms" in err, err
    # the reference's and the first step's forward at the check batch, timed at 8
    assert torch.batches[:2] == [2, 2] and set(torch.batches) == {2, 8, OOM_BATCH}, torch.batches[:8]


def test_fp16_first_step_after_scaler_skips():
    """checked_step takes fp16's first step again, from the initial
    weights, while GradScaler skips it, and says so; the step it checks
    is the one that ran"""
    torch = fake_torch()
    a = tm.parse(["--onnx", "m.onnx", "--out", TMP, "--model", "mlp", "--widths", "5-4-3"])
    net = tm.network(a, Model(torch).state_dict(), has_batch_norm=False, flops_per_example=1000)
    net.build = lambda: Model(torch)
    with torch_replaced(torch):
        ref = tr.reference(net)
        model, step, loss_err, upd_err, note = tr.checked_step(net, "fp16", True, CPU, ref)
    assert note == "GradScaler skipped 2 first steps (overflow; scale down to 16384)", note
    assert (loss_err, upd_err) == (0, 0) and model.channels_last and step.scaler.get_scale() == 16384
    assert torch.batches == [2] * 4 and model.w.v != Model(torch).w.v, (torch.batches, model.w.v)


def test_resnet_rows():
    """ResNet-18 (batch norm) through the same code: bf16's 0.3 update
    error within its tolerance 0.6, checked at the ImageNet stem's batch
    1, timed; gflops from the stem's step FLOPs; the resnet sweep's columns"""
    torch = fake_torch()
    net = tr.network("imagenet", Model(torch).state_dict())
    net.build = lambda: Model(torch)
    with torch_replaced(torch):
        rows, summary, err = run(net, [("torch-eager-cudnn-bench", "bf16", True, False)], [4, OOM_BATCH])
    assert [(r["status"], r["batch"], r["dtype"]) for r in rows][1:] == [("oom", "64", "bf16")], rows
    assert rows[0]["status"] in ("ok", "noisy") and summary[0]["gflops"] == \
        tr.step_flops("imagenet", 4) / (summary[0]["median_ms"] * 1e6), summary[0]
    for r in rows:
        assert (r["sweep"], r["case"], r["n"], r["k"], r["check"]) == \
            ("resnet", "resnet18-imagenet", "0", "0", "f64-step@b1"), r
    assert "torch_resnet: resnet18-imagenet torch-eager-cudnn-bench bf16: first step ok: loss rel err 0 " \
           "(tol 0.02); update rel err 0.3 (tol 0.6)" in err, err
    assert torch.batches[:2] == [1, 1] and set(torch.batches) == {1, 4, OOM_BATCH}, torch.batches[:8]
    assert torch.backends.cudnn.benchmark is True  # the impl's


def main():
    return runner.run(globals(), TMP, not_imported="torch")


if __name__ == "__main__":
    sys.exit(main())
