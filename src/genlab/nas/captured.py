"""The captured search step: the whole first-order bilevel step recorded once in a CUDA graph.

On a GPU the search step is host-bound (docs/scale.md): tens of thousands of small kernels,
each launched from Python. ``CapturedStep`` records one step, the alpha step (forward and
backward on the validation batch, Adam), the weight step (forward and backward on the
training batch, the gradient-norm clip) and the SGD update, in one ``torch.cuda.CUDAGraph``
and replays it every step: one launch per step. What changes from step to step enters
through static buffers copied before each replay: the two batches, the weights' learning
rate (the cosine schedule) and the regulariser's lambda_t. Adam runs with
``capturable=True`` (its step count on the device); SGD's update is written here with
foreach operations and a learning rate held in a device tensor (torch's SGD turns a tensor
rate into a host number), on the optimiser's own momentum buffers, so checkpoints and the
eager step see the same state.

Nothing inside the captured region reads a value on the host. The losses are read after
the replay (the search loop checks them every step); the diagnostics stay outside: a step
that records the alpha forces, and a step before the method's arch warm-up ends (PC-DARTS),
runs the eager ``bilevel_step`` on the same optimisers and buffers. The first
``WARMUP_STEPS`` eligible steps run the captured code eagerly (on a side stream on CUDA:
the optimisers' lazy state is made there, outside the graph), then the step is captured.

A search can be captured when every part of it claims so (``capture_blockers``): first order,
one process, no autocast, no per-cell checkpointing, fused cells, supernet options that
declare themselves ``capturable`` (genlab.nas.methods.supernet_options), and a relaxation,
a weight-step perturbation and a penalty whose class declares ``capturable = True`` in its
own body (a subclass does not inherit the claim: GDAS' Gumbel sampling, DrNAS' Dirichlet
draws, SDARTS' perturbations and the penalties that read the cells or detect an entropy turn
on the host do not claim it). The claim is
checked on the CPU by tests/nas/test_captured_step.py, which runs the captured code under a
dispatch mode that refuses every device-to-host read.

``SearchConfig.cuda_graph`` chooses: ``off``; ``on`` (CUDA only: refused on the CPU; a search
that cannot be captured runs eagerly with a one-line warning naming what blocks it); ``auto``,
on for CUDA once benchmarks/gpu_check.py has measured the captured step faster than the eager
one (``AUTO_ON_CUDA``; not measured yet, so ``auto`` is ``off``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError
from genlab.core.runs import warn
from genlab.nas.architect import bilevel_step
from genlab.nas.methods.supernet_options import active

CUDA_GRAPH_MODES = ("auto", "on", "off")
# auto turns capture on for CUDA only after a GPU has measured the captured step faster than
# the eager one (benchmarks/gpu_check.py, check captured_step); no GPU has measured it yet
AUTO_ON_CUDA = False
WARMUP_STEPS = 3  # eager runs of the captured code before the capture (torch.cuda.graph's advice)


def claims_capture(part) -> bool:
    """Whether ``part``'s own class declares ``capturable = True`` (not inherited)."""
    return bool(type(part).__dict__.get("capturable", False))


def capture_blockers(order: int, amp: str, checkpoint_cells: bool, method, reg,
                     net=None, parallel: bool = False) -> list[str]:
    """What keeps a search from being captured, one phrase each (empty: it can be);
    ``method``: the search's parts (genlab.nas.methods.SearchMethod), ``reg``: its
    Regularizer, ``net``: its supernet (per-edge cells), ``parallel``: under torchrun."""
    out = []
    if order != 1:
        out.append("--order 2 (the unrolled step reads the gradient norm on the host)")
    if amp != "off":
        out.append(f"--amp {amp} (autocast is not captured)")
    if checkpoint_cells:
        out.append("--checkpoint-cells (recomputation in the backward is not captured)")
    if parallel:
        out.append("a data-parallel search (torchrun)")
    if net is not None and getattr(net, "per_edge", False):
        out.append("the per-edge cells (a search resumed from an older checkpoint, or "
                   "sampled cells)")
    # an option is capturable when its forward reads no host value and holds no Python number
    # that changes per step (DARTS-' auxiliary-skip beta and R-DARTS' drop-path probability
    # are Python floats set each step; GDAS' sampled cells choose the op on the host)
    options = sorted(opt.name for opt, _ in active(method.supernet_params)
                     if not opt.capturable)
    if options:
        out.append(f"the supernet option(s) {', '.join(options)} of method "
                   f"{method.method.name} (set per step on the host)")
    for kind, part in (("relaxation", method.relaxation), ("perturb", method.perturbation)):
        if not claims_capture(part):
            out.append(f"--{kind} {part.name} of method {method.method.name} (draws or "
                       "decides on the host)")
    if not claims_capture(reg.penalty_object):
        out.append(f"--reg {reg.name} (reads the network or alpha on the host)")
    return out


