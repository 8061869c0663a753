#!/usr/bin/env python3
"""peers.numpy_mlp: the NumPy (and PyTorch CPU) peer of `bench --sweep mlp`.

Times the same training step as bench/sweeps/mlp/sweep_mlp.c's cpu rows (the MLP of
core/nn/mlp.c: linear layers with biases and ReLU between them, softmax
cross-entropy averaged over the batch, backward, Adam with lr 1e-3) on the
same widths, batch sizes, initial weights and data, in float32, and appends
the rows to DIR/mlp.csv in that file's own column order. Run it right after
duograd's sweep, on the same machine:

    build/bench --sweep mlp --out DIR
    python3 bench/peers/numpy_mlp.py --out DIR      # then: build/bench plot DIR

Impls: "numpy" (NumPy float32; matmul is the BLAS NumPy loaded, OpenBLAS
on Debian; buffers allocated once, ops in place) and "torch-cpu" (PyTorch
eager on the CPU, torch.optim.Adam), the latter only where `import torch`
works.

Precisions (--dtype, bench's names; default fp32): each row's dtype column
holds its precision. numpy has fp32 alone; torch-cpu fp32 and bf16 (the
CPU's mixed precision: torch.autocast("cpu", bfloat16), the products in
bf16 with float32 accumulation, where the CPU's AMX or AVX512-BF16 runs
them). The other pairs are written as rows with status "skipped" and the
reason in the note: tf32 is a GPU tensor-core mode; NumPy has no bfloat16;
NumPy's float16 matmul has no BLAS behind it (a loop over float16 values,
orders of magnitude slower than its float32 one: not a mixed-precision step
anyone trains with, so no row that would pass for one); PyTorch's CPU mixed
precision is bf16. Before timing, each impl's first step is checked against an
independent float64 evaluation of the same step (the loss, and every
parameter's update, with core/check/step_check.h's BENCH_STEP_* tolerances), as
duograd checks its rows: a failed check is a row with status "wrong" and
no times. Timing follows bench/runner/timing.c's rules and defaults
(common.measure).

NumPy's OpenBLAS runs the core bench's rows ran on: run as a script, the
peer reads it from DIR/mlp.csv's '# openblas core:' line and, unless
OPENBLAS_CORETYPE is set, executes itself again with it before NumPy
loads (bench picks a better core where OpenBLAS falls back to its generic
one: bench/machine/blas_core.h). The core the peer got is in its metadata
line and in each numpy row's note.
"""
import argparse
import contextlib
import math
import os
import platform
import re
import sys
import time

if not __package__:  # run by its path: bench/ in place of this folder on sys.path (peers/__init__.py says why)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_HERE)] + [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402

PROG = "numpy_mlp"

# ---- what bench/sweeps/mlp/sweep_mlp.c times (bench/peers/tests/test_numpy_mlp.py reads them
# back out of the C sources, so a change there fails the test) ----

WIDTHS_LIST = ("784-256-100-10", "784-1024-1024-10")  # widths_list; --quick: the first only
DEFAULT_BATCHES = (32, 128, 512, 2048)                 # default_batches without --sweep all's 8192
ALL_BATCHES = DEFAULT_BATCHES + (8192,)                # default_batches
QUICK_BATCHES = (32, 256, 2048)                        # quick_batches
SEED = 1                                               # bench_step_build: the model's seed
LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8         # bench_mlp_step, dg_optim_default (core/optim.c)
LOSS_TOL, UPDATE_TOL = common.STEP_LOSS_TOL, common.STEP_UPDATE_TOL  # BENCH_STEP_LOSS_TOL, _UPDATE_TOL
CHECK_WORD = "f64-loss+update"                         # BENCH_STEP_CHECK
IMPLS = ("numpy", "torch-cpu")
# the precisions an impl has no row of, and why (a "skipped" row's note)
SKIPPED = {
    "numpy": {"tf32": "TF32 is a GPU tensor-core mode; NumPy has none",
              "bf16": "NumPy has no bfloat16 dtype",
              "fp16": "NumPy's float16 matmul has no BLAS (a float16 loop): not a mixed-precision step"},
    "torch-cpu": {"tf32": "TF32 is a GPU tensor-core mode; PyTorch's CPU has none",
                  "fp16": "PyTorch's CPU mixed precision is bf16 (AMX, AVX512-BF16), not fp16"},
}


