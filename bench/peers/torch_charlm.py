#!/usr/bin/env python3
"""peers.torch_charlm: the PyTorch GPU peer of `bench --sweep transformer`.

The char-LM training step of bench/sweeps/transformer/ (core/nn/
transformer.h: ids -> embedding + a learned position table -> 4 pre-norm
blocks of width 256, 4 heads of 64, causal self-attention, an MLP of 4x
width with GELU -> layer norm -> logits over 96 characters; softmax
cross-entropy averaged over every position; backward; Adam lr 1e-3, betas
0.9 / 0.999, eps 1e-8), in PyTorch, over the sweep's batches and contexts,
in each precision of --dtype (bench's names):

  fp32  float32, TF32 off;  tf32  float32 tensors, TF32 matmuls;
  bf16 / fp16  the forward under torch.autocast (float32 master weights
        and Adam state), fp16 with GradScaler.

Attention is torch.nn.functional.scaled_dot_product_attention with
is_causal=True: PyTorch's fused kernels (flash or memory-efficient, its
own pick), so the rows are those of duograd's fused form (case
charlm-fused-bB). Impls: "torch-eager" and "torch-graph" (the whole step,
Adam and the scaler included, captured as a CUDA graph and replayed:
Adam(fused=True, capturable=True), autocast's cache off), as
peers.torch_mlp.

Each (impl, precision) is checked before it is timed: its first step at
batch 2 and context min(T, 64) (the sweep's check size) against the same
model's step in float64 on the CPU from the same initial weights (the loss
and the relative L2 error of all parameter updates), at the precision's
step tolerances (bench_step_tol_in, bench/runner/step_tol.c). A failed
check is a row with status "wrong" and no time. FLOPs as the sweep counts
them (step_flops in sweep_transformer.c). Rows are appended to
DIR/transformer.csv:

    build/bench --sweep transformer --dtype all --out DIR
    python3 bench/peers/torch_charlm.py --dtype all --out DIR [--sizes 64,128,256,512] [--batches 8,32]
"""
import argparse
import math
import os
import sys

if not __package__:  # run by its path: bench/ in place of this folder on sys.path (peers/__init__.py says why)
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(_HERE)] + [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peers import common  # noqa: E402
from peers.torch_step import CapturedStep  # noqa: E402

PROG = "torch_charlm"
VOCAB, WIDTH, HEADS, LAYERS = 96, 256, 4, 4    # LM_VOCAB, LM_WIDTH, LM_HEADS, LM_LAYERS (sweep_transformer.h)
CHECK_BATCH, CHECK_CONTEXT = 2, 64             # LM_CHECK_BATCH, LM_CHECK_CONTEXT
LR, BETA1, BETA2, EPS, LN_EPS = 1e-3, 0.9, 0.999, 1e-8, 1e-5
IMPLS = ("torch-eager", "torch-graph")
SCALE_TRIES = 24
# bench_step_tol_in (bench/runner/step_tol.c): fp32's loss and update
# tolerances (BENCH_STEP_*_TOL), a lower precision's
STEP_TOL = {"fp32": (1e-4, 5e-2), "tf32": (2e-3, 0.15), "bf16": (2e-2, 0.15), "fp16": (2e-3, 0.15)}


def att_flops(b, h, t, dh, causal=True, backward=True):
    """attention_graph.c's att_flops: forward 4 B H T^2 Dh, 14 with the backward"""
    kept = (t + 1) / (2 * t) if causal else 1.0
    return (14.0 if backward else 4.0) * b * h * t * t * dh * kept


def step_flops(batch, t):
    """sweep_transformer.c's step_flops"""
    tokens = batch * t
    return 6.0 * tokens * (12.0 * LAYERS * WIDTH * WIDTH + WIDTH * VOCAB) + \
        LAYERS * att_flops(batch, HEADS, t, WIDTH // HEADS)


def make_model(context, seed=1):
    """the char-LM as core/nn/transformer.c builds it, GPT-2's initialisation"""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(WIDTH, eps=LN_EPS), nn.LayerNorm(WIDTH, eps=LN_EPS)
            self.q, self.k, self.v, self.o = (nn.Linear(WIDTH, WIDTH) for _ in range(4))
            self.fc1, self.fc2 = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, h):
            b, t, c = h.shape
            a = self.ln1(h)

            def heads(x):
                return x.view(b, t, HEADS, c // HEADS).transpose(1, 2)
            att = F.scaled_dot_product_attention(heads(self.q(a)), heads(self.k(a)), heads(self.v(a)), is_causal=True)
            h = h + self.o(att.transpose(1, 2).reshape(b, t, c))
            return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))

    class CharLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, WIDTH)
            self.pos = nn.Parameter(torch.zeros(context, WIDTH))
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln = nn.LayerNorm(WIDTH, eps=LN_EPS)
            self.head = nn.Linear(WIDTH, VOCAB)

        def forward(self, ids):
            h = self.emb(ids) + self.pos
            for blk in self.blocks:
                h = blk(h)
            return self.head(self.ln(h))

    torch.manual_seed(seed)
    model = CharLM()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif ".ln" in name or name.startswith("ln."):
                p.fill_(1.0)
            else:
                residual = name.endswith("o.weight") or name.endswith("fc2.weight")
                p.normal_(0.0, 0.02 / math.sqrt(2 * LAYERS) if residual else 0.02)
    return model


