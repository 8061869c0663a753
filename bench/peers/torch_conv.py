#!/usr/bin/env python3
"""peers.torch_conv: the PyTorch peer of `bench --sweep conv`.

For each row duograd's conv sweep wrote to DIR/conv.csv (a layer shape of
ResNet-18, the small CNN or LeNet, a direction, a batch, on the GPU or the
CPU), PyTorch's row of the same convolution, appended to the same file in
its own column order, so `bench plot DIR` sets them side by side:

    build/bench --sweep conv --out DIR
    python3 bench/peers/torch_conv.py --out DIR

Impls (fp32, NCHW, contiguous, TF32 off: torch.backends.cudnn.allow_tf32 =
torch.backends.cuda.matmul.allow_tf32 = False):
  torch-cudnn        cuDNN, cudnn.benchmark False (PyTorch's default: cuDNN's
                     heuristics pick the algorithm)
  torch-cudnn-bench  cuDNN, cudnn.benchmark True (each shape autotuned on its
                     first call, which is the unmeasured check call)
  torch-cpu          PyTorch's CPU convolution (oneDNN where PyTorch's
                     heuristic picks it, else its im2col + GEMM), with
                     torch.set_num_threads(--threads)
Each impl runs in a process of its own, one after the other: PyTorch caches
cuDNN's algorithm choice per shape without the benchmark flag in the key,
so in one process the second impl would reuse the first one's choice.

What is inside the timed region (one call each, autograd off; the inputs
are on the device already, the output is allocated by the call, as a
training step does: on the GPU from PyTorch's caching allocator; on the
CPU from malloc, which maps blocks over 32 MiB afresh on each call, so the
largest CPU rows (ImageNet stem, batch 32: a 102 MB output) pay page
faults that duograd's rows, writing into a planned arena, do not):
  fwd         y  = F.conv2d(x, w, None, stride, padding)
  bwd-data    dx = torch.ops.aten.convolution_backward(dy, x, w, None,
                   stride, padding, (1, 1), False, (0, 0), 1,
                   (True, False, False))[0]
  bwd-weight  dw = the same with output_mask (False, True, False), [1]
convolution_backward is the op autograd runs for conv2d's backward (and
torch.nn.grad.conv2d_input / conv2d_weight call); its output mask makes it
run only the direction's kernel (cuDNN's backward-data or backward-filter,
oneDNN's on the CPU), nothing of the other gradient. PyTorch's dispatch,
cuDNN's plan-cache lookup and workspace allocation are inside the region,
as duograd's own call overhead is inside its rows.

Timing, as duograd's rows (bench/runner/timing.c, by common.measure):
--warmup untimed calls, then timed calls until --reps and --min-time (the
sum of the calls' times), at most --row-time seconds of wall clock per row. GPU: CUDA events around
each call, then a wait for the stop event (the queue drained between
calls, so an idle GPU waits for PyTorch's host-side launch inside the
region, as it waits for duograd's); CPU: perf_counter around each call.
At most --max-reps calls. A row whose CV is above --max-cv is "noisy" (not
measured again). --time-limit (210 s) bounds the whole run: each impl gets
an equal part of the time left, and its rows past it are written as
skipped.

Check, before timing, as duograd's conv_check (core/check/conv_check.h, whose
CONV_CHECK_* constants this script reads): the output of the first call is
compared at 256 entries (the first, the last and 254 seeded) with the same
entries as float64 dot products of the float32 inputs, computed on the CPU
from the definition; error = |got - exact| / sum of |terms|; above
CONV_CHECK_TOL (1e-5) the row is "wrong" and not timed. Inputs are seeded,
uniform in [-1, 1) (zero mean, as the tolerance assumes).

Rows: sweep conv, case SHAPE:DIRECTION, duograd's m, n, k (the GEMM of the
direction, bench/sweeps/conv/sweep_conv.c), batch, flops = 2*batch*o*oh*ow*c*kh*kw,
bytes = the two operands and the output once (GB/s), transfer 0, tf32 0,
threads = torch's CPU threads (0 on the GPU), check f64-sampled, note = the
backend PyTorch's dispatcher picked (Cudnn, Mkldnn, Slow2d ...) and what
the check found. scratch_bytes: GPU: the caching allocator's peak during
one call less what it holds after it, the output alive (what the call
freed again: cuDNN's workspace); CPU: 0 (not measured).

Which rows: duograd's rows of conv.csv (impl not torch-*), except skipped
and interrupted ones: the same cases and batches on each device (so the
CPU's ImageNet shapes stop where duograd's did, at batch 32 by default).
--batches LIST runs those batches for every case instead; without duograd
rows (no conv.csv) every shape runs at 1, 8, 32, 128, the CPU's ImageNet
shapes at 32 at most. The layer geometry is SHAPES below, a copy of what
bench/sweeps/conv/conv_cases.c derives from the models: a case of duograd's rows that
SHAPES lacks, or whose m, n, k are not SHAPES' geometry, is left out with
a warning (bench/peers/tests/test_torch_conv.py compares SHAPES with the
shapes table of a real sweep's summary).

Exit status: 0; 1 when a row is wrong, an impl's process failed or a case
was left out; 2 for an unreadable conv.csv; 130 when interrupted.

torch is imported only in the child process that runs an impl, so the
rest (shapes, geometry, planning, the CSV, the float64 reference with any
array library) runs and is tested without it.
"""
import argparse
import collections
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import zlib