class PeerError(Exception):
    """a refusal the user can act on: printed as one line, exit status 2"""


def parse_widths(spec):
    w = [int(v) for v in spec.split("-")]
    if len(w) < 2 or min(w) < 1:
        raise ValueError(f"bad widths '{spec}'")
    return w


def step_flops(widths, batch):
    """as sweep_mlp.c counts a step: 6 flops per weight and row (forward 2,
    backward 4); biases, ReLU, the loss and Adam are not counted"""
    return 6.0 * batch * sum(a * b for a, b in zip(widths, widths[1:]))


# ---- the same numbers as duograd: core/rng.h's splitmix64, vectorised ----

GOLDEN = 0x9E3779B97F4A7C15


def splitmix64(np, seed, n, skip=0):
    """draws skip+1 .. skip+n of dg_rng_new(seed), as uint64"""
    with np.errstate(over="ignore"):  # the C code's arithmetic is mod 2^64
        k = np.arange(skip + 1, skip + n + 1, dtype=np.uint64)
        z = np.uint64((seed ^ GOLDEN) & (2**64 - 1)) + k * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uniform(np, draws):
    """dg_rng_uniform: the top 53 bits, in [0, 1)"""
    return (draws >> np.uint64(11)).astype(np.float64) * 2.0**-53


def init_params(np, widths, seed=SEED):
    """dg_mlp_new's parameters, float32 as a fresh plan holds them: W_i
    [w_i, w_i+1] ~ N(0, sqrt(gain / w_i)) from seed * 1000 + i (gain 2, 1 for
    logistic regression), drawn by dg_rng_normal (Box-Muller, one value per
    two uniforms); b_i = 0. Order: W0, b0, W1, b1, ..."""
    layers = len(widths) - 1
    gain = 1.0 if layers == 1 else 2.0
    params = []
    for i in range(layers):
        n = widths[i] * widths[i + 1]
        u = uniform(np, splitmix64(np, seed * 1000 + i, 2 * n))
        u1 = np.maximum(u[0::2], 1e-300)
        normal = np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u[1::2])
        std = float(np.float32(math.sqrt(gain / widths[i])))  # dg_init's b is a float
        params.append((std * normal).astype(np.float32).reshape(widths[i], widths[i + 1]))
        params.append(np.zeros(widths[i + 1], np.float32))
    return params


def make_batch(np, widths, batch):
    """sweep_mlp.c's data: x [batch, w0] uniform in [0, 1), then y [batch]
    uniform over the classes, from dg_rng_new(batch)"""
    n = batch * widths[0]
    x = uniform(np, splitmix64(np, batch, n)).astype(np.float32).reshape(batch, widths[0])
    y = (splitmix64(np, batch, batch, skip=n) % np.uint64(widths[-1])).astype(np.int64)
    return x, y


# ---- the float64 reference: the step from its definitions, written apart
# from the timed impls (a bug in an impl's step is not repeated here) ----

def reference_gradients(np, params, x, y):
    """the loss and d loss / d param of the step, float64, allocating freely:
    z_i = h_i W_i + b_i, h_i+1 = relu(z_i) but for the last layer;
    loss = mean over rows of log-sum-exp(z) - z[label]"""
    Ws, bs = params[0::2], params[1::2]
    L, B = len(Ws), x.shape[0]
    hs, zs = [x], []
    for i in range(L):
        z = hs[-1] @ Ws[i] + bs[i]
        zs.append(z)
        hs.append(z if i == L - 1 else np.where(z > 0, z, 0.0))
    logits, rows = zs[-1], np.arange(B)
    top = logits.max(axis=1)
    lse = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
    loss = float(np.mean(lse - logits[rows, y]))
    d = np.exp(logits - lse[:, None])  # softmax; minus the one-hot, over B: d loss / d logits
    d[rows, y] -= 1.0
    d /= B
    grads = [None] * (2 * L)
    for i in reversed(range(L)):
        grads[2 * i] = hs[i].T @ d
        grads[2 * i + 1] = d.sum(axis=0)
        if i > 0:
            d = (d @ Ws[i].T) * (zs[i - 1] > 0)
    return loss, grads


