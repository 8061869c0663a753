#!/usr/bin/env python3
"""peers.export_onnx: a PyTorch model as an ONNX file duograd imports
(core/onnx/onnx.h), and PyTorch's own training step on it for comparison.

    python3 bench/peers/export_onnx.py --model resnet18 --out resnet18.onnx
    build/bench profile --model resnet18.onnx --backend both --out DIR
    build/bench --model resnet18.onnx --out DIR          # the model sweep: the step over batch sizes
    python3 bench/peers/export_onnx.py --model resnet18 --time --batch 16
    python3 bench/peers/export_onnx.py --model resnet18 --out r18.onnx --compare DIR   # all of it, one command

The export is in the form the importer reads: opset 13, the model in
evaluation mode exported with TrainingMode.PRESERVE, so batch norm stays a
BatchNormalization node of inference (TrainingMode.EVAL would fold it into
the convolutions, a different network to train; TRAINING exports the
training form with three outputs, which the importer refuses) and duograd
trains it with the batch's statistics itself; weights inside the file; the
batch axis symbolic (dynamic_axes) so `bench --batch N` is free; constants
folded.
Models: torchvision's resnet18 (ImageNet stem, 3x224x224, or --size 32
for CIFAR-sized inputs) and an MLP of --widths.

--compare DIR does the three steps of README's "Benchmark your own model"
in one go: the export, `bench --model FILE --out DIR` (the model sweep on
the CPU and the GPU, every precision of --dtype, over --batches), then
peers.torch_model's PyTorch rows on the same network into DIR/model.csv
and `bench plot DIR`; the bench is --bench (default build/bench).

--time runs PyTorch's step on the same model as `bench profile --model
FILE.onnx` runs duograd's: forward in training mode, softmax cross-entropy
averaged over the batch, backward, SGD with momentum 0.9, lr 0.1, weight
decay 5e-4 (bench_resnet_step's optimizer), fp32 with TF32 off, on seeded
uniform [0, 1) inputs; it prints the median step time of --reps steps
after --warmup. torch is imported inside the functions that need it, so
the argument handling runs (and is tested) without it.
"""
import argparse
import os
import sys

if not __package__:  # run by its path: bench/ in place of this folder on sys.path (peers/__init__.py says why)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_HERE)] + [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree

from peers import common  # noqa: E402

OPSET = 13                                   # the importer's lowest
LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 5e-4  # bench profile's ONNX step (bench_resnet_step)


def model_args(ap):
    """the options that name the network (shared with peers.torch_model,
    which must build the same one)"""
    ap.add_argument("--model", choices=("resnet18", "mlp"), default="resnet18")
    ap.add_argument("--size", type=int, default=224, help="resnet18: the input's height and width (default 224)")
    ap.add_argument("--classes", type=int, default=None, help="outputs (default: 1000 for resnet18, the MLP's last width)")
    ap.add_argument("--widths", default="784-256-100-10", help="mlp: layer widths (default 784-256-100-10)")


def check_model_args(ap, a):
    """model_args' values checked (ap.error on a bad one); a.widths_list set"""
    try:
        a.widths_list = [int(w) for w in a.widths.split("-")]
    except ValueError:
        ap.error(f"--widths {a.widths}: integers joined by '-'")
    if len(a.widths_list) < 2 or min(a.widths_list) < 1:
        ap.error(f"--widths {a.widths}: two or more widths of at least 1")
    if a.size < 1 or (a.classes is not None and a.classes < 1):
        ap.error("--size and --classes must be at least 1")


def parse(argv=None):
    ap = argparse.ArgumentParser(prog="export_onnx", description=__doc__.split("\n\n")[0])
    model_args(ap)
    ap.add_argument("--out", help="the .onnx file to write")
    ap.add_argument("--time", action="store_true", help="time PyTorch's training step on the model")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda where available)")
    ap.add_argument("--compare", metavar="DIR", help="export, then the model sweep and PyTorch's rows into DIR")
    ap.add_argument("--bench", default="build/bench", help="the bench --compare runs (default build/bench)")
    ap.add_argument("--batches", type=common.int_list(), default=[16, 64], help="--compare's batch sizes (16,64)")
    common.dtype_args(ap)
    a = ap.parse_args(argv)
    if not a.out and not a.time:
        ap.error("nothing to do: give --out FILE.onnx, --time, or both")
    if a.out and not a.out.endswith(".onnx"):
        ap.error(f"--out {a.out}: bench reads files named *.onnx")
    if a.compare and not a.out:
        ap.error("--compare needs --out FILE.onnx: the file the bench and PyTorch both run")
    check_model_args(ap, a)
    for name in ("batch", "reps"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if a.warmup < 0:
        ap.error("--warmup must be >= 0")
    return a


def input_shape(a):
    """one example's shape: [3, size, size] or [widths[0]]"""
    return [3, a.size, a.size] if a.model == "resnet18" else [a.widths_list[0]]


def classes(a):
    """the model's outputs: --classes, else 1000 for resnet18, the MLP's last width"""
    return a.classes or (1000 if a.model == "resnet18" else a.widths_list[-1])


def build(a):
    import torch
    if a.model == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=classes(a))
    layers, w = [], a.widths_list[:-1] + [classes(a)]
    for i in range(len(w) - 1):
        layers += [torch.nn.Linear(w[i], w[i + 1])] + ([torch.nn.ReLU()] if i + 2 < len(w) else [])
    return torch.nn.Sequential(*layers)


