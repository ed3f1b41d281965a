"""Per-sample losses and gradients for the optimisers that need them (COV, SAMGCM).

Closure protocol: ``closure()`` returns the per-sample losses, shape (b,), with the
autograd graph, WITHOUT calling backward; ``per_sample_closure`` builds one. The
optimiser forms the per-sample gradients itself.

Per-sample gradients (``per_sample``): ``"layers"`` computes what each step needs from
the layers' inputs and output gradients (measures/ghost.py): ||g_i||^2 for COV
(differentiated through a double backward), the Gram matrix G G^T and weighted sums G^T w
for SAMGCM's Woodbury solve, never the (b, d) matrix; it needs ``model=``. ``"autograd"``
takes the gradient of each loss by a vectorised backward (``is_grads_batched``), with a
per-sample loop as fallback, and differentiates through them (the reference
implementation, measured at ~60x the layer path's cost on the small CNN). ``"auto"``
(default) uses ``"layers"`` when ``model`` is given and its layers own every parameter;
without ``model=`` it raises ConfigError rather than silently taking the slow path (pass
``per_sample="autograd"`` to choose it). The two agree to rounding when samples do not
interact in the forward pass; with BatchNorm in training mode ``"layers"`` uses
per-sample contributions to the batch gradient (see measures/ghost.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from genlab.core.errors import ConfigError, require_choice
from genlab.optim.measures.ghost import (
    LayerPathUnavailable,
    LayerRecorder,
    PerSampleGrads,
    per_sample_factors,
)

PER_SAMPLE_METHODS = ("auto", "layers", "autograd")


def per_sample_closure(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                       y: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Closure returning per-sample losses; ``loss_fn(out, y)`` must use reduction='none'."""

    def closure() -> torch.Tensor:
        return loss_fn(model(x), y)

    return closure


def check_losses(losses, who: str) -> torch.Tensor:
    if not isinstance(losses, torch.Tensor) or losses.ndim != 1:
        shape = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses)
        raise ConfigError(f"{who}: closure must return per-sample losses of shape (b,) without "
                          f"calling backward (see per_sample_closure); got {shape}")
    return losses


def per_sample_grads(losses: torch.Tensor, params: list[torch.Tensor], *,
                     create_graph: bool = False) -> list[torch.Tensor | None]:
    """Gradient of each ``losses[i]`` w.r.t. each param: tensors of shape (b, *p.shape).

    One vectorised backward (``is_grads_batched``) with a per-sample loop as fallback
    for operations vmap does not support. None marks a parameter the losses do not use.
    """
    b = losses.shape[0]
    eye = torch.eye(b, dtype=losses.dtype, device=losses.device)
    try:
        return list(torch.autograd.grad(losses, params, grad_outputs=eye, is_grads_batched=True,
                                        create_graph=create_graph, allow_unused=True,
                                        retain_graph=True))
    except RuntimeError:
        rows = [torch.autograd.grad(losses[i], params, create_graph=create_graph,
                                    allow_unused=True, retain_graph=True) for i in range(b)]
        return [None if rows[0][j] is None else torch.stack([r[j] for r in rows])
                for j in range(len(params))]


def trainable_params(param_groups: list[dict]) -> list[torch.Tensor]:
    return [p for group in param_groups for p in group["params"] if p.requires_grad]


class PerSampleSource:
    """How an optimiser forms per-sample gradients (``per_sample``, see module doc).

    ``run(closure)`` evaluates the per-sample losses (recording the layers on the layer
    path); ``factors(losses)`` gives their PerSampleGrads, or None for the autograd path,
    to which ``"auto"`` also switches for good when the model breaks a requirement of the
    layer path (checked on the first batch).
    """

    def __init__(self, method: str, model: nn.Module | None, params: list[torch.Tensor],
                 who: str):
        require_choice("per_sample", method, PER_SAMPLE_METHODS)
        self.method, self.who, self.recorder = method, who, None
        if method == "autograd":
            return
        if model is None and method == "auto":
            raise ConfigError(f"{who}: pass model= (the network that owns the parameters) "
                              "for the per-layer per-sample gradients; without it only "
                              "per_sample='autograd' works, ~60x slower: choose it explicitly")
        if model is None:
            raise ConfigError(f"{who}: per_sample='layers' needs model= (its layers are "
                              "recorded)")
        recorder = LayerRecorder(model, params)
        if recorder.covers:
            self.recorder = recorder
            return
        recorder.remove()
        if method == "layers":
            raise ConfigError(f"{who}: per_sample='layers' needs every parameter to belong "
                              "to exactly one module of model=")

    def run(self, closure: Callable) -> torch.Tensor:
        if self.recorder is None:
            return check_losses(closure(), self.who)
        with self.recorder.recording():
            return check_losses(closure(), self.who)

    def factors(self, losses: torch.Tensor, **kw) -> PerSampleGrads | None:
        if self.recorder is None:
            return None
        try:
            return per_sample_factors(self.recorder, losses, **kw)
        except LayerPathUnavailable as exc:
            if self.method == "layers":
                raise ConfigError(f"{self.who}: {exc}; use per_sample='autograd'") from exc
            self.recorder.remove()
            self.recorder = None
            return None