def reference_first_update(np, grads):
    """Adam's first step (t = 1) as Kingma and Ba write it: m, v from zero,
    bias-corrected, w -= lr m_hat / (sqrt(v_hat) + eps); returns the changes"""
    out = []
    for g in grads:
        m, v = (1 - BETA1) * g, (1 - BETA2) * g * g
        m_hat, v_hat = m / (1 - BETA1), v / (1 - BETA2)
        out.append(-LR * m_hat / (np.sqrt(v_hat) + EPS))
    return out


def reference_step(np, params32, x, y, precision="fp32"):
    """(loss, the parameters' changes) of the first step in float64, from
    the float32 initial values the impls start from; for bf16/fp16 from
    those values and x rounded to the dtype, the operands autocast's
    products get (the biases are zero: exact in any dtype). The changes
    are the float32 master weights' (autocast keeps them float32)."""
    if precision in common.LOW_PRECISION:
        params32 = [common.round_to(np, p, precision) for p in params32]
        x = common.round_to(np, x, precision)
    p64 = [p.astype(np.float64) for p in params32]
    loss, grads = reference_gradients(np, p64, x.astype(np.float64), y)
    return loss, reference_first_update(np, grads)


def check_error(np, loss, before, after, ref):
    """bench_step_error for a model without running statistics: the loss's
    relative error, and || delta - delta_ref || / || delta_ref || over all
    parameters as one vector (float64); NaN counts as infinite"""
    ref_loss, ref_delta = ref
    loss_err = abs(loss - ref_loss) / max(abs(ref_loss), 1e-30)
    num = den = 0.0
    for b, a, d in zip(before, after, ref_delta):
        diff = a.astype(np.float64) - b.astype(np.float64) - d
        num += float(np.sum(diff * diff))
        den += float(np.sum(d * d))
    upd_err = math.sqrt(num / max(den, 1e-300))
    return (math.inf if math.isnan(loss_err) else loss_err), (math.inf if math.isnan(upd_err) else upd_err)


# ---- the timed impls: step() runs one training step and returns its loss;
# params() gives the current parameters as float32 NumPy arrays ----