if not __package__:  # run by its path: bench/ in place of this folder on sys.path (peers/__init__.py says why)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_HERE)] + [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers.common import NOTE_MAX  # noqa: E402

PROG = "torch_conv"
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/

DIRS = ("fwd", "bwd-data", "bwd-weight")
IMPLS = collections.OrderedDict([  # name: on the GPU, cudnn.benchmark
    ("torch-cudnn", dict(gpu=True, benchmark=False)),
    ("torch-cudnn-bench", dict(gpu=True, benchmark=True)),
    ("torch-cpu", dict(gpu=False, benchmark=False)),
])
DEFAULT_BATCHES = (1, 8, 32, 128)  # bench/sweeps/conv/sweep_conv.c: default_batches
CPU_IMAGENET_MAX_BATCH = 32        # bench/sweeps/conv/sweep_conv.c: CPU_IMAGENET_MAX_BATCH
CHILD_GRACE_S = 60                 # a child past its share plus this is stopped


# ---- the shapes (no torch) ----

class Shape(collections.namedtuple("Shape", "name c h w o kh kw stride pad")):
    """one layer geometry: x [batch, c, h, w] -> [batch, o, oh, ow], w [o, c, kh, kw]"""
    __slots__ = ()

    @property
    def family(self):
        return self.name.split("-")[0]

    @property
    def oh(self):
        return (self.h + 2 * self.pad - self.kh) // self.stride + 1

    @property
    def ow(self):
        return (self.w + 2 * self.pad - self.kw) // self.stride + 1

# bench/sweeps/conv/conv_cases.c's list, in its order: every distinct convolution of
# ResNet-18 with the CIFAR stem (r18c), with the ImageNet stem (r18i), the
# small CNN's, LeNet-5's; x [batch, c, h, w], w [o, c, kh, kw]
SHAPES = tuple(Shape(*s) for s in (
    ("r18c-stem", 3, 32, 32, 64, 3, 3, 1, 1),
    ("r18c-l1.0-conv1", 64, 32, 32, 64, 3, 3, 1, 1),
    ("r18c-l2.0-conv1", 64, 32, 32, 128, 3, 3, 2, 1),
    ("r18c-l2.0-conv2", 128, 16, 16, 128, 3, 3, 1, 1),
    ("r18c-l2.0-down", 64, 32, 32, 128, 1, 1, 2, 0),
    ("r18c-l3.0-conv1", 128, 16, 16, 256, 3, 3, 2, 1),
    ("r18c-l3.0-conv2", 256, 8, 8, 256, 3, 3, 1, 1),
    ("r18c-l3.0-down", 128, 16, 16, 256, 1, 1, 2, 0),
    ("r18c-l4.0-conv1", 256, 8, 8, 512, 3, 3, 2, 1),
    ("r18c-l4.0-conv2", 512, 4, 4, 512, 3, 3, 1, 1),
    ("r18c-l4.0-down", 256, 8, 8, 512, 1, 1, 2, 0),
    ("r18i-stem", 3, 224, 224, 64, 7, 7, 2, 3),
    ("r18i-l1.0-conv1", 64, 56, 56, 64, 3, 3, 1, 1),
    ("r18i-l2.0-conv1", 64, 56, 56, 128, 3, 3, 2, 1),
    ("r18i-l2.0-conv2", 128, 28, 28, 128, 3, 3, 1, 1),
    ("r18i-l2.0-down", 64, 56, 56, 128, 1, 1, 2, 0),
    ("r18i-l3.0-conv1", 128, 28, 28, 256, 3, 3, 2, 1),
    ("r18i-l3.0-conv2", 256, 14, 14, 256, 3, 3, 1, 1),
    ("r18i-l3.0-down", 128, 28, 28, 256, 1, 1, 2, 0),
    ("r18i-l4.0-conv1", 256, 14, 14, 512, 3, 3, 2, 1),
    ("r18i-l4.0-conv2", 512, 7, 7, 512, 3, 3, 1, 1),
    ("r18i-l4.0-down", 256, 14, 14, 512, 1, 1, 2, 0),
    ("cnn-conv1", 1, 28, 28, 32, 3, 3, 1, 1),
    ("cnn-conv2", 32, 14, 14, 64, 3, 3, 1, 1),
    ("lenet-c1", 1, 28, 28, 6, 5, 5, 1, 2),
    ("lenet-c2", 6, 14, 14, 16, 5, 5, 1, 0),
))
SHAPE_BY_NAME = {s.name: s for s in SHAPES}


def parse_case(case, shapes=SHAPE_BY_NAME):
    """'SHAPE:DIRECTION' -> (Shape, direction); ValueError for a case this
    script does not know"""
    name, _, direction = case.partition(":")
    if name not in shapes or direction not in DIRS:
        raise ValueError(f"case '{case}': not a shape of SHAPES with a direction of {', '.join(DIRS)}")
    return shapes[name], direction


