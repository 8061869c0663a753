#!/usr/bin/env python3
"""Self-test of peers.torch_conv's parts that need no torch: its
copy of the layer shapes against the bench's own (the shapes table of a
real conv sweep's summary, with the bench binary as first argument), the
m, n, k, FLOP and byte columns per direction against duograd's convention
and against a committed conv.csv, the rows it plans from duograd's, CSV
appending in the file's column order (that `bench plot` then reads), the
check's tolerance function, and with NumPy the float64 reference against a
brute-force convolution and the row flow (check, timing, wrong, skipped,
failed rows) on a NumPy stand-in for a device. Plain Python (no pytest):

    python3 bench/peers/tests/test_torch_conv.py [path/to/bench]   # exit status 1 when a check fails
"""
import math
import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# bench/ in place of this folder on sys.path: the package imports as `peers`, each module once
sys.path[:] = [os.path.join(ROOT, "bench")] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers import torch_conv as cp  # noqa: E402
from peers.tests import runner  # noqa: E402

try:
    import numpy as np
except ImportError:
    np = None

BENCH = sys.argv[1] if len(sys.argv) > 1 else None
TMP = tempfile.mkdtemp(prefix="convpeer-")
COMMITTED = os.path.join(ROOT, "reports", "h100", "conv.csv")


def need_numpy():
    if np is None:
        raise runner.Skip("no NumPy in this python3")


def need_bench():
    if not BENCH:
        raise runner.Skip("no bench binary given (first argument)")


def csv_row(case, impl, backend, batch, status="ok", gflops=100.0, mnk=None):
    """a duograd row of conv.csv as read_rows gives it (strings)"""
    sh, d = cp.parse_case(case)
    g = cp.geometry(sh, d, batch)
    m, n, k = mnk or (g["m"], g["n"], g["k"])
    return dict(sweep="conv", case=case, impl=impl, backend=backend, m=str(m), n=str(n), k=str(k), batch=str(batch),
                transfer="0", status=status, gflops=str(gflops))


# ---- the shapes and their geometry ----

SUMMARY_SHAPE = re.compile(r"^\| (\d+) \| (\S+) \| (\d+)x(\d+)x(\d+) -> (\d+)x(\d+)x(\d+), (\d+)x(\d+) stride (\d+) "
                           r"pad (\d+) \| \d+ \|$")