def export(a, model):
    import torch
    model.eval()
    x = torch.rand(2, *input_shape(a))
    # PyTorch 2.9 and later export through dynamo by default: opset 18 and
    # up, the weights in a side file (the importer reads them inside the
    # model: refused as "its data is in an external file", seen with 2.11),
    # no TrainingMode; the TorchScript exporter (dynamo=False) writes the
    # form described above
    import inspect
    extra = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, x, a.out, opset_version=OPSET, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.PRESERVE, export_params=True, **extra)
    print(f"export_onnx: {a.model} -> {a.out} ({os.path.getsize(a.out)} bytes, opset {OPSET}); next:\n"
          f"  build/bench profile --model {a.out} --backend both\n"
          f"  build/bench --model {a.out} --out DIR   # its step over batch sizes, every --dtype")


def time_step(a, model):
    import time
    import torch
    dev = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    model = model.to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    x = torch.rand(a.batch, *input_shape(a), device=dev)
    y = torch.randint(0, classes(a), (a.batch,), device=dev)
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    sync()
    ms = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        step()
        sync()
        ms.append(1e3 * (time.perf_counter() - t0))
    ms.sort()
    print(f"export_onnx: PyTorch {torch.__version__} {a.model} training step on {dev}, batch {a.batch}: median "
          f"{ms[len(ms) // 2]:.3f} ms (min {ms[0]:.3f}, max {ms[-1]:.3f}) over {a.reps} steps")


def compare(a):
    """the model sweep on the exported file, PyTorch's rows beside it, the
    charts; 0, or the exit status of the first step that failed"""
    import subprocess
    from peers import torch_model
    sizes = ",".join(str(b) for b in a.batches)
    dtypes = ",".join(a.dtype)
    sweep = [a.bench, "--model", a.out, "--sizes", f"model={sizes}", "--dtype", dtypes, "--out", a.compare]
    print("export_onnx: " + " ".join(sweep), flush=True)
    rc = subprocess.run(sweep).returncode
    if rc:
        print(f"export_onnx: {a.bench} exited {rc}", file=sys.stderr)
        return rc
    device = a.device or ("cuda" if torch_cuda_available() else "cpu")
    rc = torch_model.main(model_argv(a) + ["--onnx", a.out, "--device", device, "--batches", sizes,
                                           "--dtype", dtypes, "--out", a.compare])
    return rc or subprocess.run([a.bench, "plot", a.compare]).returncode


def torch_cuda_available():
    import torch
    return torch.cuda.is_available()


def model_argv(a):
    """model_args' values as a command line (peers.torch_model builds the same network)"""
    out = ["--model", a.model, "--size", str(a.size), "--widths", a.widths]
    return out + (["--classes", str(a.classes)] if a.classes is not None else [])


def make_out_folder(a):
    """the folders of --out and --compare, made where missing (torch's
    exporter does not, and fails with a traceback); an error message, or
    None"""
    for path in [os.path.dirname(os.path.abspath(a.out))] if a.out else []:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            return f"export_onnx: --out {a.out}: cannot make the folder {path}: {e.strerror}"
    return None


def main(argv=None):
    a = parse(argv)
    err = make_out_folder(a)
    if err:
        print(err, file=sys.stderr)
        return 1
    try:
        import torch  # noqa: F401
    except ImportError:
        print("export_onnx: PyTorch is not installed (pip install torch torchvision)", file=sys.stderr)
        return 1
    model = build(a)
    if a.out:
        export(a, model)
    if a.time:
        time_step(a, model)
    return compare(a) if a.compare else 0


if __name__ == "__main__":
    sys.exit(main())
