#!/usr/bin/env python3
"""Self-test of peers.numpy_mlp on tiny sizes (seconds): its
constants against the C sources, duograd's initial weights and data, the
float64 reference against finite differences, the check (planted wrong
steps must give "wrong" rows), the CSV column mapping, the FLOP count,
the timing rules, the errors, and with the bench binary (first argument)
a real mlp.csv that `bench plot` reads back with the peer's rows in its
summary. Plain Python with NumPy (no pytest):

    python3 bench/peers/tests/test_numpy_mlp.py [path/to/bench]   # exit status 1 when a check fails
"""
import contextlib
import io
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# bench/ in place of this folder on sys.path: the package imports as `peers`, each module once
sys.path[:] = [os.path.join(ROOT, "bench")] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers import numpy_mlp as peer  # noqa: E402
from peers.tests import runner  # noqa: E402

BENCH = sys.argv[1] if len(sys.argv) > 1 else None
TMP = tempfile.mkdtemp(prefix="numpypeer-")
FAST = ["--warmup", "0", "--reps", "2", "--min-time", "0", "--max-cv", "0"]  # timing that takes no time
TINY = [7, 6, 5, 4]  # widths of a network small enough for finite differences


def source(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def c_array(text, name):
    m = re.search(name + r"\[\]\s*=\s*\{([^}]*)\}", text)
    assert m, f"no array {name} in the C source"
    return m.group(1)


def run_main(args):
    """peer.main(args): (exit status, stderr text); SystemExit (argparse) caught"""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = peer.main(args)
        except SystemExit as e:
            rc = e.code
    return rc, err.getvalue() + out.getvalue()


def new_csv(name, columns=None, rows=""):
    path = os.path.join(TMP, name, "mlp.csv")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("# duograd bench 0.1.0\n# cores: 2\n" + ",".join(columns or common.bench_header()) + "\n" + rows)
    return path


def tiny_problem(batch=5, widths=TINY):
    params = peer.init_params(np, widths)
    x, y = peer.make_batch(np, widths, batch)
    return params, x, y


def checked_row(cls, widths=TINY, batch=5):
    """run_impl's row for impl class cls on a tiny problem (written to a scratch CSV)"""
    params, x, y = tiny_problem(batch, widths)
    ref = peer.reference_step(np, params, x, y)
    out = peer.open_mlp_csv(new_csv("checked"), ["test"])
    timing = common.Timing(warmup=0, reps=2, min_time=0, max_cv=0)
    spec = "-".join(map(str, widths))
    with contextlib.redirect_stderr(io.StringIO()):
        row = peer.run_impl(np, out, cls.__name__, cls, spec, batch, params, x, y, ref, 1, timing)
    out.close()
    return row


# ---- the tests ----

def test_constants_are_the_c_sources():
    """the peer times what the sweep times: widths, batches, seed, Adam, tolerances"""
    mlp = source("bench/sweeps/mlp/sweep_mlp.c")
    widths = tuple(re.findall(r'"([0-9-]+)"', c_array(mlp, "widths_list")))
    assert widths == peer.WIDTHS_LIST, f"sweep_mlp.c times {widths}"
    batches = tuple(int(v) for v in c_array(mlp, "default_batches").split(","))
    assert batches == peer.ALL_BATCHES and peer.DEFAULT_BATCHES == batches[:-1], f"default_batches {batches}"
    assert "- !ctx->extended" in mlp, "sweep_mlp.c no longer drops the last default batch without --sweep all"
    quick = tuple(int(v) for v in c_array(mlp, "quick_batches").split(","))
    assert quick == peer.QUICK_BATCHES, f"quick_batches {quick}"
    check_h = source("core/check/step_check.h")
    for macro, value in (("BENCH_STEP_LOSS_TOL", peer.LOSS_TOL), ("BENCH_STEP_UPDATE_TOL", peer.UPDATE_TOL)):
        m = re.search(rf"#define {macro}\s+(\S+)", check_h)
        assert m and float(m.group(1)) == value, f"{macro} is {m and m.group(1)}, the peer uses {value}"
    assert f'#define BENCH_STEP_CHECK "{peer.CHECK_WORD}"' in check_h
    m = re.search(r"bench_mlp_step\(.*?dg_optim_default\(DG_OPTIM_ADAM, ([0-9.e-]+)f\)", source("core/check/step_check.c"), re.S)
    assert m and float(m.group(1)) == peer.LR, f"the sweep's Adam lr is {m and m.group(1)}"
    optim = source("core/optim.c")
    for field, value in (("beta1", peer.BETA1), ("beta2", peer.BETA2), ("eps", peer.EPS)):
        m = re.search(rf"\.{field} = ([0-9.e-]+)f", optim)
        assert m and float(m.group(1)) == value, f"dg_optim_default's {field} is {m and m.group(1)}"
    assert "seed * 1000u + (uint64_t)i" in source("core/nn/mlp.c"), "dg_mlp_new seeds its weights differently"
    assert "spec->model(s->g, spec->cfg, 1, &s->model)" in source("core/check/step_check.c"), \
        "bench_step_build no longer builds the model with seed 1"


def test_init_and_data_are_duograds():
    """the first values dg_init_fill and dg_rng give (printed by a C program
    against core/plan.c and core/rng.h): the peer starts where duograd starts"""
    p = peer.init_params(np, [784, 256, 100, 10])
    want_w0 = [0.0047444189, -0.0331165716, 0.0265332889, -0.0464614294, -0.0135786282]
    want_w2 = [0.183721483, -0.0412559584, 0.00781568233, 0.219706848, -0.0786769614]
    assert np.allclose(p[0].ravel()[:5], want_w0, rtol=1e-7, atol=0), p[0].ravel()[:5]
    assert np.allclose(p[4].ravel()[:5], want_w2, rtol=1e-7, atol=0), p[4].ravel()[:5]
    assert [q.shape for q in p] == [(784, 256), (256,), (256, 100), (100,), (100, 10), (10,)]
    assert not any(b.any() for b in p[1::2]), "biases start at zero"
    x, y = peer.make_batch(np, [4, 5, 10], 3)
    want_x = [0.745781779, 0.971002758, 0.444359213, 0.44426471, 0.762894392, 0.877348661, 0.523067176,
              0.285508692, 0.793996632, 0.404142171, 0.605420351, 0.454937905]
    assert np.allclose(x.ravel(), want_x, rtol=1e-7, atol=0) and y.tolist() == [2, 6, 9], (x, y)
    assert x.dtype == np.float32 and x.shape == (3, 4)


def test_reference_gradients_match_finite_differences():
    """the float64 reference's gradients, against central differences of its
    own loss (so a wrong reference cannot pass the impls)"""
    params, x, y = tiny_problem(batch=4)
    p64 = [p.astype(np.float64) for p in params]
    for p in p64[1::2]:  # nonzero biases, so their gradients' paths are exercised
        p += 0.1
    x64 = x.astype(np.float64)
    _, grads = peer.reference_gradients(np, p64, x64, y)
    rng, h, worst = random.Random(3), 1e-6, 0.0
    for t in range(len(p64)):
        for _ in range(6):
            j = rng.randrange(p64[t].size)
            flat = p64[t].reshape(-1)
            keep = flat[j]
            flat[j] = keep + h
            up = peer.reference_gradients(np, p64, x64, y)[0]
            flat[j] = keep - h
            down = peer.reference_gradients(np, p64, x64, y)[0]
            flat[j] = keep
            fd, g = (up - down) / (2 * h), grads[t].reshape(-1)[j]
            worst = max(worst, abs(fd - g) / max(abs(fd), 1e-6))
    assert worst < 1e-5, f"reference gradient off by {worst:.3g} (relative) from finite differences"
    print(f"  worst relative difference {worst:.2g} over {6 * len(p64)} entries")


def test_impls_pass_the_check():
    row = checked_row(peer.NumpyStep)
    assert row["status"] == "ok" and row["max_rel_err"] < 1e-4 and row["reps"] == 2, row
    try:
        __import__("torch")
    except ImportError:
        print("  no torch: the torch-cpu impl is not tested")
        return
    row = checked_row(peer.TorchStep)
    assert row["status"] == "ok" and row["max_rel_err"] < 1e-4, row
    print("  numpy and torch-cpu pass")


class NoReluMask(peer.NumpyStep):
    """planted: the ReLU's derivative forgotten"""

    @staticmethod
    def relu_backward(d, out):
        pass


class BiasGradOneRow(peer.NumpyStep):
    """planted: a bias gradient from the batch's first row, not summed over it"""

    def gradients(self):
        loss = super().gradients()
        self.grad[1][:] = self.dz[0][0]
        return loss


# Not planted: a gradient off by a positive factor (a mean for a sum). Adam
# is blind to it: its update m / sqrt(v) does not change when g is scaled,
# but for eps; duograd's own check (core/check/step_check.h) is as blind.


class FlippedLastLayer(peer.NumpyStep):
    """planted: the last layer's weight gradient of the wrong sign"""

    def gradients(self):
        loss = super().gradients()
        self.grad[-2] *= -1
        return loss


class NoBiasCorrection(peer.NumpyStep):
    """planted: Adam without its bias correction"""

    def step_size(self):
        return peer.LR, peer.EPS


class LossSummed(peer.NumpyStep):
    """planted: the loss summed over the batch instead of averaged"""

    def gradients(self):
        return super().gradients() * self.x.shape[0]


def test_planted_wrong_steps_are_wrong():
    for cls in (NoReluMask, BiasGradOneRow, FlippedLastLayer, NoBiasCorrection, LossSummed):
        row = checked_row(cls)
        assert row["status"] == "wrong", f"{cls.__doc__.strip()}: status {row['status']}, err {row['max_rel_err']}"
        assert row["reps"] == 0 and math.isnan(row["median_ms"]) and math.isnan(row["gflops"]), row
        assert "rel err" in row["note"] and row["max_rel_err"] > min(peer.LOSS_TOL, peer.UPDATE_TOL), row
        print(f"  {cls.__doc__.strip()}: wrong, max_rel_err {row['max_rel_err']:.3g}")
    # and the row reads back as bench writes a wrong row: no times
    path = os.path.join(TMP, "checked", "mlp.csv")
    last = common.read_rows(path)[1][-1]
    assert last["status"] == "wrong" and last["reps"] == "0" and last["median_ms"] == "NaN", last


def test_rows_follow_the_files_column_order():
    cols = common.bench_header()
    random.Random(5).shuffle(cols)
    earlier = ",".join({"sweep": "mlp", "impl": "cpu", "status": "ok"}.get(c, "1") for c in cols) + "\n"
    path = new_csv("shuffled", cols, earlier)
    before = open(path).read()
    rc, text = run_main(["--out", os.path.dirname(path), "--widths", "7-6-5-4", "--sizes", "3,9",
                         "--impl", "numpy"] + FAST)
    assert rc == 0, text
    after = open(path).read()
    assert after.startswith(before), "earlier lines changed"
    assert "\n# numpy peer rows (bench/peers/numpy_mlp.py): numpy " in after, after
    rows = [r for r in common.read_rows(path)[1] if r["impl"] == "numpy"]
    assert len(rows) == 2 and all(len(r) == len(cols) for r in rows)
    for r, batch in zip(rows, (3, 9)):
        want = dict(sweep="mlp", case="7-6-5-4", impl="numpy", backend="cpu", dtype="fp32", m=str(batch), n="6",
                    k="7", batch=str(batch), transfer="0", tf32="0", cold="0", reps="2", check="f64-loss+update",
                    status="ok", gbps="NaN", scratch_bytes="0", arena_bytes="0", live_bytes="0")
        for c, v in want.items():
            assert r[c] == v, f"column {c}: {r[c]!r}, expected {v!r}"
        flops = peer.step_flops([7, 6, 5, 4], batch)
        assert math.isclose(float(r["gflops"]), flops / (float(r["median_ms"]) * 1e6), rel_tol=1e-5), r
        assert float(r["min_ms"]) <= float(r["median_ms"]) <= float(r["max_ms"]) and int(r["threads"]) >= 1, r
        assert 0 <= float(r["max_rel_err"]) < 1e-4, r


def test_rows_past_the_budget_are_skipped_and_say_so():
    """--budget: once the peer's time is spent, the remaining batches'
    rows are written as skipped with the reason, and the exit is still 0"""
    path = new_csv("budget", common.bench_header(), "")
    slow = ["--warmup", "0", "--reps", "2", "--min-time", "1.2", "--max-cv", "0"]  # 1.2 s of runs a row
    rc, text = run_main(["--out", os.path.dirname(path), "--widths", "7-6-5-4", "--sizes", "3,5,9",
                         "--impl", "numpy", "--budget", "1"] + slow)
    assert rc == 0, text
    rows = [r for r in common.read_rows(path)[1] if r["impl"] == "numpy"]
    assert [r["status"] for r in rows] == ["ok", "skipped", "skipped"] or \
        [r["status"] for r in rows] == ["noisy", "skipped", "skipped"], [(r["status"], r["note"]) for r in rows]
    assert all("--budget" in r["note"] for r in rows[1:]), rows
    assert rows[1]["reps"] == "0" and rows[1]["median_ms"] == "NaN", rows[1]


def test_flop_count_is_sweep_mlps():
    """6 flops per weight and row, as sweep_mlp.c: the committed duograd rows'
    gflops are this count over their median"""
    assert peer.step_flops([784, 256, 100, 10], 128) == 6 * 128 * (784 * 256 + 256 * 100 + 100 * 10)
    rows = [r for r in common.read_rows(os.path.join(ROOT, "reports", "cpu-2core", "mlp.csv"))[1] if r["impl"] == "cpu"]
    assert len(rows) >= 8
    for r in rows:
        w = peer.parse_widths(r["case"])
        base = peer.base_row(r["case"], "numpy", int(r["batch"]), 2)
        assert (str(base["m"]), str(base["n"]), str(base["k"])) == (r["m"], r["n"], r["k"]), (base, r)
        got = peer.step_flops(w, int(r["batch"])) / (float(r["median_ms"]) * 1e6)
        assert math.isclose(got, float(r["gflops"]), rel_tol=1e-5), f"{r['case']} {r['batch']}: {got} vs {r['gflops']}"


def test_timing_rules():
    """bench/runner/timing.c's counts: warm-up runs, at least --reps, a --max-reps
    cut noted, a row above --max-cv measured again and then noisy"""
    calls = []
    stats = common.measure(lambda: common.host_ms(lambda: calls.append(1)),
                           common.Timing(warmup=3, reps=4, min_time=0, max_cv=0))
    assert (stats["warmup"], stats["reps"], len(calls), stats["retries"]) == (3, 4, 7, 0), (stats, len(calls))
    stats = common.measure(lambda: common.host_ms(lambda: None),
                           common.Timing(warmup=0, reps=2, min_time=5, max_reps=6, max_cv=0))
    assert stats["reps"] == 6 and stats["capped"], stats
    row = peer.timed_row(peer.base_row("7-6-5-4", "numpy", 3, 1), stats, 1e6, common.Timing(max_reps=6, max_cv=0))
    assert row["status"] == "ok" and "--max-reps 6 reached" in row["note"], row
    times = iter([1.0, 9.0] * 100)  # every attempt's CV is far above 5%

    def uneven():
        end = time.perf_counter() + next(times) * 1e-3
        while time.perf_counter() < end:
            pass
    t = common.Timing(warmup=0, reps=4, min_time=0, max_cv=5, retries=2)
    stats = common.measure(lambda: common.host_ms(uneven), t)
    row = peer.timed_row(peer.base_row("7-6-5-4", "numpy", 3, 1), stats, 1e6, t)
    assert stats["retries"] == 2 and row["status"] == "noisy" and "measured 3 times" in row["note"], row


def test_errors():
    missing = os.path.join(TMP, "empty")
    os.makedirs(missing)
    rc, text = run_main(["--out", missing])
    assert rc == 2 and "mlp.csv: no such file" in text and "bench --sweep mlp" in text, text
    assert os.listdir(missing) == [], "a refused run wrote something"
    foreign = new_csv("foreign", ["a", "b", "c"])
    before = open(foreign).read()
    rc, text = run_main(["--out", os.path.dirname(foreign)])
    assert rc == 2 and "lacks the column(s) sweep" in text and open(foreign).read() == before, text
    meta_only = os.path.join(TMP, "meta-only", "mlp.csv")
    os.makedirs(os.path.dirname(meta_only))
    with open(meta_only, "w") as f:
        f.write("# duograd bench 0.1.0\n")
    rc, text = run_main(["--out", os.path.dirname(meta_only)])
    assert rc == 2 and "no header line" in text, text
    ok_dir = os.path.dirname(new_csv("args"))
    for bad, word in ((["--sizes", "0"], "--sizes"), (["--sizes", "12,x"], "--sizes"), (["--impl", "mkl"], "--impl"),
                      (["--widths", "784"], "--widths"), (["--max-cv", "nan"], "--max-cv"),
                      (["--reps", "9", "--max-reps", "3"], "--max-reps 3 is below --reps 9"), ([], "--out")):
        rc, text = run_main((["--out", ok_dir] if word != "--out" else []) + bad)
        assert rc == 2 and word in text, f"{bad}: exit {rc}: {text}"
    rc, text = run_main(["--help"])
    assert rc == 0 and "mlp.csv" in text and "--quick" in text and "torch-cpu" in text, text
    # a row cut short by a killed run is dropped before appending
    cut = new_csv("cut", rows="mlp,784-256-100-10,cpu,cp")
    rc, text = run_main(["--out", os.path.dirname(cut), "--widths", "7-6-5-4", "--sizes", "3", "--impl", "numpy"]
                        + FAST)
    assert rc == 0 and "incomplete last line dropped" in text, text
    assert [r["impl"] for r in common.read_rows(cut)[1]] == ["numpy"], open(cut).read()


def core_csv(name, line):
    """an mlp.csv whose metadata has `line` (bench's '# openblas core:' line, or anything)"""
    path = os.path.join(TMP, name, "mlp.csv")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("# duograd bench 0.1.0\n" + line + "\n" + ",".join(common.bench_header()) + "\n")
    return path


def test_the_core_comes_from_benchs_metadata():
    """the first word of bench's '# openblas core:' line becomes the peer's
    OPENBLAS_CORETYPE; a user's value, a file without the line, or a word
    that is not a core name change nothing"""
    path = core_csv("core-line", "# openblas core: SkylakeX (auto: OpenBLAS chose Prescott (SSE3 kernels) on a CPU "
                                 "with AVX512-BF16; checked: ...)")
    d = os.path.dirname(path)
    assert peer.bench_core(path) == "SkylakeX"
    env = peer.core_environment({"PATH": "/bin"}, d)
    assert env is not None and env["OPENBLAS_CORETYPE"] == "SkylakeX" and env["PATH"] == "/bin", env
    assert peer.core_source(env) == f"OPENBLAS_CORETYPE=SkylakeX: the core of {path}'s rows", peer.core_source(env)
    assert peer.core_environment({"OPENBLAS_CORETYPE": "Haswell"}, d) is None
    assert peer.core_source({"OPENBLAS_CORETYPE": "Haswell"}) == "user-set: OPENBLAS_CORETYPE=Haswell"
    assert peer.core_environment({}, os.path.dirname(new_csv("no-core-line"))) is None
    assert peer.core_environment({}, os.path.join(TMP, "no-such-folder")) is None
    assert peer.bench_core(core_csv("bad-core", "# openblas core: $(rm -rf /) (x)")) is None
    # a line after the header is a row's business, not the metadata's
    late = new_csv("late-line", rows="# openblas core: Haswell (x)\n")
    assert peer.bench_core(late) is None


def test_run_as_a_script_the_peer_runs_on_benchs_core():
    """executed again under bench's core before NumPy loads, the peer's
    OpenBLAS runs it, and the metadata and the numpy rows say so"""
    blas, _, core = peer.blas_info()
    if core is None or "DYNAMIC_ARCH" not in blas:
        raise runner.Skip(f"NumPy's BLAS is not a DYNAMIC_ARCH OpenBLAS ({blas}): one core, nothing to choose")
    # a core any x86-64 CPU runs, and not the one OpenBLAS picks for a current CPU
    want = "Core2" if core.lower() != "core2" else "Nehalem"
    path = core_csv("script-core", f"# openblas core: {want} (user-set: OPENBLAS_CORETYPE={want})")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    run = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "peers", "numpy_mlp.py"), "--out",
                          os.path.dirname(path), "--widths", "7-6-5-4", "--sizes", "3", "--impl", "numpy"] + FAST,
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "not on the same core" not in run.stderr, run.stderr
    text = open(path).read()
    assert f"openblas core: {want} (OPENBLAS_CORETYPE={want}: the core of {path}'s rows)" in text, text
    rows = common.read_rows(path)[1]
    assert [r["note"] for r in rows] == [f"openblas core {want}"], rows