def batch_of(batch, t, seed):
    """ids uniform over the vocabulary, each label the next id (the last: the first's)"""
    import torch
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, VOCAB, (batch, t), generator=g)
    return x, torch.roll(x, -1, dims=1)


class Step(CapturedStep):
    """One training step of the char-LM on the GPU in precision p, eager
    or captured as a CUDA graph (peers.torch_step.CapturedStep)"""

    def __init__(self, torch, model, x, y, p, graph):
        self.model, self.x, self.y = model, x, y
        super().__init__(torch, model.state_dict().values(), model.parameters(), p, graph, LR, (BETA1, BETA2), EPS)
        self.start()

    def loss_of(self):
        import torch.nn.functional as F
        return F.cross_entropy(self.model(self.x).reshape(-1, VOCAB).float(), self.y.reshape(-1))


def reference(t):
    """(initial state, x, y, loss, update) of the float64 step at the check size"""
    import torch
    import torch.nn.functional as F
    model = make_model(t).double()
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    x, y = batch_of(CHECK_BATCH, t, seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=LR, betas=(BETA1, BETA2), eps=EPS)
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
    loss.backward()
    opt.step()
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    return init, x, y, loss.item(), after - before


def check(torch, impl, p, ref):
    """(loss err, update err, note) of the impl's first step at the check size"""
    init, x, y, ref_loss, ref_delta = ref
    model = make_model(x.shape[1]).cuda()
    model.load_state_dict({k: v.float() for k, v in init.items()})
    step = Step(torch, model, x.cuda(), y.cuda(), p, graph=impl == "torch-graph")
    note = ""
    for _ in range(SCALE_TRIES):
        before = torch.cat([q.detach().double().cpu().flatten() for q in model.parameters()])
        scale = step.scale()
        step.run()
        if step.scale() >= scale:
            break
        step.reset()
    else:
        note = f"GradScaler skipped {SCALE_TRIES} first steps"
    if step.scaler is not None and not note:
        note = f"checked at loss scale {scale:g}"
    after = torch.cat([q.detach().double().cpu().flatten() for q in model.parameters()])
    loss_err = abs(float(step.static_loss) - ref_loss) / max(abs(ref_loss), 1e-30)
    upd_err = (torch.linalg.vector_norm(after - before - ref_delta) /
               max(torch.linalg.vector_norm(ref_delta).item(), 1e-300)).item()
    return (math.inf if math.isnan(loss_err) else loss_err), (math.inf if math.isnan(upd_err) else upd_err), note


def base_row(impl, batch, t, p):
    return dict(sweep="transformer", case=f"charlm-fused-b{batch}", impl=impl, backend="gpu", m=t, n=WIDTH,
                k=VOCAB, batch=batch, threads=0, transfer=0, **common.precision_fields(p), cold=0, warmup=0, reps=0,
                median_ms=math.nan, min_ms=math.nan, max_ms=math.nan, cv_pct=math.nan, gflops=math.nan,
                gbps=math.nan, scratch_bytes=0, arena_bytes=0, live_bytes=0, **common.NO_ENERGY,
                max_rel_err=math.nan, check=f"f64-step@b{CHECK_BATCH}t{min(t, CHECK_CONTEXT)}", status="", note="")