class NumpyStep:
    """The step in NumPy float32 as a careful NumPy user writes it: every
    buffer allocated once, elementwise ops in place, the matmuls straight
    to BLAS sgemm (transposes as strided views, no copies); Adam with its
    bias correction folded into the step size, as cpu_backend/cpu_optim.c."""

    def __init__(self, np, widths, params, x, y):
        self.np, f = np, np.float32
        self.W = [p.astype(f) for p in params[0::2]]
        self.b = [p.astype(f) for p in params[1::2]]
        self.x, self.y = np.ascontiguousarray(x, f), y
        B = x.shape[0]
        self.rows, self.inv_batch = np.arange(B), 1.0 / B
        self.h = [np.empty((B, w), f) for w in widths[1:]]   # layer outputs, ReLU applied in place
        self.dz = [np.empty((B, w), f) for w in widths[1:]]  # d loss / d pre-activation
        self.grad = [np.empty_like(p) for p in self._flat()]
        self.m = [np.zeros_like(p) for p in self._flat()]
        self.v = [np.zeros_like(p) for p in self._flat()]
        self.tmp = [np.empty_like(p) for p in self._flat()]
        self.t = 0

    def _flat(self):
        return [p for pair in zip(self.W, self.b) for p in pair]

    def params(self):
        return [p.copy() for p in self._flat()]

    def gradients(self):
        """forward, loss, backward into self.grad; returns the loss"""
        np, L = self.np, len(self.W)
        a = self.x
        for i in range(L):
            z = self.h[i]
            np.matmul(a, self.W[i], out=z)
            z += self.b[i]
            if i + 1 < L:
                np.maximum(z, 0, out=z)
            a = z
        logits, p = a, self.dz[L - 1]
        top = logits.max(axis=1, keepdims=True)
        np.subtract(logits, top, out=p)
        np.exp(p, out=p)
        s = p.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) + top[:, 0] - logits[self.rows, self.y]))
        p /= s
        p[self.rows, self.y] -= 1.0
        p *= self.inv_batch
        dz = p
        for i in reversed(range(L)):
            np.matmul(self.x.T if i == 0 else self.h[i - 1].T, dz, out=self.grad[2 * i])
            np.sum(dz, axis=0, out=self.grad[2 * i + 1])
            if i > 0:
                np.matmul(dz, self.W[i].T, out=self.dz[i - 1])
                self.relu_backward(self.dz[i - 1], self.h[i - 1])
                dz = self.dz[i - 1]
        return loss

    @staticmethod
    def relu_backward(d, out):
        """d *= relu'(z), in place: ReLU's output is > 0 exactly where its input was"""
        d *= out > 0

    def step_size(self):
        """(lr_t, eps_t) of step t: Adam's bias correction folded in, as
        cpu_backend/cpu_optim.c folds it"""
        c2 = math.sqrt(1.0 - BETA2**self.t)
        return LR * c2 / (1.0 - BETA1**self.t), EPS * c2

    def adam(self):
        np = self.np
        self.t += 1
        lr_t, eps_t = self.step_size()
        for w, g, m, v, tmp in zip(self._flat(), self.grad, self.m, self.v, self.tmp):
            m *= BETA1
            np.multiply(g, 1.0 - BETA1, out=tmp)
            m += tmp
            v *= BETA2
            np.multiply(g, g, out=tmp)
            tmp *= 1.0 - BETA2
            v += tmp
            np.sqrt(v, out=tmp)
            tmp += eps_t
            np.divide(m, tmp, out=tmp)
            tmp *= lr_t
            w -= tmp

    def step(self):
        loss = self.gradients()
        self.adam()
        return loss


class TorchStep:
    """The step in PyTorch eager on the CPU: addmm and ReLU, F.cross_entropy
    (mean over the batch), backward, torch.optim.Adam with the same
    hyper-parameters. The weights are [in, out], as duograd's. bf16: the
    forward under torch.autocast("cpu", bfloat16) (float32 master
    weights, the products' operands cast to bf16 each step)."""

    PRECISIONS = ("fp32", "bf16")

    def __init__(self, np, widths, params, x, y, precision="fp32"):
        import torch
        self.torch, self.precision = torch, precision
        self.p = [torch.tensor(p, dtype=torch.float32, requires_grad=True) for p in params]
        self.x = torch.from_numpy(np.ascontiguousarray(x, np.float32))
        self.y = torch.from_numpy(y.astype(np.int64))
        self.opt = torch.optim.Adam(self.p, lr=LR, betas=(BETA1, BETA2), eps=EPS)

    def params(self):
        return [p.detach().numpy().copy() for p in self.p]

    def step(self):
        import torch.nn.functional as F
        self.opt.zero_grad(set_to_none=True)
        a, L = self.x, len(self.p) // 2
        with self.torch.autocast("cpu", dtype=self.torch.bfloat16, enabled=self.precision == "bf16"):
            for i in range(L):
                a = self.torch.addmm(self.p[2 * i + 1], a, self.p[2 * i])
                if i + 1 < L:
                    a = self.torch.relu(a)
            loss = F.cross_entropy(a.float(), self.y)
        loss.backward()
        self.opt.step()
        return loss.detach()


def first_step_error(np, impl, ref):
    """runs impl's first step from fresh parameters: (loss err, update err)"""
    before = impl.params()
    loss = float(impl.step())
    return check_error(np, loss, before, impl.params(), ref)


# ---- rows and the CSV ----

