#!/usr/bin/python3
"""test_onnxruntime.py BENCH [--models-dir DIR] [--model FILE ...]: duograd's
forward of whole ONNX models (tests/data/onnx_models/, written by
make_models.py there: an MLP, a CNN with batch norm and pooling, a
transformer block; and each --model FILE, such as the ResNet-18 that
bench/peers/export_onnx.py exports from torchvision) against
onnxruntime's on the same seeded inputs, through `bench onnx-run` on the
CPU and, where the bench finds a GPU, on the GPU (else that part is
skipped with the bench's reason). Inputs at two batches, neither the
batch any file was written for (the batch axis is symbolic).

Tolerance: every output within 1e-4 of the largest |output| (float32
sums of at most a few hundred terms, in another order: measured below
2e-6 on the CPU). A wrong mapping is far above it: a transposed Gemm, a
batch norm with its variance as the standard deviation, heads merged in
the wrong order, a softmax over the other axis. Exit 77 (ctest's skip)
where onnxruntime cannot be imported, saying so: scripts/install-deps.sh
installs it."""
import argparse
import os
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("mlp", "cnn_bn", "transformer", "bn_shared")
BATCHES = (3, 17)
TOL = 1e-4


def onnxruntime_or_skip():
    try:
        import numpy  # noqa: F401
        import onnxruntime
    except ImportError as e:
        print(f"SKIP: {e} ({sys.executable}); scripts/install-deps.sh installs onnxruntime")
        sys.exit(SKIP)
    return onnxruntime


def input_shape(session):
    """one example's shape: the model's input without its (symbolic) batch axis"""
    return [int(d) for d in session.get_inputs()[0].shape[1:]]


def duograd(bench, path, x, backend, tmp):
    """(exit code, output or None, stderr) of bench onnx-run on x"""
    import numpy as np
    xin, yout = os.path.join(tmp, "x.f32"), os.path.join(tmp, "y.f32")
    x.astype("<f4").tofile(xin)
    if os.path.exists(yout):
        os.remove(yout)
    r = subprocess.run([bench, "onnx-run", path, "--input", xin, "--out", yout, "--backend", backend],
                       capture_output=True, text=True)
    return r.returncode, np.fromfile(yout, "<f4") if r.returncode == 0 else None, r.stderr


def compare(name, backend, batch, want, got):
    """None, or what differs"""
    import numpy as np
    if got.size != want.size:
        return f"{name} {backend} batch {batch}: {got.size} values, onnxruntime {want.size}"
    scale = max(float(np.abs(want).max()), 1e-30)
    err = np.abs(got - want.ravel())
    i = int(err.argmax())
    if err[i] > TOL * scale:
        return (f"{name} {backend} batch {batch}: element {i} is {got[i]:.7g}, onnxruntime {want.ravel()[i]:.7g} "
                f"(error {err[i] / scale:.2e} of the largest |output|, tolerance {TOL})")
    print(f"ok: {name} {backend} batch {batch}: largest error {err[i] / scale:.1e} of the largest |output|")
    return None


def parse(argv):
    ap = argparse.ArgumentParser(prog="test_onnxruntime.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", help="the bench executable")
    ap.add_argument("--models-dir", default=os.path.join(HERE, "data", "onnx_models"),
                    help="where the built-in test models are (default tests/data/onnx_models)")
    ap.add_argument("--model", action="append", default=[], metavar="FILE",
                    help="another .onnx file to compare (repeatable), e.g. an exported torchvision ResNet-18")
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)),
                    help="batch sizes, comma-separated (default %(default)s)")
    return ap.parse_args(argv[1:])


def main(argv):
    a = parse(argv)
    bench = a.bench
    paths = [os.path.join(a.models_dir, n + ".onnx") for n in MODELS] + a.model
    batches = [int(b) for b in a.batches.split(",")]
    for p in a.model:
        if not os.path.isfile(p):
            print(f"FAIL: --model {p}: no such file")
            return 1
    ort = onnxruntime_or_skip()
    import numpy as np
    rng = np.random.default_rng(41)
    failures, gpu_skip = [], None
    with tempfile.TemporaryDirectory(prefix="dg-ort-") as tmp:
        for path in paths:
            name = os.path.splitext(os.path.basename(path))[0]
            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            for batch in batches:
                x = rng.standard_normal([batch, *input_shape(session)]).astype(np.float32)
                want = session.run(None, {session.get_inputs()[0].name: x})[0]
                for backend in ("cpu", "gpu"):
                    if backend == "gpu" and gpu_skip:
                        continue
                    rc, got, err = duograd(bench, path, x, backend, tmp)
                    if backend == "gpu" and rc == 4:  # BENCH_ONNX_RUN_NO_BACKEND
                        gpu_skip = err.strip().splitlines()[-1]
                        continue
                    if rc != 0:
                        failures.append(f"{name} {backend} batch {batch}: bench onnx-run exit {rc}: {err.strip()}")
                        continue
                    bad = compare(name, backend, batch, want, got)
                    if bad:
                        failures.append(bad)
    if gpu_skip:
        print(f"SKIP (GPU part): {gpu_skip}")
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