def wanted(mode: str, device: torch.device) -> bool:
    """Whether ``mode`` (SearchConfig.cuda_graph) asks for capture on ``device``;
    ConfigError for ``on`` off CUDA."""
    if mode not in CUDA_GRAPH_MODES:
        raise ConfigError(f"--cuda-graph: expected one of {', '.join(CUDA_GRAPH_MODES)}, "
                          f"got {mode!r}")
    if mode == "on" and device.type != "cuda":
        raise ConfigError(f"--cuda-graph on needs a CUDA device (the search runs on "
                          f"{device}); use --cuda-graph off or auto")
    return mode == "on" or (mode == "auto" and device.type == "cuda" and AUTO_ON_CUDA)


def search_step(mode: str, device: torch.device, net, a_opt, w_opt, reg, method, *,
                order: int, amp: str, checkpoint_cells: bool, parallel: bool,
                eager: Callable = bilevel_step) -> Callable:
    """The step function of a search: ``eager`` (genlab.nas.architect.bilevel_step) itself,
    or a ``CapturedStep`` (the same call) when ``mode`` asks for capture and nothing blocks
    it; a blocked capture warns once, naming what blocks it, and the search runs eagerly."""
    if not wanted(mode, device):
        make_eager(a_opt)
        return eager
    blockers = capture_blockers(order, amp, checkpoint_cells, method, reg, net, parallel)
    if blockers:
        warn(f"--cuda-graph {mode}: the step runs eagerly, not captured: "
             f"{'; '.join(blockers)}")
        make_eager(a_opt)
        return eager
    return CapturedStep(net, a_opt, w_opt, reg, device, eager=eager)


@torch.no_grad()
def foreach_sgd(group: dict, state, lr: torch.Tensor) -> None:
    """torch.optim.SGD's update of one parameter group, its momentum buffers already made
    (``make_momentum_buffers``), with the learning rate ``lr``, a tensor on the parameters'
    device: every operation stays on the device. Weights without a gradient are skipped, as
    SGD skips them."""
    if group.get("maximize", False):
        raise ConfigError("the captured step: SGD with maximize is not supported")
    params = [p for p in group["params"] if p.grad is not None]
    if not params:
        return
    grads = [p.grad for p in params]
    if group["weight_decay"]:
        grads = torch._foreach_add(grads, params, alpha=group["weight_decay"])
    if group["momentum"]:
        bufs = [state[p]["momentum_buffer"] for p in params]
        torch._foreach_mul_(bufs, group["momentum"])
        torch._foreach_add_(bufs, grads, alpha=1 - group["dampening"])
        if group["nesterov"]:
            grads = torch._foreach_add(grads, bufs, alpha=group["momentum"])
        else:
            grads = bufs
    torch._foreach_add_(params, torch._foreach_mul(grads, -lr))


def make_momentum_buffers(w_opt) -> None:
    """Zero momentum buffers where SGD has none yet: with dampening 0, SGD's first step (the
    buffer set to the gradient) is the same as 0 x momentum + gradient, so the eager step and
    the captured one may both start from them."""
    for group in w_opt.param_groups:
        if not group["momentum"]:
            continue
        if group["dampening"]:
            raise ConfigError("the captured step: SGD with dampening is not supported")
        for p in group["params"]:
            state = w_opt.state[p]
            if state.get("momentum_buffer") is None:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)


def make_capturable(a_opt, device: torch.device) -> None:
    """Adam with ``capturable=True``: its step counts live on the device (moved there when a
    resumed state holds them on the host)."""
    for group in a_opt.param_groups:
        group["capturable"] = True
    for state in a_opt.state.values():
        if "step" in state and state["step"].device != device:
            state["step"] = state["step"].to(device=device, dtype=torch.float32)


def make_eager(a_opt) -> None:
    """Adam back to its eager form where it was made capturable (a search resumed from the
    checkpoint of a captured one, on any device): step counts on the host. A no-op for an
    optimiser that never was."""
    for group in a_opt.param_groups:
        if not group.get("capturable"):
            continue
        group["capturable"] = False
        for p in group["params"]:
            state = a_opt.state.get(p, {})
            if torch.is_tensor(state.get("step")):
                state["step"] = state["step"].detach().to("cpu", torch.float32)


