"""peers.common: what every peer does the way bench does it.

- COLUMNS: bench's CSV columns (BENCH_CSV_HEADER, bench/writers/csv.h) and
  the ones its reader requires. A constant, not parsed out of csv.h at run
  time: bench/peers/tests/test_common.py compares it with the compiled
  macro and with the header of a file the bench wrote, so a column added
  to bench fails the test, where the peers would otherwise write rows with
  the new column left empty (an empty number bench's reader refuses).
- read_rows / read_header: the one reader of bench CSVs, on the standard
  library's csv module, with bench_csv_read's (bench/writers/csv.c) rules.
- csv_field / format_row / CsvOut: rows written as bench_csv_write writes
  them, appended to a file in its own header's column order.
- date_line: the metadata line every peer's rows carry.
- summarize / Timing / measure / host_ms / repeat: bench/runner/timing.c's
  rules.
- out_arg / int_list / bounded / timing_args: the options the peers share.
- PRECISIONS / dtype_list / dtype_args / precision_fields: the precision
  axis (bench --dtype): the names, the option, the dtype and tf32 columns.
- UNIT_ROUNDOFF / gemm_tol / rounded_tol / round_to: the check tolerances
  per precision, derived from the unit roundoffs in one place.

No torch and no NumPy here: the peers import them where they need them.
"""
import argparse
import csv
import datetime
import gc
import math
import os
import sys
import time

# ---- bench's columns ----

COLUMNS = ("sweep", "case", "impl", "backend", "dtype", "m", "n", "k", "batch", "threads", "transfer", "tf32",
           "cold", "warmup", "reps", "median_ms", "min_ms", "max_ms", "cv_pct", "gflops", "gbps", "scratch_bytes",
           "arena_bytes", "live_bytes", "energy_j", "avg_w", "gflop_per_j", "samples_per_j", "max_rel_err", "check",
           "status", "note")  # BENCH_CSV_HEADER
# bench_csv_read's required columns (bench/writers/csv.c, col_names before N_REQUIRED)
REQUIRED_COLUMNS = ("sweep", "case", "impl", "backend", "m", "n", "k", "batch", "transfer",
                    "median_ms", "min_ms", "max_ms", "status")
# a peer measures no energy (the bench's energy windows are its own): its
# rows leave the energy columns empty, as a bench row without a counter does
NO_ENERGY = dict(energy_j=math.nan, avg_w=math.nan, gflop_per_j=math.nan, samples_per_j=math.nan)
NOTE_MAX = 159     # csv_rec's note holds 159 characters: bench cuts a longer one
MAX_CV_PCT = 5.0   # bench's default --max-cv: above it a row is "noisy"


def bench_header():
    """bench's columns in their order, as a list the caller may change"""
    return list(COLUMNS)


# ---- reading: the one CSV reader ----

def read_csv(path):
    """(columns, rows as dicts by header name, the cut line or None) of a
    bench CSV, read as bench_csv_read reads it:
      - a line starting with '#' (metadata, anywhere) and an empty line are
        skipped;
      - the first other line is the header: columns are found by name, so a
        folder written with fewer columns (before one was added) reads, its
        rows without the newer keys;
      - a last line without its newline is a row cut short by a killed run:
        left out (returned as the third value for a warning), also when it
        is the header (columns None then);
      - a row whose field count is not the header's, or with a NUL byte, is
        refused (ValueError naming the file and line).
    Fields are split by the csv module, one line at a time: a quoted field
    may hold commas (a file a spreadsheet saved), never a line break (bench
    writes one row per line, and a cut row is told by its missing newline).
    bench's own reader splits at every comma, and its writer puts none
    inside a field (bench_csv_write turns them into ';'), so a line bench
    wrote has the same fields here as there; the one difference is a free
    text field that starts with '"', read here without its quote marks
    (leniently, the csv module's default: never a refusal of a file bench
    reads). Without a header: (None, [], cut)."""
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f:
        lines = f.read().split("\n")
    cut = lines.pop() or None  # "" after a final newline, else the row cut short
    columns, rows = None, []
    for no, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if not line or line.startswith("#"):
            continue
        if "\0" in line:  # refused, as bench refuses it
            raise ValueError(f"{path}:{no}: a NUL byte: not a text file")
        try:
            fields = next(csv.reader([line]))
        except csv.Error as e:  # a field over the csv module's size limit
            raise ValueError(f"{path}:{no}: {e}") from None
        if columns is None:
            columns = fields
            continue
        if len(fields) != len(columns):
            raise ValueError(f"{path}:{no}: {len(fields)} fields, the header has {len(columns)}")
        rows.append(dict(zip(columns, fields)))
    return columns, rows, cut