def geometry(sh, direction, batch):
    """duograd's columns of a row (bench/sweeps/conv/sweep_conv.c): m, n, k the GEMM of
    the direction, flops and bytes (the two operands and the output)"""
    cols, r = batch * sh.oh * sh.ow, sh.c * sh.kh * sh.kw
    m, n, k = {"fwd": (sh.o, cols, r), "bwd-data": (r, cols, sh.o), "bwd-weight": (sh.o, r, cols)}[direction]
    x, w, y = batch * sh.c * sh.h * sh.w, sh.o * sh.c * sh.kh * sh.kw, batch * sh.o * sh.oh * sh.ow
    return dict(m=m, n=n, k=k, flops=2.0 * batch * sh.o * sh.oh * sh.ow * sh.c * sh.kh * sh.kw,
                bytes=4.0 * (x + w + y))


def operand_shapes(sh, batch):
    """x, w and dy's shapes"""
    return dict(x=(batch, sh.c, sh.h, sh.w), w=(sh.o, sh.c, sh.kh, sh.kw), dy=(batch, sh.o, sh.oh, sh.ow))


def output_shape(sh, direction, batch):
    s = operand_shapes(sh, batch)
    return {"fwd": s["dy"], "bwd-data": s["x"], "bwd-weight": s["w"]}[direction]


OPERANDS = {"fwd": ("x", "w"), "bwd-data": ("dy", "w"), "bwd-weight": ("dy", "x")}  # conv_check.h's order


# ---- the check (no torch): duograd's constants, sampled float64 entries ----

def conv_check_constants(path=os.path.join(os.path.dirname(BENCH), "core", "check", "conv_check.h")):
    """CONV_CHECK_WORD, CONV_CHECK_SAMPLES and CONV_CHECK_TOL, parsed from
    core/check/conv_check.h so the peer's check cannot drift from duograd's"""
    with open(path) as f:
        text = f.read()
    word = re.search(r'#define\s+CONV_CHECK_WORD\s+"([^"]+)"', text)
    samples = re.search(r"#define\s+CONV_CHECK_SAMPLES\s+(\d+)", text)
    tol = re.search(r"#define\s+CONV_CHECK_TOL\s+([0-9.eE+-]+)", text)
    if not (word and samples and tol):
        raise ValueError(f"{path}: no CONV_CHECK_WORD, CONV_CHECK_SAMPLES or CONV_CHECK_TOL")
    return word.group(1), int(samples.group(1)), float(tol.group(1))


CHECK_WORD, CHECK_SAMPLES, CHECK_TOL = conv_check_constants()


def sample_indices(numel, seed, n=CHECK_SAMPLES):
    """the first and the last entry (a corner of the padding each), then
    n - 2 drawn from seed"""
    rnd = random.Random(seed)
    return [0, numel - 1] + [rnd.randrange(numel) for _ in range(n - 2)]


def unravel(i, dims):
    out = []
    for d in reversed(dims):
        out.append(i % d)
        i //= d
    return tuple(reversed(out))


def _fwd_terms(sh, x, w, idx):
    """y[n,o,oy,ox] = sum_{c,ki,kj} x[n,c,oy*s-p+ki,ox*s-p+kj] w[o,c,ki,kj]:
    the taps inside x"""
    n, o, oy, ox = idx
    y0, x0 = oy * sh.stride - sh.pad, ox * sh.stride - sh.pad
    ky0, ky1 = max(0, -y0), min(sh.kh, sh.h - y0)
    kx0, kx1 = max(0, -x0), min(sh.kw, sh.w - x0)
    if ky0 >= ky1 or kx0 >= kx1:
        return None
    return x[n, :, y0 + ky0:y0 + ky1, x0 + kx0:x0 + kx1], w[o, :, ky0:ky1, kx0:kx1]


