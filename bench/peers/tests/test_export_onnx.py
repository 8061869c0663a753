#!/usr/bin/env python3
"""Self-test of peers.export_onnx: its arguments without torch; with
PyTorch installed, an exported MLP that `bench profile --model FILE.onnx`
checks against float64 and profiles (skipped, with the reason, without
PyTorch or without the bench's path). Plain Python (no pytest):

    python3 bench/peers/tests/test_export_onnx.py [BENCH]   # exit status 1 when a check fails
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:] = [os.path.join(ROOT, "bench")] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import export_onnx as ex  # noqa: E402
from peers.tests import runner  # noqa: E402

TMP = tempfile.mkdtemp(prefix="exportonnx-")
BENCH = sys.argv[1] if len(sys.argv) > 1 else None


def refused(argv):
    try:
        ex.parse(argv)
    except SystemExit as e:
        return e.code == 2
    return False


def test_arguments():
    """nothing to do, a file bench would not take, bad widths are usage
    errors; the example shapes are those of the exported inputs"""
    assert refused([])
    assert refused(["--out", "model.pt"])
    assert refused(["--model", "mlp", "--widths", "784", "--out", "m.onnx"])
    assert refused(["--model", "mlp", "--widths", "7x8", "--out", "m.onnx"])
    assert refused(["--time", "--batch", "0"])
    assert ex.input_shape(ex.parse(["--out", "r.onnx", "--size", "32"])) == [3, 32, 32]
    assert ex.input_shape(ex.parse(["--model", "mlp", "--widths", "20-5-3", "--out", "m.onnx"])) == [20]


def test_exported_mlp_profiles_in_bench():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise runner.Skip("PyTorch is not installed")
    if not BENCH:
        raise runner.Skip("no bench path given")
    out = os.path.join(TMP, "mlp.onnx")
    assert ex.main(["--model", "mlp", "--widths", "20-16-4", "--out", out]) == 0
    r = subprocess.run([BENCH, "profile", "--model", out, "--backend", "cpu", "--batch", "8", "--steps", "2",
                        "--warmup", "0", "--ceilings", "/nonexistent", "--out", TMP], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "check f64-step@b2+finite: ok" in r.stdout, r.stdout


def main():
    return runner.run(globals(), TMP, not_imported="torch")


if __name__ == "__main__":
    sys.exit(main())