def test_without_torch():
    """no torch: the numpy rows alone and a line on stderr; asked for by
    --impl, a refusal"""
    saved = sys.modules.get("torch", "absent")
    sys.modules["torch"] = None  # makes `import torch` raise ImportError
    try:
        path = new_csv("notorch")
        rc, text = run_main(["--out", os.path.dirname(path), "--widths", "7-6-5-4", "--sizes", "3"] + FAST)
        assert rc == 0 and "import torch failed" in text and "no torch-cpu rows" in text, text
        assert [r["impl"] for r in common.read_rows(path)[1]] == ["numpy"], open(path).read()
        rc, text = run_main(["--out", os.path.dirname(path), "--impl", "torch-cpu", "--sizes", "3"] + FAST)
        assert rc == 2 and "--impl torch-cpu: import torch failed" in text, text
    finally:
        if saved == "absent":
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved


def test_with_the_bench():
    """a real mlp.csv from the bench, the peer's rows appended, `bench plot`
    reads them all (strict numbers) and the summary has the comparison"""
    if not BENCH:
        raise runner.Skip("no bench binary given (tests/CMakeLists.txt passes it)")
    out = os.path.join(TMP, "real")
    no_gnuplot = dict(os.environ, PATH="/nonexistent")  # the summary alone, quickly
    run = subprocess.run([BENCH, "--sweep", "mlp", "--sizes", "16", "--case", "784-256-100-10", "--backends", "cpu",
                          "--out", out] + FAST, capture_output=True, text=True, env=no_gnuplot)
    assert run.returncode == 0, run.stderr
    rc, text = run_main(["--out", out, "--sizes", "16", "--widths", "784-256-100-10", "--impl", "numpy"] + FAST)
    assert rc == 0, text
    rows = common.read_rows(os.path.join(out, "mlp.csv"))[1]
    assert [r["impl"] for r in rows] == ["cpu", "numpy"], rows
    duo, np_row = rows
    for c in ("sweep", "case", "backend", "dtype", "m", "n", "k", "batch", "check"):
        assert duo[c] == np_row[c], f"column {c}: duograd {duo[c]!r}, numpy {np_row[c]!r}"
    # the same initial weights and data: the same float64 reference, so the
    # float32 steps' errors are of the same size
    assert float(np_row["max_rel_err"]) < 10 * max(float(duo["max_rel_err"]), 1e-6), (duo, np_row)
    plot = subprocess.run([BENCH, "plot", out], capture_output=True, text=True, env=no_gnuplot)
    assert plot.returncode == 0, plot.stderr
    summary = open(os.path.join(out, "summary.md")).read()
    assert "duograd against its peers" in summary and "| numpy ms | numpy / duograd |" in summary, summary
    line = [ln for ln in summary.splitlines() if ln.startswith("| 784-256-100-10 | 16 |")]
    assert len(line) == 1 and line[0].count("|") == 8 and line[0].rstrip().endswith("x |"), line
    print(f"  {line[0]}")
    if not shutil.which("gnuplot"):
        print("  no gnuplot: the chart's numpy series is not checked")
        return
    plot = subprocess.run([BENCH, "plot", out], capture_output=True, text=True)
    assert plot.returncode == 0, plot.stderr
    script = open(os.path.join(out, "plot-data", "mlp_time_0.gp")).read()
    assert "title 'cpu'" in script and "title 'numpy'" in script, script


def main():
    return runner.run(globals(), TMP)


if __name__ == "__main__":
    sys.exit(main())