def base_row(widths_spec, impl, batch, threads, precision="fp32", backend="cpu"):
    """a row as sweep_mlp.c fills one: m = batch, n = widths[1], k = widths[0];
    dtype and tf32 of the precision"""
    w = parse_widths(widths_spec)
    return dict(sweep="mlp", case=widths_spec, impl=impl, backend=backend, m=batch, n=w[1], k=w[0],
                batch=batch, threads=threads, transfer=0, **common.precision_fields(precision), cold=0, warmup=0,
                reps=0, median_ms=math.nan,
                min_ms=math.nan, max_ms=math.nan, cv_pct=math.nan, gflops=math.nan, gbps=math.nan,
                scratch_bytes=0, arena_bytes=0, live_bytes=0, **common.NO_ENERGY, max_rel_err=math.nan, check=CHECK_WORD, status="",
                note="")


def timed_row(row, stats, flops, t):
    """fills row with a measurement: status ok, or noisy above --max-cv, and
    bench's notes for retries and a --max-reps cut"""
    row.update(warmup=stats["warmup"], reps=stats["reps"], median_ms=stats["median"], min_ms=stats["min"],
               max_ms=stats["max"], cv_pct=stats["cv"], gflops=flops / (stats["median"] * 1e6), status="ok")
    notes = [row["note"]] if row["note"] else []
    if stats["retries"]:
        notes.append(f"measured {stats['retries'] + 1} times (cv above {t.max_cv:.3g}%)")
    if stats["capped"]:
        notes.append(f"--max-reps {t.max_reps} reached before --min-time")
    if t.max_cv > 0 and stats["cv"] > t.max_cv:
        row["status"] = "noisy"
    row["note"] = "; ".join(notes)
    return row


def open_mlp_csv(path, meta_lines):
    """DIR/mlp.csv as a common.CsvOut, appended to in its own header's column
    order. It must exist with a header: the peer's rows stand beside
    duograd's from the same run, never alone."""
    if not os.path.isfile(path):
        raise PeerError(f"{path}: no such file: run `bench --sweep mlp --out {os.path.dirname(path) or '.'}` "
                        "first (the peer's rows go beside duograd's)")
    try:
        if common.read_header(path) is None:
            raise PeerError(f"{path}: no header line (the sweep stopped before its first row?): no rows appended")
        return common.CsvOut(path, meta_lines, PROG, label="numpy peer rows (bench/peers/numpy_mlp.py)")
    except ValueError as e:  # a foreign header, or a line the reader refuses
        raise PeerError(str(e)) from None


# ---- the machine: which BLAS NumPy runs on, on which core, with how many threads ----

CORE_VAR = "OPENBLAS_CORETYPE"
CORE_MARK = "DG_PEER_BLAS_CORE"  # where the peer's OPENBLAS_CORETYPE came from, when it set it
CORE_LINE = "# openblas core: "   # bench's metadata line (bench/machine/env.c): "NAME (why)"


def bench_core(path):
    """The OpenBLAS core bench ran its rows of `path` on (the first word of
    its '# openblas core:' line), or None where the file has no such line."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(CORE_LINE):
                    word = (line[len(CORE_LINE):].split() or [""])[0]
                    return word if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", word) else None
                if not line.startswith("#"):
                    return None  # the metadata ends at the header
    except OSError:
        pass
    return None


def core_environment(environ, out_dir):
    """The environment under which NumPy's OpenBLAS runs the core bench ran
    DIR/mlp.csv's rows on, or None where `environ` needs no change: an
    OPENBLAS_CORETYPE already set (the user's, or this function's before
    the peer executed itself again: the marker says so) wins, and a file without the line
    leaves OpenBLAS to choose. A DYNAMIC_ARCH OpenBLAS reads the variable
    once, when NumPy loads it: the peer sets it and executes itself again."""
    if environ.get(CORE_VAR) or CORE_MARK in environ:  # the marker: executed again already, never twice
        return None
    path = os.path.join(out_dir, "mlp.csv")
    core = bench_core(path)
    if core is None:
        return None
    return dict(environ, **{CORE_VAR: core, CORE_MARK: f"the core of {path}'s rows"})


def core_source(environ):
    """why the peer's OpenBLAS runs the core it runs, for the metadata"""
    if environ.get(CORE_MARK) and environ.get(CORE_VAR):
        return f"{CORE_VAR}={environ[CORE_VAR]}: {environ[CORE_MARK]}"
    if environ.get(CORE_VAR):
        return f"user-set: {CORE_VAR}={environ[CORE_VAR]}"
    return "OpenBLAS's own choice"


