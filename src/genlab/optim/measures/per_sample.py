"""Per-sample gradients and the gradient-noise measures built on them.

Notation: g_i = grad of the loss of sample i, g = (1/n) sum_i g_i.

- Noise covariance Sigma = (1/n) sum_i (g_i - g)(g_i - g)^T, so
  tr Sigma = (1/n) sum_i ||g_i - g||^2 (nonuniformity magnitude; our reading of the paper).
- Mini-batch noise E||g_B - g||^2 = a * tr Sigma with a = (n - b) / (b (n - 1)) for a batch of
  b samples drawn without replacement (standard sampling-without-replacement identity).
- Gradient diversity (Yin et al. 2018): sum_i ||g_i||^2 / ||sum_i g_i||^2.
- Noise scale (McCandlish et al. 2018, "simple" form): tr Sigma / ||g||^2.

Per-sample losses: ``loss_fn`` is the mean-reduced training loss (e.g. nn.CrossEntropyLoss());
the loss of sample i is ``loss_fn(model(x_i[None]), y_i[None])``. Three ways to get the
per-sample gradients (``method``):

- ``"layers"``: one batched forward and one backward to the layer outputs; each layer's part
  of g_i comes from its input and output gradient (ghost.py). Norms never form g_i, so
  tr Sigma, gradient diversity and noise scale stream over chunks with memory
  O(chunk * (activations + the largest layer)), not O(chunk * d).
- ``"vmap"``: torch.func.vmap of grad of functional_call over the samples.
- ``"loop"``: one backward pass per sample.

``"auto"`` (default) takes the first that applies to the model, in that order.

BatchNorm: per-sample quantities need one fixed normalisation for every sample, so models
are measured in eval mode (running statistics; ``bn_mode="eval"``, the only mode for
per-sample measures). Dropout is always off while measuring.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from genlab.core.errors import ConfigError, DataError, require_choice, require_positive
from genlab.optim.limits import PER_SAMPLE_BYTES
from genlab.optim.measures.ghost import (
    LayerPathUnavailable,
    LayerRecorder,
    PerSampleGrads,
    per_sample_factors,
    per_sample_losses,
)

BN_MODES = ("eval", "batch")
#: (d,)-vectors one sample's vmapped gradient or Hessian-vector products hold at a time
#: (its products and their intermediates; about 5 measured on an MLP, rounded up)
PER_SAMPLE_COPIES = 8
METHODS = ("auto", "layers", "vmap", "loop")
_BN_TYPES = (nn.modules.batchnorm._BatchNorm,)


# -- data ----------------------------------------------------------------------------------
def collect(inputs, targets=None,
            max_samples: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) tensors from tensors or from an iterable of (x, y) batches (e.g. a DataLoader)."""
    if targets is None:
        if isinstance(inputs, torch.Tensor):
            raise ConfigError("targets are required when inputs is a tensor")
        xs, ys, n = [], [], 0
        for x, y in inputs:
            xs.append(x)
            ys.append(y)
            n += len(y)
            if max_samples is not None and n >= max_samples:
                break
        if not xs:
            raise DataError("no data: the batch iterable is empty")
        x, y = torch.cat(xs), torch.cat(ys)
    else:
        x, y = inputs, targets
    if len(x) == 0 or len(y) == 0:
        raise DataError("no data: got 0 samples")
    if len(x) != len(y):
        raise DataError(f"inputs and targets differ in length ({len(x)} vs {len(y)})")
    if max_samples is not None:
        require_positive("max_samples", max_samples)
        x, y = x[:max_samples], y[:max_samples]
    return x, y


