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
from peers import common  # noqa: E402
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
    assert refused(["--compare", TMP])  # nothing for the bench to run
    a = ex.parse(["--model", "mlp", "--widths", "20-5-3", "--out", "m.onnx", "--compare", TMP])
    assert ex.model_argv(a) == ["--model", "mlp", "--size", "224", "--widths", "20-5-3"]
    from peers import torch_model
    assert torch_model.parse(ex.model_argv(a) + ["--onnx", "m.onnx", "--out", TMP]).widths_list == [20, 5, 3]


def test_out_folder_is_made():
    """--out in a folder that does not exist yet (as --compare DIR/r18.onnx
    gives): the folder is made before torch writes the file; a path under
    a regular file is an error message naming --out, not a traceback"""
    nested = os.path.join(TMP, "new", "deeper", "m.onnx")
    assert ex.make_out_folder(ex.parse(["--out", nested])) is None
    assert os.path.isdir(os.path.dirname(nested))
    blocker = os.path.join(TMP, "a-file")
    open(blocker, "w").close()
    err = ex.make_out_folder(ex.parse(["--out", os.path.join(blocker, "m.onnx")]))
    assert err and "--out" in err and "a-file" in err, err


def test_compare_runs_the_sweep_then_the_peer_then_the_plot():
    """--compare's wiring without PyTorch: the bench (a recording stand-in)
    runs the model sweep on the file with the batches and precisions asked,
    peers.torch_model gets the same network's options, the same file,
    batches and precisions and the folder, then `bench plot` runs; a
    failing sweep stops it with the sweep's exit status"""
    from peers import torch_model
    log = os.path.join(TMP, "bench.log")
    fake = os.path.join(TMP, "fake-bench")
    with open(fake, "w") as f:
        f.write(f"#!/bin/sh\necho \"$*\" >> {log}\nexit ${{FAKE_RC:-0}}\n")
    os.chmod(fake, 0o755)
    a = ex.parse(["--model", "mlp", "--widths", "20-16-4", "--out", "m.onnx", "--compare", TMP, "--bench", fake,
                  "--batches", "8,32", "--dtype", "fp32,bf16", "--device", "cpu"])
    seen = []
    real = torch_model.main
    torch_model.main = lambda argv: seen.append(argv) or 0
    try:
        assert ex.compare(a) == 0
        os.environ["FAKE_RC"] = "3"
        assert ex.compare(a) == 3 and len(seen) == 1  # the peer does not run after a failed sweep
    finally:
        torch_model.main = real
        os.environ.pop("FAKE_RC", None)
    with open(log) as f:
        calls = f.read().splitlines()
    assert calls[0] == f"--model m.onnx --sizes model=8,32 --dtype fp32,bf16 --out {TMP}", calls
    assert calls[1] == f"plot {TMP}", calls
    assert seen[0] == ["--model", "mlp", "--size", "224", "--widths", "20-16-4", "--onnx", "m.onnx", "--device", "cpu",
                       "--batches", "8,32", "--dtype", "fp32,bf16", "--out", TMP], seen


def test_compare_is_one_command():
    """--compare on an exported MLP: the bench's model rows and PyTorch's
    rows in one model.csv, and the summary drawn"""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise runner.Skip("PyTorch is not installed")
    if not BENCH:
        raise runner.Skip("no bench path given")
    out, d = os.path.join(TMP, "cmp.onnx"), os.path.join(TMP, "cmp")
    assert ex.main(["--model", "mlp", "--widths", "20-16-4", "--out", out, "--compare", d, "--bench", BENCH,
                    "--batches", "8", "--device", "cpu"]) == 0
    _, rows = common.read_rows(os.path.join(d, "model.csv"))
    impls = {r["impl"] for r in rows if r["status"] in ("ok", "noisy")}
    assert "cpu" in impls and "torch-eager" in impls, impls
    assert os.path.exists(os.path.join(d, "summary.md"))


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