def blas_info(threads=None):
    """(description, threads, core): the BLAS library mapped into this
    process once NumPy is imported (from /proc/self/maps), and for OpenBLAS
    its configuration, thread count (openblas_get_num_threads: the OpenMP
    build's count, from OMP_NUM_THREADS or the processor count), after
    setting it to `threads` when given (as bench --threads does), and the
    core it runs (openblas_get_corename; None where it is not OpenBLAS)"""
    import ctypes
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "blas" in os.path.basename(path) and path not in libs:
                    libs.append(path)
    except OSError:
        pass
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_config.restype = ctypes.c_char_p
            config = lib.openblas_get_config().decode(errors="replace")
            if threads:
                lib.openblas_set_num_threads(threads)
            core = None
            with contextlib.suppress(AttributeError):  # an OpenBLAS older than the query
                lib.openblas_get_corename.restype = ctypes.c_char_p
                core = lib.openblas_get_corename().decode(errors="replace")
            return f"{os.path.realpath(path)}: {config}", int(lib.openblas_get_num_threads()), core
        except (OSError, AttributeError):
            continue
    return ("not OpenBLAS: " + (", ".join(libs) or "no BLAS library found mapped")), threads or 1, None


# ---- the sweep ----

def parse_impls(text):
    names = [v for v in text.split(",") if v]
    bad = [v for v in names if v not in IMPLS]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"'{text}': impls are {', '.join(IMPLS)}")
    return names


def parse_widths_list(text):
    specs = [v for v in text.split(",") if v]
    try:
        for s in specs:
            if len(parse_widths(s)) < 2:
                raise ValueError
    except ValueError:
        specs = []
    if not specs:
        raise argparse.ArgumentTypeError(f"'{text}': widths as in bench, e.g. 784-256-100-10 (comma-separated)")
    return specs


def make_parser():
    ap = argparse.ArgumentParser(
        prog="numpy_mlp.py",
        description="The NumPy (and PyTorch CPU) peer of `bench --sweep mlp`: the same MLP training step "
                    "(forward, softmax cross-entropy, backward, Adam), checked against float64, timed, "
                    "appended to DIR/mlp.csv as impls numpy and torch-cpu.",
        epilog="Run it after `bench --sweep mlp --out DIR` with the same --quick/--all/--sizes, then "
               "`bench plot DIR`. Exit status: 0, 1 when a row is wrong or failed, 2 for bad arguments or "
               "a missing or foreign mlp.csv.")
    common.out_arg(ap, "result folder: rows are appended to DIR/mlp.csv")
    ap.add_argument("--quick", action="store_true", help="as bench --quick: the first widths, batches 32,256,2048")
    ap.add_argument("--all", action="store_true", help="as bench --sweep all: batch 8192 too")
    ap.add_argument("--sizes", type=common.int_list(1, 1 << 20), metavar="LIST",
                    help="batch sizes instead of the default ones")
    ap.add_argument("--widths", type=parse_widths_list, metavar="LIST",
                    help=f"networks instead of the sweep's ({','.join(WIDTHS_LIST)})")
    ap.add_argument("--impl", type=parse_impls, metavar="LIST",
                    help="numpy,torch-cpu (default: both, torch-cpu where `import torch` works)")
    ap.add_argument("--threads", type=common.bounded(int, 1, 1024), metavar="N",
                    help="threads for OpenBLAS and PyTorch, as bench --threads (default: OpenBLAS's, all cores)")
    ap.add_argument("--budget", type=common.bounded(float, 1, 604800), metavar="S",
                    help="the peer's wall seconds (default: none): the rows of the batches after it are written "
                         "as skipped, saying so (the main job gives it what bench's --budget leaves)")
    common.dtype_args(ap)
    common.timing_args(ap, max_reps=10000, warmup_time=True, retries=True)
    return ap


