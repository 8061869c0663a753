#!/usr/bin/env python3
"""Self-test of peers.torch_charlm: its arguments and its FLOP count
without torch; with PyTorch and a CUDA device, one small row per
precision, each checked against the float64 step and timed (skipped, with
the reason, elsewhere). Plain Python (no pytest):

    python3 bench/peers/tests/test_torch_charlm.py   # exit status 1 when a check fails
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:] = [os.path.join(ROOT, "bench")] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers import torch_charlm as tc  # noqa: E402
from peers.tests import runner  # noqa: E402

TMP = tempfile.mkdtemp(prefix="torchcharlm-")


def refused(argv):
    try:
        tc.parse(argv)
    except SystemExit as e:
        return e.code == 2
    return False


def test_arguments():
    assert refused([])
    assert refused(["--out", TMP, "--impl", "torch-jit"])
    assert refused(["--out", TMP, "--sizes", "1"])
    a = tc.parse(["--out", TMP, "--dtype", "bf16,fp32", "--impl", "torch-graph"])
    assert a.dtype == ["fp32", "bf16"] and a.impls == ["torch-graph"] and a.sizes == [64, 128, 256, 512]


def test_flops_are_the_sweeps():
    """sweep_transformer.c's step_flops at batch 8, T 64, written out: 6 per
    weight and token (12 C^2 a block, C V the head) plus 14 B H T^2 Dh
    (T+1)/2T a block's causal attention"""
    b, t, c, v, h, layers = 8, 64, 256, 96, 4, 4
    want = 6.0 * b * t * (12 * layers * c * c + c * v) + layers * 14.0 * b * h * t * t * (c // h) * (t + 1) / (2 * t)
    assert abs(tc.step_flops(b, t) - want) <= 1e-9 * want


def test_rows_on_the_gpu_pass_their_check():
    try:
        import torch
    except ImportError:
        raise runner.Skip("PyTorch is not installed")
    if not torch.cuda.is_available():
        raise runner.Skip("no CUDA device")
    assert tc.main(["--out", TMP, "--sizes", "64", "--batches", "2", "--dtype", "all"]) == 0
    _, rows = common.read_rows(os.path.join(TMP, "transformer.csv"))
    assert len(rows) == 8, rows
    assert all(r["status"] in ("ok", "noisy") for r in rows), [(r["impl"], r["dtype"], r["note"]) for r in rows]


def main():
    return runner.run(globals(), TMP, not_imported="torch")


if __name__ == "__main__":
    sys.exit(main())
