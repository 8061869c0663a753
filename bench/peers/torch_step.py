"""peers.torch_step: one training step on the GPU as the peers time it
(torch_mlp, torch_charlm): a loss from the subclass's forward, backward
and Adam(fused=True) in precision p (bf16/fp16 under torch.autocast with
float32 master weights, fp16 with GradScaler: a step whose gradients
overflow is skipped and the scale halved), eager or captured once as a
CUDA graph by torch.cuda.graph and replayed (Adam(capturable=True) and
autocast's weight cache off, as PyTorch's documentation asks for capture).

A subclass sets its tensors, calls CapturedStep.__init__ with the
tensors reset() puts back and the parameters Adam updates, defines
loss_of() (the forward and the loss, run under autocast), then calls
start(). torch is the caller's: this module imports nothing of it.
"""
from peers import common

CAPTURE_WARMUP = 3  # steps on a side stream before capture (PyTorch's documented pattern)


def make_scaler(torch):
    """GradScaler for CUDA: torch.amp's (PyTorch 2.3+), else torch.cuda.amp's"""
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        return amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


class CapturedStep:
    """run() takes one step (a replay for the graph); loss() its loss (a
    sync); scale() the loss scale (1 without a scaler); reset() puts the
    initial values of `tensors` back and zeroes Adam's state, in place (a
    captured graph keeps its addresses)."""

    def __init__(self, torch, tensors, params, p, graph, lr, betas, eps):
        from peers.torch_ops import torch_dtype
        self.torch, self.graph_wanted, self.graph = torch, graph, None
        self.tensors = list(tensors)
        self.init = [t.detach().clone() for t in self.tensors]
        self.autocast = torch_dtype(torch, p) if p in common.LOW_PRECISION else None
        self.opt = torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, fused=True, capturable=graph)
        self.scaler = make_scaler(torch) if p == "fp16" else None
        self.static_loss = None

    def loss_of(self):
        raise NotImplementedError

    def start(self):
        """captures the step where a graph was asked for"""
        if self.graph_wanted:
            self._capture()

    def _body(self):
        """forward, loss, backward and Adam; the loss (float32, on the GPU)"""
        torch = self.torch
        with torch.autocast("cuda", dtype=self.autocast or torch.bfloat16, enabled=self.autocast is not None,
                            cache_enabled=False):
            loss = self.loss_of()  # autocast runs the cross-entropy in float32
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        return loss.detach()

    def _capture(self):
        """warm-up steps on a side stream (Adam's state and the scaler made,
        cuBLAS's workspaces set up), then the step captured; the weights
        and state put back to the start"""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(CAPTURE_WARMUP):
                self.opt.zero_grad(set_to_none=True)
                self._body()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)  # the captured backward makes the gradients in the graph's pool
        with torch.cuda.graph(self.graph):
            self.static_loss = self._body()
        self.reset()

    def run(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            self.opt.zero_grad(set_to_none=True)
            self.static_loss = self._body()

    def loss(self):
        return float(self.static_loss)

    def scale(self):
        return self.scaler.get_scale() if self.scaler is not None else 1.0

    def reset(self):
        """the initial values; Adam's moments and step count zero"""
        torch = self.torch
        torch.cuda.synchronize()
        with torch.no_grad():
            for t, t0 in zip(self.tensors, self.init):
                t.copy_(t0)
            for state in self.opt.state.values():
                for v in state.values():
                    if torch.is_tensor(v):
                        v.zero_()
        torch.cuda.synchronize()