class CapturedStep:
    """The bilevel step recorded once and replayed (module docstring); called as
    genlab.nas.architect.bilevel_step is."""

    def __init__(self, net, a_opt, w_opt, reg, device: torch.device, *, capture: bool = True,
                 warmup: int = WARMUP_STEPS, eager: Callable = bilevel_step):
        """``capture`` False (or a device other than CUDA): every step runs the captured code
        eagerly (what the CPU tests check); ``eager``: the step of the steps not captured."""
        self.net, self.a_opt, self.w_opt, self.reg = net, a_opt, w_opt, reg
        self.eager = eager
        self.device = torch.device(device)
        self.capture = capture and self.device.type == "cuda"
        self.warmup = warmup
        make_capturable(a_opt, self.device)
        make_momentum_buffers(w_opt)
        self.lrs = [torch.zeros((), device=self.device) for _ in w_opt.param_groups]
        self.lam = torch.zeros((), device=self.device)
        self.inputs: list[torch.Tensor] | None = None  # xt, yt, xv, yv
        self.outputs: tuple[torch.Tensor, torch.Tensor] | None = None
        self.graph = None
        self.kept: list = []  # the gradients the graph writes, kept alive with it
        self.eager_runs = 0  # runs of the captured code before the capture
        self.replays = 0
        self.grad_clip = 0.0  # the search's, given with each call

    # -- what changes per step enters here, outside the graph --------------------------------
    def load(self, train_batch, val_batch, step: int, total: int) -> bool:
        """Copy the batches, rates and lambda_t into the static buffers; False when a batch
        does not fit them (another shape: that step runs eagerly)."""
        batch = [*train_batch, *val_batch]
        if self.inputs is None:
            self.inputs = [t.detach().clone() for t in batch]
        elif any(t.shape != s.shape or t.dtype != s.dtype or t.stride() != s.stride()
                 for t, s in zip(batch, self.inputs, strict=True)):
            return False
        else:
            for s, t in zip(self.inputs, batch, strict=True):
                s.copy_(t, non_blocking=True)
        for lr, group in zip(self.lrs, self.w_opt.param_groups, strict=True):
            lr.fill_(group["lr"])
        self.lam.fill_(self.reg.lam(step, total))
        return True

    # -- the captured code: device operations only ---------------------------------------------
    def body(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One first-order bilevel step on the static buffers; returns (train loss, val loss)
        as device tensors. Reads nothing on the host."""
        net, a_opt, w_opt, reg = self.net, self.a_opt, self.w_opt, self.reg
        xt, yt, xv, yv = self.inputs
        alphas = list(net.arch_parameters())
        a_opt.zero_grad(set_to_none=True)
        val_loss = F.cross_entropy(net(xv), yv)
        reg_term = self.lam * reg.penalty(net.alphas(), None, val_loss, yv)
        (val_loss + reg_term).backward(inputs=alphas + reg.parameters())
        a_opt.step()
        w_opt.zero_grad(set_to_none=True)
        weights = net.weight_parameters()
        net.mixing_override = None
        train_loss = F.cross_entropy(net(xt), yt)
        train_loss.backward(inputs=weights)
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(weights, self.grad_clip)
        for group, lr in zip(w_opt.param_groups, self.lrs, strict=True):
            foreach_sgd(group, w_opt.state, lr)
        return train_loss.detach(), val_loss.detach()

    def _run_eagerly(self):
        if not self.capture:
            return self.body()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            out = self.body()
        torch.cuda.current_stream(self.device).wait_stream(side)
        return out

    def _record(self):
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = self.body()
        self.kept = [p.grad for p in [*self.net.parameters(), *self.reg.parameters()]]

    def __call__(self, net, a_opt, w_opt, train_batch, val_batch, reg, step: int, total: int,
                 grad_clip: float, order: int = 1, forces: dict | None = None, method=None
                 ) -> tuple[float, float]:
        """bilevel_step's call: the eager step where a diagnostic reads the step (forces) or
        alpha does not move yet; else the captured one. Returns the two losses, read after
        the step."""
        if order != 1 or net is not self.net or a_opt is not self.a_opt or w_opt is not self.w_opt:
            raise ConfigError("the captured step runs the first-order step of the search it "
                              "was made for")
        arch_active = method is None or method.arch_active(step, total)
        if forces is not None or not arch_active or not self.load(train_batch, val_batch,
                                                                      step, total):
            return self.eager(net, a_opt, w_opt, train_batch, val_batch, reg, step, total,
                              grad_clip, order, forces, method)
        self.grad_clip = grad_clip
        if self.graph is None and (not self.capture or self.eager_runs < self.warmup):
            self.eager_runs += 1
            tl, vl = self._run_eagerly()
        else:
            if self.graph is None:
                self._record()
            self.graph.replay()
            self.replays += 1
            tl, vl = self.outputs
        return float(tl), float(vl)