def _taps(i, k, s, p, out_extent):
    """(kernel index, output position) pairs whose tap lands on input
    position i"""
    return [(t, (i + p - t) // s) for t in range(k) if (i + p - t) % s == 0 and 0 <= (i + p - t) // s < out_extent]


def _bwd_data_terms(sh, dy, w, idx):
    """dx[n,c,iy,ix] = sum over the (o, ki, kj) whose output (oy, ox) reads
    (iy, ix): dy[n,o,oy,ox] w[o,c,ki,kj]"""
    n, c, iy, ix = idx
    ty, tx = _taps(iy, sh.kh, sh.stride, sh.pad, sh.oh), _taps(ix, sh.kw, sh.stride, sh.pad, sh.ow)
    if not ty or not tx:
        return None
    ki, oy = (list(v) for v in zip(*ty))
    kj, ox = (list(v) for v in zip(*tx))
    return dy[n][:, oy][:, :, ox], w[:, c][:, ki][:, :, kj]


def _window(k, s, p, extent, out_extent):
    """the output positions whose tap k lands inside the input: first, count"""
    valid = [o for o in range(out_extent) if 0 <= o * s - p + k < extent]
    return (valid[0], len(valid)) if valid else (0, 0)


def _bwd_weight_terms(sh, dy, x, idx):
    """dw[o,c,ki,kj] = sum_{n,oy,ox} dy[n,o,oy,ox] x[n,c,oy*s-p+ki,ox*s-p+kj]"""
    o, c, ki, kj = idx
    s = sh.stride
    oy0, ny = _window(ki, s, sh.pad, sh.h, sh.oh)
    ox0, nx = _window(kj, s, sh.pad, sh.w, sh.ow)
    if not ny or not nx:
        return None
    iy0, ix0 = oy0 * s - sh.pad + ki, ox0 * s - sh.pad + kj
    return (dy[:, o, oy0:oy0 + ny, ox0:ox0 + nx],
            x[:, c, iy0:iy0 + s * (ny - 1) + 1:s, ix0:ix0 + s * (nx - 1) + 1:s])


TERMS = {"fwd": _fwd_terms, "bwd-data": _bwd_data_terms, "bwd-weight": _bwd_weight_terms}


def reference(direction, sh, batch, a, b, indices, f64):
    """(exact values, sums of |terms|) of the output entries `indices` (flat)
    in float64, from the direction's operands a, b (OPERANDS' order) as
    arrays of any library that slices like NumPy (numpy, torch); f64 turns
    such an array into float64"""
    dims = output_shape(sh, direction, batch)
    exact, abs_sum = [], []
    for i in indices:
        pair = TERMS[direction](sh, a, b, unravel(i, dims))
        if pair is None:  # every tap in the padding
            exact.append(0.0)
            abs_sum.append(0.0)
            continue
        t = f64(pair[0]) * f64(pair[1])
        exact.append(float(t.sum()))
        abs_sum.append(float(abs(t).sum()))
    return exact, abs_sum


def check_error(exact, abs_sum, got):
    """conv_check_error: the largest |got - exact| / sum|terms|; infinite
    where got is not finite, or where an entry with no terms is not 0"""
    worst = 0.0
    for e, s, g in zip(exact, abs_sum, got):
        if not math.isfinite(g):
            return math.inf
        diff = abs(g - e)
        err = diff / s if s > 0 else (math.inf if diff > 0 else 0.0)
        worst = max(worst, err)
    return worst


def check_note(err):
    verdict = "<=" if err <= CHECK_TOL else "> tol"
    return f"{CHECK_SAMPLES} entries vs f64 dot products: err/sum|terms| {err:.2g} {verdict} {CHECK_TOL:g}"


def case_seed(sh, batch):
    """the seed of a shape's inputs at a batch: the same in every process"""
    return zlib.crc32(f"{sh.name}@{batch}".encode())


class RefCache:
    """The sampled float64 entries of each (case, batch), computed once and
    kept in a folder the impls' processes share (their inputs are the same
    seeded values)."""

    def __init__(self, folder):
        self.folder = folder

    def get(self, sh, direction, batch, operands, f64):
        seed = case_seed(sh, batch) ^ DIRS.index(direction)
        numel = math.prod(output_shape(sh, direction, batch))
        idx = sample_indices(numel, seed)
        path = os.path.join(self.folder, f"{sh.name}-{direction}-b{batch}.json") if self.folder else None
        if path and os.path.exists(path):
            with open(path) as f:
                ref = json.load(f)
            return idx, ref["exact"], ref["abs_sum"]
        a, b = (operands[k] for k in OPERANDS[direction])
        exact, abs_sum = reference(direction, sh, batch, a, b, idx, f64)
        if path:
            with open(path + ".tmp", "w") as f:
                json.dump(dict(exact=exact, abs_sum=abs_sum), f)
            os.replace(path + ".tmp", path)
        return idx, exact, abs_sum


# ---- conv.csv: duograd's rows, the rows to run (no torch) ----

def duograd_rows(rows):
    """the conv sweep's own rows (a peer's earlier rows left out)"""
    return [r for r in rows if r.get("sweep") == "conv" and not r.get("impl", "").startswith("torch-")]


def geometry_problems(rows, path="conv.csv"):
    """{case: why} for duograd's rows whose case is not in SHAPES or whose
    m, n, k are not SHAPES' geometry (rows with m = n = k = 0, a shape that
    was not built, say nothing): those cases are left out"""
    bad = {}
    for r in rows:
        try:
            sh, direction = parse_case(r["case"])
        except ValueError as e:
            bad.setdefault(r["case"], f"{path}: {e}")
            continue
        got = tuple(int(r[c]) for c in ("m", "n", "k"))
        g = geometry(sh, direction, int(r["batch"]))
        if got != (0, 0, 0) and got != (g["m"], g["n"], g["k"]):
            bad.setdefault(r["case"], f"{path}: {r['case']} at batch {r['batch']} ({r['impl']}): m, n, k = {got}, "
                                      f"SHAPES gives {(g['m'], g['n'], g['k'])}")
    return bad


def plan(rows, devices, batches=None, filt=None, leave_out=()):
    """device -> the (Shape, direction, batch) rows to run, in SHAPES' order,
    then batch, then direction. Without `batches`: duograd's cases and
    batches on that device (not its skipped or interrupted rows), or where
    duograd has no rows at all, every case at DEFAULT_BATCHES (the CPU's
    r18i shapes at CPU_IMAGENET_MAX_BATCH at most). With `batches`: those
    batches for every case duograd has (every case without rows). The
    cases of leave_out are left out."""
    own = [r for r in duograd_rows(rows) if r["case"] not in leave_out]
    cases = {r["case"] for r in own} or {f"{s.name}:{d}" for s in SHAPES for d in DIRS}
    wanted = {}
    for dev in devices:
        if batches:
            pairs = {(c, b) for c in cases for b in batches}
        elif own:
            pairs = {(r["case"], int(r["batch"])) for r in own
                     if r["backend"] == dev and r["status"] not in ("skipped", "interrupted")}
        else:
            pairs = {(c, b) for c in cases for b in DEFAULT_BATCHES
                     if dev == "gpu" or parse_case(c)[0].family != "r18i" or b <= CPU_IMAGENET_MAX_BATCH}
        items = [parse_case(c) + (b,) for c, b in pairs if not filt or filt in c]
        order = {s.name: i for i, s in enumerate(SHAPES)}
        wanted[dev] = sorted(items, key=lambda it: (order[it[0].name], it[2], DIRS.index(it[1])))
    return wanted


def groups(items):
    """consecutive rows of one shape and batch: [(Shape, batch, [directions])]"""
    out = []
    for sh, direction, batch in items:
        if out and out[-1][0] == sh and out[-1][1] == batch:
            out[-1][2].append(direction)
        else:
            out.append((sh, batch, [direction]))
    return out


# ---- a row (no torch) ----

def base_row(impl, sh, direction, batch, threads):
    g = geometry(sh, direction, batch)
    return dict(sweep="conv", case=f"{sh.name}:{direction}", impl=impl,
                backend="gpu" if IMPLS[impl]["gpu"] else "cpu", m=g["m"], n=g["n"], k=g["k"],
                batch=batch, threads=threads, transfer=0, **common.precision_fields("fp32"), cold=0, warmup=0,
                reps=0, median_ms=math.nan,
                min_ms=math.nan, max_ms=math.nan, cv_pct=math.nan, gflops=math.nan, gbps=math.nan,
                scratch_bytes=0, arena_bytes=0, live_bytes=0, **common.NO_ENERGY, max_rel_err=math.nan, check=CHECK_WORD, status="",
                note="")


def finish_row(row, sh, direction, warm, ms, max_cv, cut=""):
    """the timing columns from the calls' times; status ok or noisy"""
    g = geometry(sh, direction, row["batch"])
    median, lo, hi, cv = common.summarize(ms)
    row.update(warmup=warm, reps=len(ms), median_ms=median, min_ms=lo, max_ms=hi, cv_pct=cv,
               gflops=g["flops"] / (median * 1e6), gbps=g["bytes"] / (median * 1e6), status="ok")
    extra = []
    if max_cv > 0 and cv > max_cv:
        row["status"] = "noisy"
        extra.append(f"cv above {max_cv:g}% (not measured again)")
    if cut:
        extra.append(cut)
    add_note(row, *extra)


def add_note(row, *parts):
    row["note"] = "; ".join(p for p in (row["note"], *parts) if p)[:NOTE_MAX]


# ---- the rows of one impl (torch only through `ops`) ----

def run_items(out, ops, impl, items, opts, refs, log=print):
    """Every row of `items` by `ops` (one impl on its device): checked, then
    timed, each written to `out` (and passed to log) as it is done. After
    opts['deadline'] (time.time()) the rest are written as skipped. Returns
    the rows."""
    done = []
    for sh, batch, dirs in groups(items):
        if time.time() > opts["deadline"]:
            rows = [base_row(impl, sh, d, batch, ops.threads) for d in dirs]
            for r in rows:
                r.update(status="skipped", note=f"--time-limit: this impl's share of {opts['time_limit']:g} s ran out")
        else:
            rows = run_group(ops, impl, sh, batch, dirs, opts, refs)
        for r in rows:
            out.write(r)
            log(r)
        done += rows
    return done


def run_group(ops, impl, sh, batch, dirs, opts, refs):
    """the rows of one shape at one batch: its inputs made once"""
    rows = [base_row(impl, sh, d, batch, ops.threads) for d in dirs]
    try:
        host = ops.host_inputs(operand_shapes(sh, batch), case_seed(sh, batch))
        dev = ops.load(host)
    except (RuntimeError, MemoryError) as e:  # out of memory, most likely
        for r in rows:
            failed_row(r, ops, e)
        return rows
    for r, d in zip(rows, dirs):
        try:
            run_row(r, ops, sh, d, batch, host, dev, opts, refs)
        except (RuntimeError, MemoryError) as e:  # the library refused the call, or memory ran out
            failed_row(r, ops, e)
    del host, dev
    return rows


def failed_row(row, ops, e):
    """status oom or error, the exception's first line as the note"""
    row.update(status=ops.failure_status(e), note=(str(e).strip().splitlines() or [type(e).__name__])[0][:NOTE_MAX])
    ops.recover()


def run_row(row, ops, sh, direction, batch, host, dev, opts, refs):
    idx, exact, abs_sum = refs.get(sh, direction, batch, host, ops.f64)
    fn = ops.op(direction, sh, dev)
    got = ops.gather(fn(), idx)  # the first call: cudnn.benchmark's autotuning is in it
    err = check_error(exact, abs_sum, got)
    row["max_rel_err"] = err
    add_note(row, ops.backend(sh, dev))
    if not err <= CHECK_TOL:
        row["status"] = "wrong"
        add_note(row, "WRONG: " + check_note(err))
        return
    warm, ms, cut = ops.time(fn, opts)
    row["scratch_bytes"] = ops.scratch(fn)
    add_note(row, check_note(err))
    finish_row(row, sh, direction, warm + 1, ms, opts["max_cv"], cut)


# ---- torch ----

class TorchOps:
    """One impl's device through PyTorch: inputs, the direction's call, the
    check's entries, timing, workspace."""

    def __init__(self, impl, threads):
        import torch
        self.torch = torch
        self.gpu = IMPLS[impl]["gpu"]
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        if self.gpu:
            if not torch.cuda.is_available():
                raise NoDevice("no CUDA device answers (torch.cuda.is_available() is False)")
            self.dev = torch.device("cuda")
            torch.backends.cudnn.enabled = True
            torch.backends.cudnn.deterministic = False
            torch.backends.cudnn.benchmark = IMPLS[impl]["benchmark"]
            self.threads = 0
        else:
            self.dev = torch.device("cpu")
            torch.set_num_threads(threads)
            self.threads = torch.get_num_threads()
        torch.set_grad_enabled(False)  # plain calls: no autograd graph is recorded
        self.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if self.gpu else None

    def f64(self, a):
        return a.double()

    def host_inputs(self, shapes, seed):
        """x, w, dy uniform in [-1, 1), seeded, in host memory"""
        g = self.torch.Generator().manual_seed(seed)
        return {k: self.torch.rand(s, generator=g).mul_(2).sub_(1) for k, s in shapes.items()}

    def load(self, host):
        return {k: v.to(self.dev) for k, v in host.items()} if self.gpu else host

    def op(self, direction, sh, t):
        """the direction's call (the timed region: module docstring)"""
        import torch.nn.functional as F
        stride, pad = (sh.stride, sh.stride), (sh.pad, sh.pad)
        if direction == "fwd":
            return lambda: F.conv2d(t["x"], t["w"], None, stride, pad)
        bwd = self.torch.ops.aten.convolution_backward
        which = 0 if direction == "bwd-data" else 1
        mask = (which == 0, which == 1, False)
        return lambda: bwd(t["dy"], t["x"], t["w"], None, stride, pad, (1, 1), False, (0, 0), 1, mask)[which]

    def gather(self, out, idx):
        flat = out.reshape(-1)
        return flat[self.torch.tensor(idx, dtype=self.torch.long, device=out.device)].double().cpu().tolist()

    def backend(self, sh, t):
        """which of PyTorch's convolutions its dispatcher picks for these
        inputs (Cudnn, Mkldnn, Slow2d ...): the forward's choice, which
        convolution_backward makes by the same rules for fp32"""
        try:
            b = self.torch._C._select_conv_backend(t["x"], t["w"], None, (sh.stride, sh.stride), (sh.pad, sh.pad),
                                                  (1, 1), False, (0, 0), 1)
            return "backend " + str(b).rsplit(".", 1)[-1]
        except (AttributeError, RuntimeError, TypeError):
            return "backend ?"

    def time(self, fn, opts):
        """(warm-up calls, timed calls' ms, why the timing stopped early or
        "") by common.measure: bench/runner/timing.c's rules, no retries"""
        t = common.Timing(warmup=opts["warmup"], reps=opts["reps"], min_time=opts["min_time"],
                          max_reps=opts["max_reps"], max_cv=0, retries=0, row_time=opts["row_time"])
        st = common.measure(lambda: self.one_call(fn), t, sync=self.sync)
        why = (f"stopped at {st['reps']} runs by --row-time {opts['row_time']:g} s" if st["cut"] else
               f"--max-reps {opts['max_reps']} before --min-time" if st["capped"] else "")
        return st["warmup"], st["ms"], why

    def one_call(self, fn):
        if self.gpu:
            start, stop = self.events
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop)
        t = time.perf_counter()
        fn()
        return 1e3 * (time.perf_counter() - t)

    def scratch(self, fn):
        """GPU: the caching allocator's peak during one call less what it
        holds after it, the output still alive: what the call freed again
        (cuDNN's workspace), in the allocator's block sizes; CPU: 0, not
        measured"""
        if not self.gpu:
            return 0
        cuda = self.torch.cuda
        cuda.synchronize()
        cuda.reset_peak_memory_stats()
        out = fn()
        cuda.synchronize()
        scratch = cuda.max_memory_allocated() - cuda.memory_allocated()
        del out
        return max(0, scratch)

    def sync(self):
        if self.gpu:
            self.torch.cuda.synchronize()

    def recover(self):
        if self.gpu:
            self.torch.cuda.empty_cache()

    def failure_status(self, e):
        """oom for torch.cuda.OutOfMemoryError and the CPU allocator's
        RuntimeError ("DefaultCPUAllocator: can't allocate memory")"""
        oom = isinstance(e, MemoryError) or (self.gpu and isinstance(e, self.torch.cuda.OutOfMemoryError))
        return "oom" if oom or "can't allocate memory" in str(e) else "error"

    def meta(self, impl):
        torch = self.torch
        where = (f"gpu: {torch.cuda.get_device_name(self.dev)}" if self.gpu else
                 f"cpu: {self.threads} torch threads (torch.set_num_threads); mkldnn (oneDNN) available "
                 f"{torch.backends.mkldnn.is_available()}, enabled {torch.backends.mkldnn.enabled}")
        bench = f"cudnn.benchmark {torch.backends.cudnn.benchmark}" if self.gpu else "no cuDNN"
        limit = getattr(torch.backends.cudnn, "benchmark_limit", None)
        if self.gpu and IMPLS[impl]["benchmark"] and limit is not None:
            bench += f" (benchmark_limit {limit})"
        return [f"duograd conv peer (bench/peers/torch_conv.py): {impl}: PyTorch fp32 NCHW; {bench}",
                common.date_line(),
                f"torch: {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()})",
                where,
                "tf32: off (torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False)",
                "timed: one call of F.conv2d (fwd) or aten.convolution_backward with the direction's output mask; "
                + ("CUDA events around it then a wait for the stop event" if self.gpu else "perf_counter around it"),
                f"check: {CHECK_WORD} as core/check/conv_check.h ({CHECK_SAMPLES} entries, tol {CHECK_TOL:g})",
                "scratch_bytes: " + ("the caching allocator's peak in one call less what it holds after, the output "
                                     "alive (the workspace)" if self.gpu else "not measured (0)")]


class NoDevice(Exception):
    pass


# ---- the child process: one impl ----

def progress(row):
    print(f"{PROG}: {row['impl']} {row['case']} batch {row['batch']}: {row['status']} "
          f"{row['median_ms']:.4g} ms {row['gflops']:.1f} GFLOP/s (err {row['max_rel_err']:.2g})", flush=True)


def run_child(plan_path):
    """runs the impl of plan_path's plan (written by main): its rows go to
    the CSV and, as JSON lines, to the plan's summary file. Exit 0 (whatever
    the rows' status), 3 without a device, 130 interrupted."""
    with open(plan_path) as f:
        p = json.load(f)
    try:
        ops = TorchOps(p["impl"], p["threads"])
    except NoDevice as e:
        print(f"{PROG}: {p['impl']}: {e}", file=sys.stderr, flush=True)
        return 3
    items = [parse_case(c) + (b,) for c, b in p["items"]]
    out = common.CsvOut(p["csv"], ops.meta(p["impl"]), PROG)
    summary = open(p["summary"], "a")

    def log(row):
        summary.write(json.dumps(row) + "\n")
        summary.flush()
        progress(row)

    try:
        run_items(out, ops, p["impl"], items, p["opts"], RefCache(p["refs"]), log)
    except KeyboardInterrupt:
        print(f"{PROG}: {p['impl']}: interrupted; the rows done so far are in {p['csv']}", flush=True)
        return 130
    finally:
        out.close()
        summary.close()
    return 0


def wait_child(proc, limit):
    """the child's exit status; past `limit` seconds (or on Ctrl-C, which
    reaches the child too) it gets SIGINT, then SIGKILL 10 s later"""
    try:
        return proc.wait(limit)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
    except KeyboardInterrupt:
        pass
    try:
        return proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


# ---- the parent: plan, one child per impl, summary (no torch) ----

def parse_list(text, kind=int):
    try:
        v = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        v = []
    if not v or (kind is int and min(v) < 1):
        what = " of integers >= 1" if kind is int else ""
        raise argparse.ArgumentTypeError(f"'{text}': a comma-separated list{what}")
    return v


def cpu_count():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def best_duograd(rows):
    """(case, batch, backend) -> the highest GFLOP/s of duograd's measured
    kernel rows (transfer 0)"""
    best = {}
    for r in duograd_rows(rows):
        if r["status"] not in ("ok", "noisy") or r.get("transfer", "0") != "0":
            continue
        try:
            v = float(r["gflops"])
        except ValueError:
            continue
        key = (r["case"], int(r["batch"]), r["backend"])
        if math.isfinite(v) and v > best.get(key, 0.0):
            best[key] = v
    return best


def summary_lines(peer_rows, duograd):
    """per impl: rows by status, and the geometric mean per direction of
    duograd's best GFLOP/s on the device over PyTorch's, where both measured"""
    lines = []
    for impl in IMPLS:
        rows = [r for r in peer_rows if r["impl"] == impl]
        if not rows:
            continue
        counts = collections.Counter(r["status"] for r in rows)
        ratios = []
        for d in DIRS:
            logs = [math.log(duograd[(r["case"], r["batch"], r["backend"])] / r["gflops"]) for r in rows
                    if r["case"].endswith(":" + d) and r["status"] in ("ok", "noisy")
                    and (r["case"], r["batch"], r["backend"]) in duograd and r["gflops"] > 0]
            if logs:
                ratios.append(f"{d} {math.exp(sum(logs) / len(logs)):.2f} ({len(logs)})")
        dev = "GPU" if IMPLS[impl]["gpu"] else "CPU"
        line = f"{impl}: {len(rows)} rows: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        if ratios:
            line += f"; duograd's best {dev} / {impl}, geometric mean (rows): " + ", ".join(ratios)
        lines.append(line)
    return lines


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="What is timed and checked: the module docstring "
                                        "(pydoc bench/peers/torch_conv.py).")
    common.out_arg(ap, "result folder: duograd's DIR/conv.csv, the rows are appended to it")
    ap.add_argument("--batches", type=common.int_list(), default=None,
                    help="these batches for every case (default: duograd's cases and batches per device)")
    ap.add_argument("--devices", type=lambda s: parse_list(s, str), default=["gpu", "cpu"], help="gpu,cpu (default)")
    ap.add_argument("--impls", type=lambda s: parse_list(s, str), default=list(IMPLS),
                    help=f"of {', '.join(IMPLS)} (default all; --devices filters them)")
    ap.add_argument("--threads", type=int, default=cpu_count(), help="torch-cpu's threads (default: the CPUs)")
    ap.add_argument("--filter", default=None, help="only the cases whose name contains this, e.g. r18c or :fwd")
    ap.add_argument("--time-limit", type=float, default=210.0,
                    help="seconds for the whole run, shared by the impls; rows past it are skipped (default 210)")
    common.timing_args(ap, max_reps=1000)  # --warmup: untimed calls after the check's
    ap.add_argument("--row-time", type=float, default=1.0, help="at most this much wall clock per row (default 1)")
    a = ap.parse_args(argv)
    bad = [d for d in a.devices if d not in ("gpu", "cpu")] + [i for i in a.impls if i not in IMPLS]
    if bad:
        ap.error(f"unknown device(s) or impl(s): {', '.join(bad)}")
    common.check_timing_args(ap, a)
    if a.threads < 1 or a.time_limit <= 0 or a.row_time <= 0:
        ap.error("--threads, --time-limit and --row-time must be positive")
    return a