def parse(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 epilog="Exit status: 0, 1 when a row is wrong or failed, 2 for bad arguments.")
    common.out_arg(ap, "result folder: rows go to DIR/transformer.csv")
    ap.add_argument("--sizes", type=common.int_list(2, 1 << 16), default=[64, 128, 256, 512], metavar="LIST",
                    help="contexts T (default 64,128,256,512, the sweep's)")
    ap.add_argument("--batches", type=common.int_list(1, 1 << 16), default=[8, 32], metavar="LIST",
                    help="batch sizes (default 8,32)")
    ap.add_argument("--impl", default=",".join(IMPLS), help=f"{','.join(IMPLS)} (default both)")
    common.dtype_args(ap)
    a = ap.parse_args(argv)
    a.impls = [v for v in a.impl.split(",") if v]
    if not a.impls or any(v not in IMPLS for v in a.impls):
        ap.error(f"--impl {a.impl}: impls are {', '.join(IMPLS)}")
    return a


def main(argv=None):
    a = parse(argv)
    try:
        import torch
    except ImportError:
        print(f"{PROG}: PyTorch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device answers (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    from peers.torch_ops import precision_mode, time_gpu
    meta = [f"duograd torch peer (bench/peers/torch_charlm.py): the char-LM step, SDPA causal, "
            f"{','.join(a.impls)}, {','.join(a.dtype)}", common.date_line(),
            f"torch: {torch.__version__} (CUDA {torch.version.cuda})", f"gpu: {torch.cuda.get_device_name(0)}",
            "tf32: on in tf32 rows alone; bf16/fp16: torch.autocast, fp16 with GradScaler; Adam(fused=True)",
            "timing: CUDA events around each step or replay; arena_bytes: torch.cuda.max_memory_allocated()"]
    os.makedirs(a.out, exist_ok=True)
    try:
        out = common.CsvOut(os.path.join(a.out, "transformer.csv"), meta, PROG)
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    refs, bad = {}, False
    for p in a.dtype:
        for impl in a.impls:
            verdict = {}
            for t in a.sizes:
                tc = min(t, CHECK_CONTEXT)
                if tc not in refs:
                    refs[tc] = reference(tc)
                for batch in a.batches:
                    row = base_row(impl, batch, t, p)
                    try:
                        with precision_mode(torch, p):
                            if tc not in verdict:
                                verdict[tc] = check(torch, impl, p, refs[tc])
                            loss_err, upd_err, note = verdict[tc]
                            loss_tol, upd_tol = STEP_TOL[p]
                            row.update(max_rel_err=max(loss_err, upd_err), note=note)
                            if loss_err > loss_tol or upd_err > upd_tol:
                                row.update(status="wrong", note=f"loss rel err {loss_err:.3g} (tol {loss_tol:g}); "
                                                                f"update rel err {upd_err:.3g} (tol {upd_tol:g})")
                            else:
                                x, y = batch_of(batch, t, seed=batch * 1000 + t)
                                model = make_model(t).cuda()
                                torch.cuda.reset_peak_memory_stats()
                                step = Step(torch, model, x.cuda(), y.cuda(), p, graph=impl == "torch-graph")
                                reps, (med, lo, hi, cv) = time_gpu(step.run)
                                row.update(warmup=3, reps=reps, median_ms=med, min_ms=lo, max_ms=hi, cv_pct=cv,
                                           gflops=step_flops(batch, t) / (med * 1e6),
                                           arena_bytes=torch.cuda.max_memory_allocated(),
                                           status="noisy" if cv > common.MAX_CV_PCT else "ok")
                                del step, model
                    except torch.cuda.OutOfMemoryError as e:
                        row.update(status="oom", note=str(e).splitlines()[0][:150])
                    except Exception as e:  # a row that failed says why; the sweep goes on
                        row.update(status="error", note=f"{type(e).__name__}: {e}".splitlines()[0][:150])
                    torch.cuda.empty_cache()
                    bad |= row["status"] in ("wrong", "error")
                    out.write(row)
                    print(f"{PROG}: {row['case']} T={t} {impl} {p}: {row['status']} median {row['median_ms']:.4g} ms "
                          f"err {row['max_rel_err']:.2g}{' (' + row['note'] + ')' if row['note'] else ''}",
                          flush=True)
    out.close()
    print(f"rows appended to {out.path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