def memory_chunk(chunk_size: int | None, n: int, d: int, itemsize: int, copies: int) -> int:
    """Samples per chunk when each sample takes ``copies`` vectors of ``d`` elements: at most
    ``chunk_size`` (all ``n`` when None) and at most what fits in PER_SAMPLE_BYTES (>= 1), so
    a wide model is measured in smaller chunks instead of running out of memory."""
    fits = max(1, PER_SAMPLE_BYTES // max(1, copies * d * itemsize))
    return max(1, min(n if chunk_size is None else chunk_size, fits))


def chunks(n: int, size: int | None):
    """Slices covering range(n) in pieces of ``size`` (one piece when size is None)."""
    size = n if size is None else size
    require_positive("chunk_size", size)
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


# -- model state ---------------------------------------------------------------------------
def has_batchnorm(model: nn.Module) -> bool:
    return any(isinstance(m, _BN_TYPES) for m in model.modules())


@contextlib.contextmanager
def measuring(model: nn.Module, bn_mode: str = "eval"):
    """Put ``model`` in measurement mode and restore its mode and buffers afterwards.

    ``eval``: everything in eval mode (BatchNorm uses running statistics).
    ``batch``: BatchNorm normalises with the statistics of each evaluated batch; running
    statistics are restored afterwards, so measuring never changes the model.
    """
    require_choice("bn_mode", bn_mode, BN_MODES)
    was_training = {m: m.training for m in model.modules()}
    saved = {k: b.detach().clone() for k, b in model.named_buffers()}
    model.eval()
    if bn_mode == "batch":
        for m in model.modules():
            if isinstance(m, _BN_TYPES):
                m.train()
    try:
        yield model
    finally:
        with torch.no_grad():
            for k, b in model.named_buffers():
                b.copy_(saved[k])
        for m, t in was_training.items():
            m.training = t


def require_per_sample_mode(model: nn.Module, bn_mode: str) -> None:
    require_choice("bn_mode", bn_mode, BN_MODES)
    if bn_mode != "eval" and has_batchnorm(model):
        raise ConfigError(
            "per-sample measures need bn_mode='eval' for models with BatchNorm "
            "(a single sample has no batch statistics)"
        )


def trainable(model: nn.Module) -> dict[str, torch.Tensor]:
    """Detached copies-by-reference of the trainable parameters, by name."""
    return {k: p.detach() for k, p in model.named_parameters() if p.requires_grad}


def fill_none(grads, like) -> list[torch.Tensor]:
    """Replace the None gradients of unused parameters by zeros."""
    return [torch.zeros_like(p) if g is None else g for g, p in zip(grads, like, strict=True)]


def flatten(tensors) -> torch.Tensor:
    """Concatenate a dict/list of tensors (optionally with a leading batch dim kept) to a vector."""
    values = list(tensors.values()) if isinstance(tensors, dict) else list(tensors)
    return torch.cat([t.reshape(-1) for t in values])


def flatten_batched(tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """(b, d) matrix from a dict of per-sample tensors with a leading batch dimension."""
    values = list(tensors.values())
    return torch.cat([t.reshape(t.shape[0], -1) for t in values], dim=1)


def unflatten(vector: torch.Tensor, like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Split a flat vector into tensors shaped like ``like`` (same key order)."""
    out, start = {}, 0
    for k, t in like.items():
        out[k] = vector[start : start + t.numel()].view_as(t)
        start += t.numel()
    return out


def sample_loss_fn(model: nn.Module, loss_fn: Callable) -> Callable:
    """f(params, x_i, y_i) -> loss of one sample, for torch.func transforms."""
    buffers = {k: b.detach() for k, b in model.named_buffers()}

    def f(params, x, y):
        out = functional_call(model, (params, buffers), (x.unsqueeze(0),))
        return loss_fn(out, y.unsqueeze(0))

    return f


# -- per-sample gradients ------------------------------------------------------------------
def layer_chunks(model: nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
                 chunk_size: int | None):
    """Yield (slice, PerSampleGrads) chunk by chunk in the model's current mode.

    Raises LayerPathUnavailable before the first chunk when the model's layers do not own
    every trainable parameter.
    """
    recorder = LayerRecorder(model)
    try:
        if not recorder.covers:
            raise LayerPathUnavailable("some trainable parameters have no single owner module")
        for sl in chunks(len(x), chunk_size):
            with torch.enable_grad():
                with recorder.recording():
                    out = model(x[sl])
                losses = per_sample_losses(loss_fn, out, y[sl])
                psg: PerSampleGrads = per_sample_factors(recorder, losses)
            yield sl, psg
    finally:
        recorder.remove()


def per_sample_grads(model: nn.Module, loss_fn: Callable, inputs, targets=None, *,
                     chunk_size: int | None = None, method: str = "auto",
                     bn_mode: str = "eval") -> torch.Tensor:
    """(b, d) matrix of per-sample gradients (eval-mode BatchNorm; see module doc).

    ``chunk_size`` samples are processed at a time (all at once when None); columns follow
    ``model.parameters()`` (trainable ones).
    """
    require_choice("method", method, METHODS)
    require_per_sample_mode(model, bn_mode)
    x, y = collect(inputs, targets)
    with measuring(model, "eval"):
        if method in ("auto", "layers"):
            try:
                return _grads_layers(model, loss_fn, x, y, chunk_size)
            except LayerPathUnavailable as exc:
                if method == "layers":
                    raise ConfigError(f"method='layers': {exc}") from exc
        if method in ("auto", "vmap"):
            try:
                return _grads_vmap(model, loss_fn, x, y, chunk_size)
            except (RuntimeError, NotImplementedError):
                pass
        return _grads_loop(model, loss_fn, x, y)


def _grads_layers(model, loss_fn, x, y, chunk_size):
    params = [p for p in model.parameters() if p.requires_grad]
    out = None
    for sl, psg in layer_chunks(model, loss_fn, x, y, chunk_size):
        if out is None:
            out = torch.empty(len(x), sum(p.numel() for p in params), device=x.device,
                              dtype=psg.dtype)
        psg.materialise(params, out=out[sl])
    return out


def _grads_vmap(model, loss_fn, x, y, chunk_size):
    params = trainable(model)
    g = vmap(grad(sample_loss_fn(model, loss_fn)), in_dims=(None, 0, 0), chunk_size=chunk_size)
    return flatten_batched(g(params, x, y)).detach()


def _grads_loop(model, loss_fn, x, y):
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for i in range(len(x)):
        loss = loss_fn(model(x[i : i + 1]), y[i : i + 1])
        gs = torch.autograd.grad(loss, params, allow_unused=True)
        rows.append(flatten(fill_none(gs, params)))
    return torch.stack(rows).detach()


def mean_grad(model: nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
              chunk_size: int | None = None) -> torch.Tensor:
    """Flat gradient of the mean loss over (x, y), accumulated over chunks (current mode)."""
    params = [p for p in model.parameters() if p.requires_grad]
    total = torch.zeros(sum(p.numel() for p in params), device=x.device, dtype=params[0].dtype)
    n = len(x)
    for sl in chunks(n, chunk_size):
        loss = loss_fn(model(x[sl]), y[sl]) * (sl.stop - sl.start) / n
        gs = torch.autograd.grad(loss, params, allow_unused=True)
        total += flatten(fill_none(gs, params))
    return total.detach()


def gradient_noise_stats(model: nn.Module, loss_fn: Callable, inputs, targets=None, *,
                         chunk_size: int | None = 256, method: str = "auto",
                         bn_mode: str = "eval") -> dict:
    """tr Sigma, ||g||^2, mean ||g_i||^2, gradient diversity and noise scale in one pass.

    ``"layers"`` (and ``"auto"`` where it applies): per chunk, ||g_i||^2 from the layers and
    sum_i g_i, accumulated in float64; tr Sigma = (1/n) sum ||g_i||^2 - ||g||^2 (the sums
    are float64, each ||g_i||^2 is exact to the model's precision). ``"vmap"``/``"loop"``:
    per-sample gradients ``chunk_size`` at a time and ||g_i - g||^2 against the exact mean
    gradient. Memory is O(chunk) in the first case, O(chunk * d) in the others, the chunk
    cut below ``chunk_size`` so that it fits in limits.PER_SAMPLE_BYTES (memory_chunk).
    """
    require_choice("method", method, METHODS)
    require_per_sample_mode(model, bn_mode)
    x, y = collect(inputs, targets)
    n = len(x)
    with measuring(model, "eval"):
        sums = None
        if method in ("auto", "layers"):
            try:
                sums = _noise_sums_layers(model, loss_fn, x, y, chunk_size)
            except LayerPathUnavailable as exc:
                if method == "layers":
                    raise ConfigError(f"method='layers': {exc}") from exc
        if sums is None:
            sums = _noise_sums_materialised(model, loss_fn, x, y, chunk_size,
                                            "loop" if method == "loop" else "vmap")
    sq, g_sq, dev_sq = sums
    mean_sq = sq / n
    trace = dev_sq / n if dev_sq is not None else max(mean_sq - g_sq, 0.0)
    return {
        "trace_sigma": trace,
        "grad_norm_sq": g_sq,
        "mean_sample_grad_norm_sq": mean_sq,
        "gradient_diversity": _ratio(mean_sq, n * g_sq),
        "noise_scale": _ratio(trace, g_sq),
        "n_samples": n,
        "bn_mode": "eval",
    }


def _noise_sums_layers(model, loss_fn, x, y, chunk_size):
    """(sum ||g_i||^2, ||g||^2, None) streaming over chunks of the layer path."""
    sq = 0.0
    total: dict[torch.Tensor, torch.Tensor] = {}
    for sl, psg in layer_chunks(model, loss_fn, x, y, chunk_size):
        with torch.no_grad():
            sq += float(psg.sq_norms().double().sum())
            ones = torch.ones(sl.stop - sl.start, device=x.device, dtype=psg.dtype)
            for p, t in psg.weighted_sum(ones).items():
                t = t.double()
                total[p] = total[p] + t if p in total else t
    n = len(x)
    g_sq = float(sum(((t / n) ** 2).sum() for t in total.values())) if total else 0.0
    return sq, g_sq, None


def _noise_sums_materialised(model, loss_fn, x, y, chunk_size, method):
    """(sum ||g_i||^2, ||g||^2, sum ||g_i - g||^2) from (chunk, d) per-sample gradients."""
    g = mean_grad(model, loss_fn, x, y, chunk_size)
    dev_sq, sq = 0.0, 0.0
    size = memory_chunk(chunk_size, len(x), g.numel(), g.element_size(), PER_SAMPLE_COPIES)
    for sl in chunks(len(x), size):
        gi = per_sample_grads(model, loss_fn, x[sl], y[sl], method=method)
        dev_sq += float(((gi - g) ** 2).sum())
        sq += float((gi**2).sum())
    return sq, float(g @ g), dev_sq


def _ratio(num: float, den: float) -> float:
    """num / den, with 0/0 = 0 (zero gradients) and x/0 = inf."""
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def noise_trace(model: nn.Module, loss_fn: Callable, inputs, targets=None, *,
                chunk_size: int | None = 256, method: str = "auto", bn_mode: str = "eval") -> float:
    """tr Sigma over the given samples (eval-mode BatchNorm)."""
    return gradient_noise_stats(model, loss_fn, inputs, targets, chunk_size=chunk_size,
                                method=method, bn_mode=bn_mode)["trace_sigma"]


def minibatch_factor(n: int, batch_size: int) -> float:
    """a = (n - b) / (b (n - 1)): E||g_B - g||^2 = a tr Sigma for batches without replacement."""
    require_positive("batch_size", batch_size)
    require_positive("n", n)
    if batch_size > n:
        raise ConfigError(f"batch_size ({batch_size}) exceeds the number of samples ({n})")
    if n == 1:
        return 0.0
    return (n - batch_size) / (batch_size * (n - 1))


def minibatch_noise(model: nn.Module, loss_fn: Callable, inputs, targets=None, *,
                    batch_size: int, chunk_size: int | None = 256, method: str = "auto",
                    bn_mode: str = "eval") -> float:
    """E||g_B - g||^2 = a * tr Sigma for batches of ``batch_size`` (eval-mode BatchNorm)."""
    require_positive("batch_size", batch_size)
    x, y = collect(inputs, targets)
    trace = noise_trace(model, loss_fn, x, y, chunk_size=chunk_size, method=method,
                        bn_mode=bn_mode)
    return minibatch_factor(len(x), batch_size) * trace


def gradient_diversity(model: nn.Module, loss_fn: Callable, inputs, targets=None,
                       **kw) -> float:
    """sum_i ||g_i||^2 / ||sum_i g_i||^2 (0 for zero gradients; eval-mode BatchNorm)."""
    return gradient_noise_stats(model, loss_fn, inputs, targets, **kw)["gradient_diversity"]


def noise_scale(model: nn.Module, loss_fn: Callable, inputs, targets=None, **kw) -> float:
    """tr Sigma / ||g||^2 (0 for zero gradients; eval-mode BatchNorm)."""
    return gradient_noise_stats(model, loss_fn, inputs, targets, **kw)["noise_scale"]