def run_impl(np, out, name, cls, widths_spec, batch, params, x, y, ref, threads, timing, core=None,
             precision="fp32"):
    """one row: the impl's first step checked against ref (the reference of
    the precision's step) at the precision's tolerances, then timed; its
    note names the OpenBLAS core the numpy rows ran on"""
    row = base_row(widths_spec, name, batch, threads, precision)
    if core and name == "numpy":
        row["note"] = f"openblas core {core}"
    widths = parse_widths(widths_spec)
    loss_tol, upd_tol = common.step_tol(precision, len(widths) - 1)
    try:
        impl = cls(np, widths, params, x, y) if precision == "fp32" else cls(np, widths, params, x, y, precision)
        loss_err, upd_err = first_step_error(np, impl, ref)
        row["max_rel_err"] = max(loss_err, upd_err)
        errs = (f"loss rel err {loss_err:.3g} (tol {loss_tol:.3g}); update rel err {upd_err:.3g} "
                f"(tol {upd_tol:.3g})")
        if loss_err <= loss_tol and upd_err <= upd_tol:
            stats = common.measure(lambda: common.host_ms(impl.step), timing)
            timed_row(row, stats, step_flops(widths, batch), timing)
        else:  # a failed check: no times (base_row's reps 0 and NaN, as bench writes a wrong row)
            row.update(status="wrong", note=errs)
    except MemoryError:
        row.update(status="oom", note=f"out of host memory at batch {batch}")
    except Exception as e:  # a row that failed says why; the sweep goes on
        row.update(status="error", note=f"{type(e).__name__}: {e}"[:200])
    out.write(row)
    print(f"{PROG}: {widths_spec} {name} {precision} batch {batch}: {row['status']} median {row['median_ms']:.4g} ms "
          f"err {row['max_rel_err']:.2g}{' (' + row['note'] + ')' if row['note'] else ''}", file=sys.stderr)
    return row


def batches_of(a):
    if a.sizes:
        return a.sizes
    return list(QUICK_BATCHES if a.quick else ALL_BATCHES if a.all else DEFAULT_BATCHES)


def import_torch(asked):
    """torch, or None: skipped with a line on stderr unless asked for by --impl"""
    try:
        import torch
        return torch
    except Exception as e:  # ImportError, or a broken install raising anything
        msg = f"import torch failed ({type(e).__name__}: {e})"
        if asked:
            raise PeerError(f"--impl torch-cpu: {msg}") from None
        print(f"{PROG}: {msg}: no torch-cpu rows", file=sys.stderr)
        return None


def print_summary(path, rows):
    """the peer's rows beside duograd's cpu rows of the same file"""
    def dtype(r):  # a folder written before the precision axis says f32
        return "fp32" if r.get("dtype") in ("f32", "", None) else r["dtype"]
    duo = {(r.get("case"), r.get("batch"), dtype(r)): r for r in common.read_rows(path)[1]
           if r.get("impl") == "cpu" and r.get("status") in ("ok", "noisy")}
    print(f"\n{'widths':<18} {'impl':<10} {'dtype':<5} {'batch':>6} {'median_ms':>10} {'GFLOP/s':>8} {'cv%':>6} "
          f"{'err':>8} {'duograd_ms':>10} {'peer/duograd':>12}  status")
    for r in rows:
        d = duo.get((r["case"], str(r["batch"]), r["dtype"]))
        d_ms = float(d["median_ms"]) if d else math.nan
        ratio = r["median_ms"] / d_ms if d and d_ms > 0 else math.nan
        print(f"{r['case']:<18} {r['impl']:<10} {r['dtype']:<5} {r['batch']:>6} {r['median_ms']:>10.4g} "
              f"{r['gflops']:>8.1f} {r['cv_pct']:>6.2f} {r['max_rel_err']:>8.2g} {d_ms:>10.4g} {ratio:>12.3g}  "
              f"{r['status']}")
    print(f"rows appended to {path}; `bench plot {os.path.dirname(path) or '.'}` draws them")