def read_rows(path):
    """(columns, rows as dicts by header name) of a bench CSV (read_csv's
    rules; a row cut short left out); (None, []) without a header"""
    columns, rows, _ = read_csv(path)
    return columns, rows


def read_header(path):
    """the columns of a bench CSV's header, or None when it has none
    (metadata only: the run died before writing it)"""
    return read_csv(path)[0]


def check_header(columns, path):
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"{path}: its header lacks the column(s) {', '.join(missing)}: "
                         "not a duograd bench CSV, no rows appended")


# ---- writing: rows as bench_csv_write writes them ----

def csv_field(v):
    """One field as bench/writers/csv.c writes it: numbers %.6g (NaN when
    not finite), text with commas as ';' and control characters as ' '.
    Never quoted: bench's reader splits at every comma."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "%.6g" % v if math.isfinite(v) else "NaN"
    return "".join(";" if c == "," else " " if ord(c) < 0x20 or ord(c) == 0x7F else c for c in str(v))


def format_row(row, columns):
    """row (a dict by column name) as one line in columns' order; a column the
    row lacks is left empty, a field the header lacks is dropped."""
    return ",".join(csv_field(row.get(c)) for c in columns) + "\n"


def date_line():
    """the metadata line of when the rows were made, in UTC"""
    return "date: " + datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class CsvOut:
    """A result file the peer's rows go to, flushed one by one. An existing
    file is appended to in its own header's column order (after a '# LABEL:'
    line with the metadata: '#' lines between rows are skipped by bench's
    reader and by gnuplot), its row cut short dropped first; a file with
    metadata only gets `columns` (default COLUMNS) as its header; a missing
    or empty file is created with the metadata lines and that header.
    ValueError, before anything is written, for a header without a column
    bench requires. prog names the peer in warnings."""

    def __init__(self, path, meta_lines, prog, label="torch peer rows", columns=None):
        self.path, self.prog = path, prog
        if os.path.exists(path) and os.path.getsize(path) > 0:
            self.columns = read_header(path)
            header = self.columns is None  # metadata only: the sweep died before its header
            if header:
                self.columns = list(columns or COLUMNS)
            check_header(self.columns, path)  # before anything is written
            self._drop_cut_row()
            self.f = open(path, "a")
            if header:
                self.f.write(",".join(self.columns) + "\n")
            self.f.write(f"# {label}: " + "; ".join(meta_lines) + "\n")
        else:
            self.columns = list(columns or COLUMNS)
            check_header(self.columns, path)
            self.f = open(path, "w")
            self.f.write("".join(f"# {m}\n" for m in meta_lines) + ",".join(self.columns) + "\n")
        self.f.flush()

    def _drop_cut_row(self):
        """A last line without its newline is a row cut short (bench's reader
        skips it); appending after it would make it a malformed line."""
        with open(self.path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                print(f"{self.prog}: warning: {self.path}: incomplete last line dropped", file=sys.stderr)
                f.truncate(data.rfind(b"\n") + 1)

    def write(self, row):
        self.f.write(format_row(row, self.columns))
        self.f.flush()

    def close(self):
        self.f.close()


# ---- timing: bench/runner/timing.c's rules ----

def summarize(ms):
    """median, min, max and cv_pct of the run times in ms; the CV with the
    sample standard deviation (n - 1), as bench_stats_of computes it"""
    v = sorted(ms)
    n = len(v)
    median = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    mean = sum(v) / n
    var = sum((x - mean) ** 2 for x in v) / (n - 1) if n > 1 else 0.0
    return median, v[0], v[-1], 100.0 * math.sqrt(var) / mean if mean > 0 else 0.0


class Timing:
    """bench_timing: warm-up runs until `warmup` runs and `warmup_time` s;
    timed runs until `reps` runs and `min_time` s of their times, at most
    `max_reps`; above `max_cv` % measured again, at most `retries` times.
    `row_time`, which bench has not: at most this many seconds of wall
    clock for the timed runs of one attempt (None: no bound)."""

    def __init__(self, warmup=2, warmup_time=0.0, reps=5, min_time=0.1, max_reps=10000, max_cv=MAX_CV_PCT,
                 retries=2, row_time=None):
        self.warmup, self.warmup_time, self.reps, self.min_time = warmup, warmup_time, reps, min_time
        self.max_reps, self.max_cv, self.retries = max(max_reps, reps), max_cv, retries
        self.row_time = row_time


def time_reps(run, t, warm_ms):
    """timed runs (run() returns one run's ms) until t.reps and t.min_time,
    or t.max_reps (capped), or t.row_time (cut); a warm-up run longer than
    the whole time budget makes 3 runs enough, as bench/runner/timing.c"""
    long_run = t.min_time > 0 and warm_ms > 1e3 * t.min_time
    min_reps = 3 if long_run and t.reps > 3 else t.reps
    ms, total, t0, cut = [], 0.0, time.perf_counter(), False
    while len(ms) < t.max_reps and (len(ms) < min_reps or total < 1e3 * t.min_time):
        if ms and t.row_time is not None and time.perf_counter() - t0 > t.row_time:
            cut = True
            break
        ms.append(run())
        total += ms[-1]
    med, lo, hi, cv = summarize(ms)
    return dict(ms=ms, reps=len(ms), median=med, min=lo, max=hi, cv=cv, cut=cut,
                capped=len(ms) == t.max_reps and total < 1e3 * t.min_time)


def measure(run, t, sync=None):
    """bench_time: warm-up (a count and a time), sync(), then timed runs; a
    measurement whose CV is above t.max_cv is taken again up to t.retries
    times, keeping the steadiest. The garbage collector is off meanwhile,
    as timeit has it: its pauses would be the collector's time, not the
    run's. Returns time_reps' dict with warmup and retries added."""
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        warm, warm_ms, t0 = 0, 0.0, time.perf_counter()
        while warm < t.warmup or time.perf_counter() - t0 < t.warmup_time:
            warm_ms = run()
            warm += 1
        if sync:
            sync()
        best, retries = time_reps(run, t, warm_ms), 0
        while t.max_cv > 0 and best["cv"] > t.max_cv and retries < t.retries:
            again = time_reps(run, t, warm_ms)
            retries += 1
            if again["cv"] < best["cv"]:
                best = again
    finally:
        if gc_was_on:
            gc.enable()
    best.update(warmup=warm, retries=retries)
    return best


def host_ms(fn):
    """one call of fn by the host clock, in ms: a run for measure() of
    work that is done when fn returns"""
    t0 = time.perf_counter()
    fn()
    return 1e3 * (time.perf_counter() - t0)


def repeat(fn, min_count, min_seconds, max_count=None):
    """calls fn() until both min_count calls and min_seconds of wall clock
    are done, at most max_count: for work whose times are known only later
    (GPU events not waited for between runs). Returns the number of calls."""
    n, t0 = 0, time.perf_counter()
    while (n < min_count or time.perf_counter() - t0 < min_seconds) and (max_count is None or n < max_count):
        fn()
        n += 1
    return n


# ---- the options the peers share ----

def out_arg(ap, help):
    ap.add_argument("--out", required=True, metavar="DIR", help=help)


def int_list(lo=1, hi=None):
    """argparse type: a comma-separated list of integers in [lo, hi]"""
    def parse(text):
        try:
            v = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            v = []
        if not v or min(v) < lo or (hi is not None and max(v) > hi):
            raise argparse.ArgumentTypeError(f"'{text}': a comma-separated list of integers {lo} to {hi}"
                                             if hi is not None else
                                             f"'{text}': a comma-separated list of integers >= {lo}")
        return v
    return parse


def bounded(kind, lo, hi):
    """argparse type: one int or float in [lo, hi] (NaN refused)"""
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            v = None
        if v is None or not lo <= v <= hi or (kind is float and math.isnan(v)):
            raise argparse.ArgumentTypeError(f"'{text}': {lo} to {hi}")
        return v
    return parse


def timing_args(ap, max_reps=10000, warmup_time=False, retries=False):
    """bench's timing options with bench's defaults (max_reps: the peer's);
    --warmup-time and --retries where the peer takes them"""
    ap.add_argument("--warmup", type=bounded(int, 0, 1000), default=2, metavar="N",
                    help="untimed runs first (default 2)")
    if warmup_time:
        ap.add_argument("--warmup-time", type=bounded(float, 0, 60), default=0.0, metavar="S",
                        help="and at least S seconds of them (default 0)")
    ap.add_argument("--reps", type=bounded(int, 1, 100000), default=5, metavar="N",
                    help="at least N timed runs (default 5)")
    ap.add_argument("--min-time", type=bounded(float, 0, 3600), default=0.1, metavar="S",
                    help="and at least S seconds of them (default 0.1)")
    ap.add_argument("--max-reps", type=bounded(int, 1, 1000000), default=max_reps, metavar="N",
                    help=f"at most N timed runs (default {max_reps})")
    ap.add_argument("--max-cv", type=bounded(float, 0, 1000), default=MAX_CV_PCT, metavar="PCT",
                    help="a row above it is " + ("measured again, then " if retries else "") +
                         f"'noisy' (default {MAX_CV_PCT:g})")
    if retries:
        ap.add_argument("--retries", type=bounded(int, 0, 10), default=2, metavar="N",
                        help="more measurements of a noisy row (default 2)")


def check_timing_args(ap, a):
    """refuses --max-reps below --reps (argparse's exit status 2)"""
    if a.max_reps < a.reps:
        ap.error(f"--max-reps {a.max_reps} is below --reps {a.reps}")


def timing_of(a, row_time=None):
    """the Timing of parsed timing_args"""
    return Timing(a.warmup, getattr(a, "warmup_time", 0.0), a.reps, a.min_time, a.max_reps, a.max_cv,
                  getattr(a, "retries", 0), row_time)


# ---- the precision axis: bench --dtype's names and columns ----

# bench's precisions (core/precision.h): fp32 (float32, no tensor cores),
# tf32 (float32 storage, products on TF32 tensor cores), bf16 and fp16
# (operands in the dtype, float32 accumulation)
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


def dtype_list(text):
    """argparse type: a comma-separated list of PRECISIONS, or "all"; in
    PRECISIONS' order, each once. An unknown name is refused, naming it
    and the accepted ones."""
    names = [v.strip() for v in text.split(",") if v.strip()]
    if names == ["all"]:
        return list(PRECISIONS)
    bad = [v for v in names if v not in PRECISIONS]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"'{bad[0] if bad else text}' is not a precision: "
                                         f"a comma-separated list of {', '.join(PRECISIONS)}, or all")
    return [p for p in PRECISIONS if p in names]


def dtype_args(ap, default="fp32"):
    """--dtype LIST, as bench's"""
    ap.add_argument("--dtype", type=dtype_list, default=dtype_list(default), metavar="LIST",
                    help=f"precisions: a comma-separated list of {', '.join(PRECISIONS)}, or all "
                         f"(default {default})")


def precision_fields(p):
    """a row's dtype and tf32 columns for precision p: the name in dtype,
    tf32 1 exactly for tf32 (bench_csv_write's columns)"""
    if p not in PRECISIONS:
        raise ValueError(f"'{p}' is not a precision ({', '.join(PRECISIONS)})")
    return dict(dtype=p, tf32=int(p == "tf32"))


# ---- check tolerances per precision, from the unit roundoffs ----
#
# The unit roundoff u of a format with p significant bits (the implicit one
# counted) is 2^-p: round to nearest moves a value by at most u relative.
# float32 p = 24, TF32 11, bfloat16 8, binary16 11:
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "tf32": 2.0**-11, "bf16": 2.0**-8, "fp16": 2.0**-11}
# The peers check a product C = A B (k terms a row) by
#     max |C - C_ref| / max |C_ref|
# against float64 of the operands the product was given (for bf16 and fp16
# the operands already rounded to the dtype, so rounding them costs nothing:
# they are exact in float64). With A, B >= 0 (the gemm rows' torch.rand),
# |A||B| = A B, and the classic bound |fl(A B) - A B| <= gamma_k |A||B|,
# gamma_k = k u / (1 - k u), gives the relative error directly, in any
# summation order (blocked, split-k, tree):
#   - fp32: float32 FMAs, round to nearest: gamma_k(2^-24);
#   - tf32, bf16, fp16 on tensor cores: float32 accumulation whose adders
#     truncate and keep no guard bits (Fasi, Higham, Mikaitis and Pranesh,
#     "Numerical behavior of NVIDIA tensor cores", PeerJ CS 2021): each
#     addition off by up to 2^-23, so gamma_k(2^-23);
#   - tf32 rounds (or, in some kernels, truncates) float32 operands to 10
#     stored bits inside the product: each operand off by up to 2^-10, a
#     product of two by (1 + 2^-10)^2 - 1;
#   - an output in bf16 or fp16 (what PyTorch returns for bf16/fp16
#     operands, and autocast's matmul output) is rounded once more: u of
#     the output dtype, 2^-8 (bf16) or 2^-11 (fp16), relative to the entry,
#     so at most that relative to max |C_ref|.
# The terms compose as products of (1 + e). A wrong result (a bad index, a
# lost term, a missed rounding mode) is off by far more than the bound: k =
# 8192 gives 4.9e-4 (fp32), 1.2e-3 (bf16 accumulation) + 3.9e-3 (bf16
# output). Measured on an H200 (torch_ops.py's gemm rows, PyTorch 2.11):
# 6.5e-6 (fp32), 1.2e-4 (tf32), 3.7e-3 (bf16), 5.1e-4 (fp16): the output's
# rounding is the whole error in bf16 and fp16.
ACCUMULATION_ROUNDOFF = {"fp32": 2.0**-24, "tf32": 2.0**-23, "bf16": 2.0**-23, "fp16": 2.0**-23}
OPERAND_ROUNDING = {"fp32": 0.0, "tf32": 2.0**-10, "bf16": 0.0, "fp16": 0.0}
LOW_PRECISION = ("bf16", "fp16")  # the precisions whose tensors PyTorch stores in the dtype


def gamma(n, u):
    """gamma_n = n u / (1 - n u): the relative bound of n roundings"""
    if n * u >= 1:
        return math.inf
    return n * u / (1 - n * u)


def output_roundoff(p):
    """u of the dtype a result of precision p is stored in: bf16 / fp16
    outputs round once more; fp32 and tf32 outputs are float32 (their own
    rounding is in the accumulation bound)"""
    return UNIT_ROUNDOFF[p] if p in LOW_PRECISION else 0.0


def gemm_tol(p, k, out=None):
    """the bound of max |C - C_ref| / max |C_ref| for a product of
    nonnegative operands with k terms a row in precision p, the output
    stored in dtype `out` (default: p's own; "fp32" for a float32 output
    of bf16/fp16 operands, as duograd's)"""
    if p not in PRECISIONS or (out is not None and out not in PRECISIONS):
        raise ValueError(f"'{p if p not in PRECISIONS else out}' is not a precision ({', '.join(PRECISIONS)})")
    operands = (1 + OPERAND_ROUNDING[p]) ** 2
    accumulation = 1 + gamma(k, ACCUMULATION_ROUNDOFF[p])
    stored = 1 + output_roundoff(p if out is None else out)
    return operands * accumulation * stored - 1


def rounded_tol(p, base, roundings=1):
    """the tolerance of a float32 computation (base: its fp32 tolerance)
    whose result in precision p passes through `roundings` more roundings
    to the dtype (bf16 / fp16 storage of the output or of an intermediate);
    p's u each; fp32 and tf32 add nothing"""
    if p not in PRECISIONS:
        raise ValueError(f"'{p}' is not a precision ({', '.join(PRECISIONS)})")
    more = (1 + output_roundoff(p)) ** roundings - 1
    return base + more * (1 + base)  # (1 + base)(1 + more) - 1, exactly base when more is 0


def round_to(np, x, p):
    """x (a float32 or float64 NumPy array) rounded to precision p's
    storage, round to nearest even, as float32: bf16 by the bits (NumPy has
    no bfloat16: the top 16 bits of the float32, rounded), fp16 through
    NumPy's float16; fp32 and tf32 as float32 (TF32 rounds inside the
    product, not in storage). NaN stays NaN; bf16 overflows to inf as the
    format does."""
    x = np.asarray(x, dtype=np.float32)
    if p == "fp16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float32)
    if p != "bf16":
        return x.copy()
    bits = x.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = bits.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


# The training-step peers (numpy_mlp, torch_mlp) check the first step's
# loss (relative error) and its parameter updates (relative L2 over all
# parameters) against float64 of the same step from the same operands (for
# bf16/fp16 the inputs and weights rounded to the dtype, what autocast's
# first product gets). fp32: core/check/step_check.h's BENCH_STEP_LOSS_TOL
# and BENCH_STEP_UPDATE_TOL (measured on duograd's steps).
STEP_LOSS_TOL, STEP_UPDATE_TOL = 1e-4, 5e-2
# The loss: an MLP of L layers under autocast stores each layer's output in
# the dtype (L roundings of u each) and TF32 rounds both operands of each
# product (2 L of 2^-10); softmax cross-entropy is 1-Lipschitz in the
# logits, so each carries to the loss at most 1:1 relative to the logits'
# size: rounded_tol's count of roundings, not a proof (the loss is O(1),
# the logits O(1) at duograd's initialisation). Measured by emulating
# autocast's roundings in NumPy (each product's operands and output, the
# gradients of the low-precision outputs too) on 784-256-100-10 and
# 784-1024-1024-10 at batches 32 to 2048: loss errors up to 1.6e-4 (bf16)
# and 4.5e-6 (fp16), against bounds of 1.2e-2 and 1.6e-3.
# The update: Adam's first step is lr g / (|g| + eps), lr sign(g) wherever
# |g| >> eps, so a gradient that cancels to near zero moves its update by
# up to 2 lr when rounding changes it: the fraction of such elements grows
# with u, and no bound of the roundings' count holds. The same emulation
# measured update errors up to 0.18 (bf16) and 0.051 (fp16) (fp32: 1e-2);
# PyTorch's steps on an H200 (bench/peers/torch_mlp.py, batches 32 and
# 2048, both widths) the same: 0.18 (bf16), 0.050 (fp16), 0.071 (tf32);
# the bound for tf32, bf16 and fp16 is 0.5, below the errors of a wrong
# Adam (no bias correction 2.2, a flipped sign 2, momentum as a moving
# average about 10). A gradient off by a positive factor (a loss scale not
# undone) is invisible to it: Adam's m / sqrt(v) does not change.
STEP_UPDATE_TOL_LOW = 0.5


def step_tol(p, layers):
    """(loss tolerance, update tolerance) of an MLP step of `layers` linear
    layers in precision p, by the rules above"""
    if p not in PRECISIONS:
        raise ValueError(f"'{p}' is not a precision ({', '.join(PRECISIONS)})")
    if p == "fp32":
        return STEP_LOSS_TOL, STEP_UPDATE_TOL
    if p == "tf32":
        return (1 + STEP_LOSS_TOL) * (1 + OPERAND_ROUNDING[p]) ** (2 * layers) - 1, STEP_UPDATE_TOL_LOW
    return rounded_tol(p, STEP_LOSS_TOL, roundings=layers), STEP_UPDATE_TOL_LOW
