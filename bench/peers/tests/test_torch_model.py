#!/usr/bin/env python3
"""Self-test of peers.torch_model: its arguments, the case it names and
its tolerances without torch; with PyTorch installed, an exported MLP's
model sweep on the CPU with the peer's rows appended, read back by `bench
plot` (skipped, with the reason, without PyTorch or the bench's path).
Plain Python (no pytest):

    python3 bench/peers/tests/test_torch_model.py [BENCH]   # exit status 1 when a check fails
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:] = [os.path.join(ROOT, "bench")] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers import export_onnx as ex  # noqa: E402
from peers import torch_model as tm  # noqa: E402
from peers.tests import runner  # noqa: E402

TMP = tempfile.mkdtemp(prefix="torchmodel-")
BENCH = sys.argv[1] if len(sys.argv) > 1 else None


def refused(argv):
    try:
        tm.parse(argv)
    except SystemExit as e:
        return e.code == 2
    return False


def test_arguments():
    """the file is required and must be one bench reads; the rows' case is
    bench's name for it (bench_prof_onnx_model: onnx-STEM)"""
    assert refused(["--out", TMP])
    assert refused(["--onnx", "model.pt", "--out", TMP])
    assert refused(["--onnx", ".onnx", "--out", TMP])
    assert refused(["--onnx", "m.onnx", "--out", TMP, "--batches", "0"])
    assert refused(["--onnx", "m.onnx", "--out", TMP, "--model", "mlp", "--widths", "7"])
    a = tm.parse(["--onnx", "some/dir/r18.onnx", "--out", TMP, "--dtype", "bf16,fp32"])
    assert a.case == "onnx-r18" and a.dtype == ["fp32", "bf16"]
    assert ex.classes(a) == 1000
    assert ex.classes(tm.parse(["--onnx", "m.onnx", "--out", TMP, "--model", "mlp", "--widths", "20-5-3"])) == 3


def test_tolerances_are_bench_step_checks():
    """without batch norm bench_step_tol_in's, with it torch_resnet's
    (bench_step_tol_bn_in's); an unknown precision is refused"""
    assert tm.tolerances("fp32", False) == (1e-4, 5e-2)
    assert tm.tolerances("bf16", False) == (2e-2, 0.15)
    assert tm.tolerances("bf16", True)[1] == 0.6
    try:
        tm.tolerances("fp8", False)
    except ValueError:
        return
    raise AssertionError("fp8 was accepted")


def test_peer_rows_beside_the_model_sweep():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise runner.Skip("PyTorch is not installed")
    if not BENCH:
        raise runner.Skip("no bench path given")
    onnx = os.path.join(TMP, "mlp.onnx")
    model = ["--model", "mlp", "--widths", "20-16-4"]
    assert ex.main(model + ["--out", onnx]) == 0
    r = subprocess.run([BENCH, "--model", onnx, "--backends", "cpu", "--sizes", "model=8", "--min-time", "0",
                        "--no-energy", "--out", TMP], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert tm.main(model + ["--onnx", onnx, "--device", "cpu", "--batches", "8", "--out", TMP]) == 0
    _, rows = common.read_rows(os.path.join(TMP, "model.csv"))
    peer = [x for x in rows if x["impl"] == "torch-eager"]
    assert peer and all(x["case"] == "onnx-mlp" and x["status"] in ("ok", "noisy") for x in peer), peer
    assert any(x["impl"] == "cpu" for x in rows)
    r = subprocess.run([BENCH, "plot", TMP], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def main():
    return runner.run(globals(), TMP, not_imported="torch")


if __name__ == "__main__":
    sys.exit(main())