def main(argv=None, reexec=False):
    """reexec: the peer runs as a script and may execute itself again to
    run NumPy's OpenBLAS on bench's core (core_environment); never from a
    process that imported NumPy already"""
    ap = make_parser()
    a = ap.parse_args(argv)  # bad arguments: argparse's message, exit 2
    common.check_timing_args(ap, a)
    env = core_environment(os.environ, a.out) if reexec and "numpy" not in sys.modules else None
    if env is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)
    try:
        import numpy as np
    except ImportError as e:
        print(f"{PROG}: import numpy failed ({e}): install python3-numpy", file=sys.stderr)
        return 2
    impls = a.impl or list(IMPLS)
    timing = common.timing_of(a)
    widths_list = a.widths or (WIDTHS_LIST[:1] if a.quick else WIDTHS_LIST)
    batches = batches_of(a)
    try:
        blas, threads, core = blas_info(a.threads)  # before torch, whose libraries could be mapped too
        want = bench_core(os.path.join(a.out, "mlp.csv"))
        if core and want and core.lower() != want.lower():
            print(f"{PROG}: warning: NumPy's OpenBLAS runs {core}, bench's rows ran on {want}: the numpy rows "
                  f"are not on the same core (run the peer as a script, or set {CORE_VAR}={want})", file=sys.stderr)
        torch = import_torch(a.impl is not None and "torch-cpu" in a.impl) if "torch-cpu" in impls else None
        if not blas.startswith("/"):
            print(f"{PROG}: warning: NumPy's BLAS is {blas}: the numpy rows are not OpenBLAS's",
                  file=sys.stderr)
        meta = [f"numpy {np.__version__}", f"python {platform.python_version()}", f"blas: {blas}",
                f"blas threads: {threads}", f"openblas core: {core or '-'} ({core_source(os.environ)})",
                f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}",
                common.date_line(),
                f"load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}"]
        if torch is not None:
            # every impl gets the cores duograd's cpu rows use (bench's default:
            # all); Debian's PyTorch would otherwise run on one thread
            torch.set_num_threads(threads)
            meta.append(f"torch {torch.__version__}, {torch.get_num_threads()} threads (set to the BLAS count)")
        out = open_mlp_csv(os.path.join(a.out, "mlp.csv"), meta)
    except PeerError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    print(f"{PROG}: numpy {np.__version__} on {blas}, {threads} BLAS threads -> {out.path}", file=sys.stderr)

    cls = {"numpy": (NumpyStep, threads)}
    if torch is not None:
        cls["torch-cpu"] = (TorchStep, torch.get_num_threads())
    rows = []
    deadline = time.monotonic() + a.budget if a.budget else None
    try:
        for spec in widths_list:
            widths = parse_widths(spec)
            params = init_params(np, widths)
            for batch in batches:
                x, y = make_batch(np, widths, batch)
                for p in a.dtype:
                    names = [n for n in impls if n in cls]
                    spent = deadline is not None and time.monotonic() > deadline
                    ref = None
                    for name in names:
                        why = (f"the peer's --budget of {a.budget:g} s is spent" if spent
                               else SKIPPED[name].get(p))
                        if why:
                            row = base_row(spec, name, batch, cls[name][1], p)
                            row.update(status="skipped", note=why)
                            out.write(row)
                            rows.append(row)
                            continue
                        if ref is None:  # one float64 step per precision, shared by the impls
                            ref = reference_step(np, params, x, y, p)
                        rows.append(run_impl(np, out, name, cls[name][0], spec, batch, params, x, y, ref,
                                             cls[name][1], timing, core, p))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted: the rows written so far are kept", file=sys.stderr)
        out.close()
        return 130
    out.close()
    print_summary(out.path, rows)
    return 1 if any(r["status"] not in ("ok", "noisy", "skipped") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(reexec=True))