def test_shapes_match_the_bench():
    """every shape of a real conv sweep (batch 1, forward, CPU, one run
    each) in its summary's shapes table: the same names, order and
    geometry as SHAPES; its rows' m, n, k agree with SHAPES' geometry"""
    need_bench()
    out = os.path.join(TMP, "sync")
    r = subprocess.run([BENCH, "--sweep", "conv", "--sizes", "conv=1", "--backends", "cpu", "--case", "*:fwd",
                        "--impl", "cpu-im2col", "--warmup", "0", "--reps", "1", "--min-time", "0", "--max-cv", "0",
                        "--out", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(out, "summary.md")) as f:
        table = [SUMMARY_SHAPE.match(line.rstrip("\n")) for line in f]
    shapes = [m.groups() for m in table if m]
    assert len(shapes) == len(cp.SHAPES), f"the bench has {len(shapes)} shapes, SHAPES {len(cp.SHAPES)}"
    for k, (got, sh) in enumerate(zip(shapes, cp.SHAPES)):
        num, name, c, h, w, o, oh, ow, kh, kw, s, p = got
        want = (str(k + 1), sh.name) + tuple(str(v) for v in (sh.c, sh.h, sh.w, sh.o, sh.oh, sh.ow, sh.kh, sh.kw,
                                                               sh.stride, sh.pad))
        assert got == want, f"shape {k + 1}: the bench says {got}, SHAPES {want}"
    _, rows = common.read_rows(os.path.join(out, "conv.csv"))
    assert [r["case"] for r in rows] == [s.name + ":fwd" for s in cp.SHAPES], [r["case"] for r in rows]
    assert not cp.geometry_problems(rows), cp.geometry_problems(rows)
    wanted = cp.plan(rows, ["gpu", "cpu"])
    assert not wanted["gpu"] and [(s.name, d, b) for s, d, b in wanted["cpu"]] == \
        [(s.name, "fwd", 1) for s in cp.SHAPES], wanted["cpu"]
    print(f"  {len(shapes)} shapes, the same as the bench's")


def test_geometry_per_direction():
    """cnn-conv2 (x [b,32,14,14], w [64,32,3,3], padding 1) at batch 2, as
    tests/test_sweep_conv.c reads duograd's rows: forward M = o, N =
    batch*oh*ow, K = c*kh*kw; backward-data M = c*kh*kw, N = batch*oh*ow,
    K = o; backward-weight M = o, N = c*kh*kw, K = batch*oh*ow"""
    sh = cp.SHAPE_BY_NAME["cnn-conv2"]
    cols = 2 * 196
    want = {"fwd": (64, cols, 288), "bwd-data": (288, cols, 64), "bwd-weight": (64, 288, cols)}
    for d, mnk in want.items():
        g = cp.geometry(sh, d, 2)
        assert (g["m"], g["n"], g["k"]) == mnk, f"{d}: {g}"
        assert g["flops"] == 2.0 * 2 * 64 * 196 * 288, g
        assert g["bytes"] == 4.0 * (2 * 32 * 196 + 64 * 288 + 2 * 64 * 196), g
    stem = cp.SHAPE_BY_NAME["r18i-stem"]
    assert (stem.oh, stem.ow) == (112, 112) and cp.output_shape(stem, "bwd-weight", 8) == (64, 3, 7, 7)
    assert cp.output_shape(stem, "bwd-data", 8) == (8, 3, 224, 224)
    assert cp.output_shape(stem, "fwd", 8) == (8, 64, 112, 112)


def test_geometry_against_committed_rows():
    """every row of the committed H100 conv.csv: its m, n, k are SHAPES'
    geometry, and every timed row's GFLOP/s and GB/s times its median give
    the FLOPs and bytes the peer counts"""
    _, rows = common.read_rows(COMMITTED)
    assert len(rows) > 100, len(rows)
    assert not cp.geometry_problems(rows, COMMITTED)
    timed = [r for r in rows if r["status"] in ("ok", "noisy")]
    assert len(timed) > 100, len(timed)
    for r in timed:
        sh, d = cp.parse_case(r["case"])
        g = cp.geometry(sh, d, int(r["batch"]))
        ms = float(r["median_ms"])
        for col, key in (("gflops", "flops"), ("gbps", "bytes")):
            got = float(r[col]) * ms * 1e6
            assert abs(got / g[key] - 1) < 2e-5, f"{r['case']} batch {r['batch']}: {col} x median = {got}, {g[key]}"


def test_geometry_problems_are_found():
    good = csv_row("cnn-conv2:fwd", "cpu-im2col", "cpu", 8)
    shifted = csv_row("cnn-conv2:bwd-data", "gpu-im2col", "gpu", 8, mnk=(64, 1568, 288))  # forward's m, n, k
    unknown = csv_row("cnn-conv2:fwd", "gpu-im2col", "gpu", 8)
    unknown["case"] = "cnn-conv3:fwd"
    failed = dict(csv_row("lenet-c1:fwd", "cpu-im2col", "cpu", 8), m="0", n="0", k="0", status="oom")
    bad = cp.geometry_problems([good, shifted, unknown, failed])
    assert sorted(bad) == ["cnn-conv2:bwd-data", "cnn-conv3:fwd"], bad
    assert "(64, 1568, 288)" in bad["cnn-conv2:bwd-data"] and "(288, 1568, 64)" in bad["cnn-conv2:bwd-data"], bad
    wanted = cp.plan([good, shifted], ["cpu", "gpu"], leave_out=bad)
    assert [(s.name, d, b) for s, d, b in wanted["cpu"]] == [("cnn-conv2", "fwd", 8)] and not wanted["gpu"], wanted


def test_parse_case():
    sh, d = cp.parse_case("r18c-l2.0-conv1:bwd-weight")
    assert sh.name == "r18c-l2.0-conv1" and sh.family == "r18c" and d == "bwd-weight" and (sh.oh, sh.ow) == (16, 16)
    for bad in ("r18c-l2.0-conv1", "r18c-l2.0-conv1:bwd", "nope:fwd", ""):
        try:
            cp.parse_case(bad)
            raise AssertionError(f"'{bad}' accepted")
        except ValueError:
            pass


# ---- which rows ----

def test_plan_follows_duograd_rows():
    rows = [csv_row("r18i-stem:fwd", "cpu-im2col", "cpu", 32), csv_row("r18i-stem:fwd", "cpu-im2col", "cpu", 128,
                                                                        status="skipped"),
            csv_row("r18i-stem:fwd", "gpu-im2col", "gpu", 128), csv_row("r18i-stem:fwd", "gpu-implicit", "gpu", 128),
            csv_row("cnn-conv1:bwd-data", "gpu-im2col", "gpu", 8, status="wrong"),
            csv_row("cnn-conv1:bwd-data", "gpu-im2col", "gpu", 1, status="interrupted"),
            csv_row("lenet-c2:bwd-weight", "torch-cudnn", "gpu", 4)]  # a peer's earlier row: not duograd's
    w = cp.plan(rows, ["gpu", "cpu"])
    names = {dev: [(s.name, d, b) for s, d, b in items] for dev, items in w.items()}
    assert names["cpu"] == [("r18i-stem", "fwd", 32)], names
    assert names["gpu"] == [("r18i-stem", "fwd", 128), ("cnn-conv1", "bwd-data", 8)], names
    w = cp.plan(rows, ["cpu"], batches=[2, 1])
    assert [(s.name, d, b) for s, d, b in w["cpu"]] == [("r18i-stem", "fwd", 1), ("r18i-stem", "fwd", 2),
                                                         ("cnn-conv1", "bwd-data", 1), ("cnn-conv1", "bwd-data", 2)]
    w = cp.plan(rows, ["gpu"], filt="cnn")
    assert [(s.name, b) for s, _, b in w["gpu"]] == [("cnn-conv1", 8)], w


def test_plan_without_duograd_rows():
    """every case at 1, 8, 32, 128; the CPU's ImageNet shapes at 32 at most;
    in SHAPES' order, then batch, then direction"""
    w = cp.plan([], ["gpu", "cpu"])
    r18i = sum(s.family == "r18i" for s in cp.SHAPES)
    assert len(w["gpu"]) == 3 * 4 * len(cp.SHAPES), len(w["gpu"])
    assert len(w["cpu"]) == 3 * 4 * len(cp.SHAPES) - 3 * r18i, len(w["cpu"])
    assert max(b for s, _, b in w["cpu"] if s.family == "r18i") == 32
    first = [(s.name, d, b) for s, d, b in w["gpu"][:4]]
    assert first == [("r18c-stem", "fwd", 1), ("r18c-stem", "bwd-data", 1), ("r18c-stem", "bwd-weight", 1),
                     ("r18c-stem", "fwd", 8)], first
    g = cp.groups(w["gpu"][:4])
    assert [(s.name, b, ds) for s, b, ds in g] == [("r18c-stem", 1, list(cp.DIRS)), ("r18c-stem", 8, ["fwd"])], g


# ---- the CSV ----

def read_back(path):
    cols, rows = common.read_rows(path)
    return cols, rows


def peer_row(impl, case, batch, ms):
    sh, d = cp.parse_case(case)
    r = cp.base_row(impl, sh, d, batch, 0 if cp.IMPLS[impl]["gpu"] else 16)
    r.update(max_rel_err=1.5e-8, note="backend Cudnn")
    cp.finish_row(r, sh, d, 3, [ms, ms * 1.01, ms * 0.99], 5.0)
    return r


def test_rows_appended_in_the_files_column_order():
    cols = common.bench_header()
    random.Random(3).shuffle(cols)
    folder = os.path.join(TMP, "append")
    os.makedirs(folder)
    path = os.path.join(folder, "conv.csv")
    own = dict(sweep="conv", case="cnn-conv2:fwd", impl="gpu-implicit", backend="gpu", dtype="fp32", m=64, n=1568,
               k=288, batch=8, threads=0, transfer=0, tf32=0, cold=0, warmup=2, reps=100, median_ms=0.01,
               min_ms=0.009, max_ms=0.012, cv_pct=1.0, gflops=4624.1, gbps=100.0, scratch_bytes=0, arena_bytes=0,
               live_bytes=0, max_rel_err=1e-7, check="f64-sampled", status="ok", note="")
    before = "# duograd bench\n" + ",".join(cols) + "\n" + common.format_row(own, cols)
    with open(path, "w") as f:
        f.write(before)
    out = common.CsvOut(path, ["test"], cp.PROG)
    rows = [peer_row("torch-cudnn", "cnn-conv2:fwd", 8, 0.02), peer_row("torch-cpu", "cnn-conv2:bwd-weight", 8, 0.5)]
    for r in rows:
        out.write(r)
    out.close()
    with open(path) as f:
        text = f.read()
    assert text.startswith(before), "duograd's lines changed"
    got_cols, got = read_back(path)
    assert got_cols == cols and len(got) == 3, (got_cols, len(got))
    for want, r in zip(rows, got[1:]):
        for c in cols:
            assert r[c] == common.csv_field(want[c]), f"{c}: {r[c]!r}, wrote {want[c]!r}"
    fwd = got[1]
    flops = 2.0 * 8 * 64 * 196 * 288
    assert (fwd["m"], fwd["n"], fwd["k"], fwd["transfer"], fwd["tf32"], fwd["scratch_bytes"]) == \
        ("64", "1568", "288", "0", "0", "0"), fwd
    assert abs(float(fwd["gflops"]) / (flops / 0.02e6) - 1) < 1e-5 and fwd["check"] == cp.CHECK_WORD, fwd
    assert fwd["status"] == "ok" and got[2]["backend"] == "cpu" and got[2]["threads"] == "16", got[2]
    empty = [c for c in cols if fwd[c] == "" and c != "note"]
    assert not empty, f"columns left empty: {empty}"  # bench's reader refuses an empty number
    if BENCH:  # the report reads the file, peer rows and all
        r = subprocess.run([BENCH, "plot", folder], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        with open(os.path.join(folder, "summary.md")) as f:
            assert "torch-cudnn" in f.read(), "the summary shows no peer column"


def test_finish_row():
    r = peer_row("torch-cudnn", "lenet-c1:fwd", 32, 0.01)
    assert r["reps"] == 3 and r["warmup"] == 3 and r["median_ms"] == 0.01 and r["status"] == "ok", r
    g = cp.geometry(cp.SHAPE_BY_NAME["lenet-c1"], "fwd", 32)
    assert abs(r["gflops"] - g["flops"] / 1e4) < 1e-9 and abs(r["gbps"] - g["bytes"] / 1e4) < 1e-9, r
    sh, d = cp.parse_case("lenet-c1:fwd")
    noisy = cp.base_row("torch-cpu", sh, d, 1, 4)
    cp.finish_row(noisy, sh, d, 3, [1.0, 2.0, 3.0], 5.0, "stopped at 3 runs by --row-time 1 s")
    assert noisy["status"] == "noisy" and "cv above 5%" in noisy["note"] and "--row-time" in noisy["note"], noisy
    long = cp.base_row("torch-cpu", sh, d, 1, 4)
    cp.add_note(long, "x" * 300)
    assert len(long["note"]) == cp.NOTE_MAX


def test_timing_of_an_impl():
    """TorchOps.time (no torch needed: a stand-in's one_call and sync):
    --warmup calls, then --reps and --min-time, the --max-reps and
    --row-time cuts named"""
    class Stand:
        def __init__(self, ms):
            self.calls, self.synced, self.ms = 0, 0, ms

        def one_call(self, fn):
            self.calls += 1
            return self.ms

        def sync(self):
            self.synced += 1
    opts = dict(warmup=2, reps=5, min_time=0.0, max_reps=1000, row_time=1.0)
    s = Stand(0.5)
    warm, ms, why = cp.TorchOps.time(s, None, opts)
    assert (warm, len(ms), why, s.calls, s.synced) == (2, 5, "", 7, 1), (warm, ms, why, s.calls)
    warm, ms, why = cp.TorchOps.time(Stand(0.001), None, dict(opts, min_time=10.0, max_reps=50))
    assert len(ms) == 50 and why == "--max-reps 50 before --min-time", (len(ms), why)
    slow = Stand(1.0)
    slow.one_call = lambda fn: (__import__("time").sleep(0.02), 1.0)[1]
    warm, ms, why = cp.TorchOps.time(slow, None, dict(opts, warmup=0, min_time=100.0, row_time=0.05))
    assert why == f"stopped at {len(ms)} runs by --row-time 0.05 s" and 2 <= len(ms) < 10, (len(ms), why)


# ---- the check ----

def test_check_error():
    exact, abs_sum = [1.0, -2.0, 0.0, 0.5], [4.0, 8.0, 0.0, 1.0]
    assert cp.check_error(exact, abs_sum, exact) == 0.0
    assert abs(cp.check_error(exact, abs_sum, [1.0 + 4e-6, -2.0, 0.0, 0.5]) - 1e-6) < 1e-15
    # scaled by sum |terms|: 8e-5 off an entry of sum |terms| 8 is 1e-5, the largest error
    assert abs(cp.check_error(exact, abs_sum, [1.0 + 4e-6, -2.0 - 8e-5, 0.0, 0.5]) - 1e-5) < 1e-15
    assert cp.check_error(exact, abs_sum, [1.0, -2.0, 1e-30, 0.5]) == math.inf  # no terms: exactly 0
    assert cp.check_error(exact, abs_sum, [1.0, math.nan, 0.0, 0.5]) == math.inf
    assert cp.check_error(exact, abs_sum, [1.0, -2.0, 0.0, math.inf]) == math.inf
    assert cp.CHECK_TOL == 1e-5 and cp.CHECK_SAMPLES == 256 and cp.CHECK_WORD == "f64-sampled"
    assert "<= 1e-05" in cp.check_note(3e-8) and "> tol 1e-05" in cp.check_note(2e-3)


def test_sample_indices():
    a, b = cp.sample_indices(1000, 7), cp.sample_indices(1000, 7)
    assert a == b and len(a) == cp.CHECK_SAMPLES and a[:2] == [0, 999] and all(0 <= i < 1000 for i in a)
    assert cp.sample_indices(1000, 8) != a
    assert cp.unravel(2 * 120 + 3 * 30 + 4 * 6 + 1, (3, 4, 5, 6)) == (2, 3, 4, 1)


# ---- with NumPy: the reference and the row flow ----

def brute(direction, sh, x, w, dy):
    """the direction's whole output in float64 by its definition (loops)"""
    n, c, h, wd = x.shape
    o, oh, ow = sh.o, sh.oh, sh.ow
    out = np.zeros(cp.output_shape(sh, direction, n))
    for b in range(n):
        for oo in range(o):
            for y in range(oh):
                for xx in range(ow):
                    for ci in range(c):
                        for ki in range(sh.kh):
                            for kj in range(sh.kw):
                                iy, ix = y * sh.stride - sh.pad + ki, xx * sh.stride - sh.pad + kj
                                if not (0 <= iy < h and 0 <= ix < wd):
                                    continue
                                if direction == "fwd":
                                    out[b, oo, y, xx] += float(x[b, ci, iy, ix]) * float(w[oo, ci, ki, kj])
                                elif direction == "bwd-data":
                                    out[b, ci, iy, ix] += float(dy[b, oo, y, xx]) * float(w[oo, ci, ki, kj])
                                else:
                                    out[oo, ci, ki, kj] += float(dy[b, oo, y, xx]) * float(x[b, ci, iy, ix])
    return out


TINY = (cp.Shape("t-s2", 3, 7, 6, 4, 3, 3, 2, 1), cp.Shape("t-down", 2, 5, 5, 3, 1, 1, 2, 0),
        cp.Shape("t-5x5", 2, 6, 6, 3, 5, 5, 1, 2), cp.Shape("t-7x7", 1, 9, 9, 2, 7, 7, 2, 3))


def inputs(sh, batch, seed):
    return NumpyOps().host_inputs(cp.operand_shapes(sh, batch), seed)


def f64(a):
    return a.astype(np.float64)


def test_reference_against_brute_force():
    """every entry of each direction of odd geometries (stride 2 with
    padding, a strided 1x1, 5x5 padded, 7x7 stride 2 pad 3: taps in the
    padding, unreached inputs): exact value and sum |terms|"""
    need_numpy()
    for sh in TINY:
        t = inputs(sh, 2, 11)
        for d in cp.DIRS:
            full = brute(d, sh, t["x"], t["w"], t["dy"])
            a, b = (t[k] for k in cp.OPERANDS[d])
            idx = list(range(full.size))
            exact, abs_sum = cp.reference(d, sh, 2, a, b, idx, f64)
            assert np.allclose(exact, full.reshape(-1), rtol=1e-12, atol=1e-12), f"{sh.name} {d}"
            # sum |terms| >= |sum| everywhere, and 0 only where nothing reaches the entry
            assert all(s >= abs(e) - 1e-12 for e, s in zip(exact, abs_sum)), f"{sh.name} {d}"
            # the same terms made positive: their sum is sum |terms|
            pos = {k: np.abs(v) for k, v in t.items()}
            full_abs = brute(d, sh, pos["x"], pos["w"], pos["dy"])
            assert np.allclose(abs_sum, full_abs.reshape(-1), rtol=1e-12, atol=1e-12), f"{sh.name} {d} abs"
    print(f"  {len(TINY)} geometries x 3 directions, every entry")


def conv32(direction, sh, t):
    """the direction's output computed in float32 with NumPy (im2col-free
    tap loops): a correct float32 implementation"""
    s, p = sh.stride, sh.pad
    x, w, dy = t["x"], t["w"], t["dy"]
    n = x.shape[0]
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    taps = [(ki, kj, (slice(None), slice(None), slice(ki, ki + s * (sh.oh - 1) + 1, s),
                      slice(kj, kj + s * (sh.ow - 1) + 1, s))) for ki in range(sh.kh) for kj in range(sh.kw)]
    if direction == "fwd":
        y = np.zeros((n, sh.o, sh.oh, sh.ow), np.float32)
        for ki, kj, sl in taps:
            y += np.einsum("ncyx,oc->noyx", xp[sl], w[:, :, ki, kj]).astype(np.float32)
        return y
    if direction == "bwd-data":
        dxp = np.zeros_like(xp)
        for ki, kj, sl in taps:
            dxp[sl] += np.einsum("noyx,oc->ncyx", dy, w[:, :, ki, kj]).astype(np.float32)
        return dxp[:, :, p:p + sh.h, p:p + sh.w]
    dw = np.zeros_like(w)
    for ki, kj, sl in taps:
        dw[:, :, ki, kj] = np.einsum("noyx,ncyx->oc", dy, xp[sl])
    return dw


class NumpyOps:
    """a stand-in device for run_items: NumPy float32 convolutions, the
    host clock; `wrong` scales one direction's output, `fail` raises"""
    gpu = False
    threads = 2

    def __init__(self, wrong=None, fail=None):
        self.wrong, self.fail, self.recovered = wrong, fail, 0

    f64 = staticmethod(f64)

    def host_inputs(self, shapes, seed):
        rng = np.random.default_rng(seed)
        return {k: (rng.random(s, dtype=np.float32) * 2 - 1).astype(np.float32) for k, s in shapes.items()}

    def load(self, host):
        return host

    def op(self, direction, sh, t):
        def fn():
            if direction == self.fail:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore")
            y = conv32(direction, sh, t)
            return y * np.float32(1.001) if direction == self.wrong else y
        return fn

    def gather(self, out, idx):
        return [float(v) for v in out.reshape(-1)[idx]]

    def backend(self, sh, t):
        return "backend numpy"

    def time(self, fn, opts):
        for _ in range(opts["warmup"]):
            fn()
        return opts["warmup"], [0.5, 0.25, 0.75][:opts["reps"]], ""

    def scratch(self, fn):
        return 1024

    def recover(self):
        self.recovered += 1

    def failure_status(self, e):
        return "oom" if "out of memory" in str(e) else "error"


OPTS = dict(warmup=1, reps=3, min_time=0.0, max_reps=10, row_time=1.0, max_cv=0.0, time_limit=99.0)


def run_fake(ops, cases, name, deadline=None):
    """run_items over cases [(case, batch)] into a fresh CSV: the rows read back"""
    path = os.path.join(TMP, name, "conv.csv")
    os.makedirs(os.path.dirname(path))
    out = common.CsvOut(path, ["fake"], cp.PROG)
    items = [cp.parse_case(c) + (b,) for c, b in cases]
    refs = cp.RefCache(os.path.dirname(path))
    logged = []
    done = cp.run_items(out, ops, "torch-cpu", items, dict(OPTS, deadline=deadline or 1e18), refs, logged.append)
    out.close()
    assert logged == done
    return common.read_rows(path)[1]


CASES = [("lenet-c2:fwd", 2), ("lenet-c2:bwd-data", 2), ("lenet-c2:bwd-weight", 2), ("cnn-conv1:bwd-data", 3)]


def test_rows_on_a_stand_in_device():
    """a correct float32 device: every row checked ok and timed; a device
    0.1% off in bwd-weight: that row wrong, not timed; a device that runs
    out of memory: an oom row; past the deadline: skipped rows"""
    need_numpy()
    rows = run_fake(NumpyOps(), CASES, "good")
    assert [(r["case"], r["batch"]) for r in rows] == [(c, str(b)) for c, b in CASES]
    for r in rows:
        g = cp.geometry(*cp.parse_case(r["case"]), int(r["batch"]))
        assert r["status"] == "ok" and float(r["max_rel_err"]) <= cp.CHECK_TOL, r
        assert (int(r["m"]), int(r["n"]), int(r["k"])) == (g["m"], g["n"], g["k"]), r
        assert r["reps"] == "3" and r["warmup"] == "2" and r["median_ms"] == "0.5" and r["scratch_bytes"] == "1024", r
        assert abs(float(r["gflops"]) - g["flops"] / 0.5e6) < 1e-4 * float(r["gflops"]), r
        assert r["note"].startswith("backend numpy; 256 entries vs f64 dot products") and r["check"] == "f64-sampled"
    # the references were kept for the next process
    assert os.path.exists(os.path.join(TMP, "good", "lenet-c2-bwd-weight-b2.json"))
    rows = run_fake(NumpyOps(wrong="bwd-weight"), CASES, "wrong")
    assert [r["status"] for r in rows] == ["ok", "ok", "wrong", "ok"], [r["status"] for r in rows]
    bad = rows[2]
    assert bad["reps"] == "0" and bad["median_ms"] == "NaN" and float(bad["max_rel_err"]) > 10 * cp.CHECK_TOL, bad
    assert "WRONG: 256 entries" in bad["note"], bad
    ops = NumpyOps(fail="bwd-data")
    rows = run_fake(ops, CASES, "oom")
    assert [r["status"] for r in rows] == ["ok", "oom", "ok", "oom"] and ops.recovered == 2, rows
    assert rows[1]["note"] == "CUDA out of memory. Tried to allocate 2.00 GiB", rows[1]
    rows = run_fake(NumpyOps(), CASES, "late", deadline=1.0)
    assert all(r["status"] == "skipped" and "--time-limit" in r["note"] for r in rows), rows


def test_a_wrong_kernel_fails_the_check():
    """conv_check's planted errors on a real layer (cnn-conv2, batch 2):
    a correct float32 result passes, scaled by 1.001 fails, correlation with
    flipped weights fails, a weight gradient without the last image fails"""
    need_numpy()
    sh = cp.SHAPE_BY_NAME["cnn-conv2"]
    t = inputs(sh, 2, 5)
    flipped = dict(t, w=np.ascontiguousarray(t["w"][:, :, ::-1, ::-1]))
    short = dict(t, dy=t["dy"].copy())
    short["dy"][-1] = 0
    for d in cp.DIRS:
        a, b = (t[k] for k in cp.OPERANDS[d])
        idx = cp.sample_indices(math.prod(cp.output_shape(sh, d, 2)), 3)
        exact, abs_sum = cp.reference(d, sh, 2, a, b, idx, f64)
        good = conv32(d, sh, t).reshape(-1)
        err = cp.check_error(exact, abs_sum, [float(v) for v in good[idx]])
        assert err <= cp.CHECK_TOL / 10, f"{d}: a correct float32 result: {err}"
        assert cp.check_error(exact, abs_sum, [float(v) * 1.001 for v in good[idx]]) > cp.CHECK_TOL, d
        wrong = conv32(d, sh, short if d == "bwd-weight" else flipped).reshape(-1)
        assert cp.check_error(exact, abs_sum, [float(v) for v in wrong[idx]]) > cp.CHECK_TOL, d


def test_summary_lines():
    duograd = {("cnn-conv2:fwd", 8, "gpu"): 200.0, ("cnn-conv2:bwd-data", 8, "gpu"): 50.0}
    rows = [dict(impl="torch-cudnn", case="cnn-conv2:fwd", batch=8, backend="gpu", status="ok", gflops=100.0),
            dict(impl="torch-cudnn", case="cnn-conv2:bwd-data", batch=8, backend="gpu", status="noisy", gflops=100.0),
            dict(impl="torch-cudnn", case="cnn-conv2:bwd-weight", batch=8, backend="gpu", status="wrong",
                 gflops=math.nan),
            dict(impl="torch-cpu", case="cnn-conv2:fwd", batch=8, backend="cpu", status="skipped", gflops=math.nan)]
    lines = cp.summary_lines(rows, duograd)
    assert lines[0] == ("torch-cudnn: 3 rows: 1 noisy, 1 ok, 1 wrong; duograd's best GPU / torch-cudnn, geometric "
                        "mean (rows): fwd 2.00 (1), bwd-data 0.50 (1)"), lines[0]
    assert lines[1] == "torch-cpu: 1 rows: 1 skipped", lines[1]
    best = cp.best_duograd([csv_row("cnn-conv2:fwd", "gpu-im2col", "gpu", 8, gflops=10),
                            csv_row("cnn-conv2:fwd", "gpu-implicit", "gpu", 8, gflops=30),
                            dict(csv_row("cnn-conv2:fwd", "gpu-im2col", "gpu", 8, gflops=99), transfer="1"),
                            csv_row("cnn-conv2:fwd", "gpu-implicit", "gpu", 32, status="wrong", gflops=99)])
    assert best == {("cnn-conv2:fwd", 8, "gpu"): 30.0}, best


def main():
    return runner.run(globals(), TMP, not_imported="torch")


if __name__ == "__main__":
    sys.exit(main())