def device_of(impl):
    return "gpu" if IMPLS[impl]["gpu"] else "cpu"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--child":
        return run_child(argv[1])
    a = parse_args(argv)
    start = time.time()
    csv_path = os.path.join(a.out, "conv.csv")
    try:
        rows = common.read_rows(csv_path)[1] if os.path.exists(csv_path) else []
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    bad = geometry_problems(duograd_rows(rows), csv_path)
    for why in bad.values():
        print(f"{PROG}: warning: {why}; left out (bench/peers/torch_conv.py's SHAPES is out of step with "
              "bench/sweeps/conv/conv_cases.c)", file=sys.stderr)
    wanted = plan(rows, a.devices, a.batches, a.filter, bad)
    for dev in a.devices:
        why = "" if wanted[dev] or a.batches else f" (no duograd {dev} rows in {csv_path}; --batches runs some anyway)"
        print(f"{PROG}: {dev}: {len(wanted[dev])} rows per impl{why}", flush=True)
    impls = [i for i in a.impls if device_of(i) in a.devices and wanted[device_of(i)]]
    os.makedirs(a.out, exist_ok=True)
    opts = dict(warmup=a.warmup, reps=a.reps, min_time=a.min_time, max_reps=a.max_reps, row_time=a.row_time,
                max_cv=a.max_cv, time_limit=a.time_limit)
    failed, interrupted, peer_rows = [], False, []
    with tempfile.TemporaryDirectory(prefix="convpeer-") as tmp:
        summary = os.path.join(tmp, "rows.jsonl")
        for k, impl in enumerate(impls):
            # each impl gets an equal part of the time left: what one leaves goes to the next
            share = max(0.0, start + a.time_limit - time.time()) / (len(impls) - k)
            p = dict(impl=impl, items=[[f"{sh.name}:{d}", b] for sh, d, b in wanted[device_of(impl)]], csv=csv_path,
                     refs=tmp, summary=summary, threads=a.threads, opts=dict(opts, deadline=time.time() + share))
            plan_path = os.path.join(tmp, f"plan-{impl}.json")
            with open(plan_path, "w") as f:
                json.dump(p, f)
            print(f"{PROG}: {impl}: {len(p['items'])} rows in {share:.0f} s at most", flush=True)
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", plan_path])
            try:
                rc = wait_child(proc, share + CHILD_GRACE_S)
            except KeyboardInterrupt:  # a second Ctrl-C
                proc.kill()
                rc = proc.wait()
            if rc == 130 or rc == -signal.SIGINT:
                interrupted = True
                break
            if rc:
                failed.append(f"{impl}: exit status {rc}" + (" (no device)" if rc == 3 else ""))
        if os.path.exists(summary):
            with open(summary) as f:
                peer_rows = [json.loads(line) for line in f if line.strip()]
    print()
    for line in summary_lines(peer_rows, best_duograd(rows)) + failed:
        print(line)
    wrong = sum(r["status"] == "wrong" for r in peer_rows)
    print(f"{len(peer_rows)} rows appended to {csv_path} in {time.time() - start:.0f} s"
          + (f"; {wrong} wrong" if wrong else "") + (f"; {len(bad)} case(s) left out" if bad else ""))
    if interrupted:
        return 130
    return 1 if failed or wrong or bad else 0


if __name__ == "__main__":
    sys.exit(main())
