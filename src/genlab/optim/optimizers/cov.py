"""COV: SGD plus the trace of the gradient-noise covariance ("nonuniformity").

Source: the official code of "Beyond Sharpness: The Role of Nonuniformity in
Generalization" (AAAI-26); the paper text is not public, so names and formulas
follow that code. Notation: per-sample gradients g_i (rows of G, b x d), batch
mean g, centred rows G_c = G - 1 g^T.

COV: SGD on L_B + (a * lam / 2) * tr Sigma_B with
    tr Sigma_B = (1/b) sum_i ||g_i||^2 - ||g||^2 = (1/b) ||G_c||_F^2,
    a = (n - b) / (b (n - 1))   (mini-batch noise factor; a = 1/b when n_total is None,
                                 the n -> infinity limit),
whose penalty gradient is a * lam * [(1/b) sum_i H_i g_i - (1/b^2)(sum_i H_i)(sum_i g_i)].
It is computed exactly by differentiating tr Sigma_B through the per-sample
gradients (double backward). The closure returns per-sample losses and ``model=``
chooses the fast per-layer per-sample gradients (per_sample_source.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from genlab.core.errors import ConfigError, require_positive
from genlab.optim.optimizers.per_sample_source import (
    PerSampleSource,
    per_sample_grads,
    trainable_params,
)
from genlab.optim.optimizers.perturb import (
    REQUIRED,
    refuse_settings,
    require_setting,
    settings_of,
)
from genlab.optim.optimizers.registry import OptimizerEntry, register_optimizer


def noise_factor(batch: int, n_total: int | None) -> float:
    """a = (n - b) / (b (n - 1)), the mini-batch noise factor; 1/b when n is unknown."""
    if n_total is None:
        return 1.0 / batch
    if n_total < batch or n_total < 2:
        raise ConfigError(f"n_total must be >= the batch size ({batch}) and >= 2, got {n_total}")
    return (n_total - batch) / (batch * (n_total - 1))


DEFAULT_LR = 0.05  # genlab optim train's (the studies' own grids set theirs)
DEFAULT_LAM = 0.1


class COV(torch.optim.SGD):
    """SGD on the loss plus (a * lam / 2) * tr Sigma_B (per-sample-loss closure, see module doc).

    ``last_trace`` holds tr Sigma_B of the latest batch (before the step). ``model`` and
    ``per_sample`` choose how the per-sample gradients are formed (module doc).
    """

    requires_closure = True  # the penalty's gradient comes from the per-sample closure

    def __init__(self, params, lr: float = REQUIRED, lam: float = REQUIRED,
                 n_total: int | None = None, momentum: float = 0.0, weight_decay: float = 0.0,
                 dampening: float = 0.0, nesterov: bool = False,
                 max_grad_norm: float | None = None, *, model: nn.Module | None = None,
                 per_sample: str = "auto", **unknown):
        refuse_settings("COV", unknown, settings_of(COV.__init__))
        require_setting("COV", "lr", lr, DEFAULT_LR, "the learning rate")
        require_setting("COV", "lam", lam, DEFAULT_LAM, "the weight of the covariance penalty")
        require_positive("lr", lr, allow_zero=True)
        require_positive("lam", lam, allow_zero=True)
        if n_total is not None:
            require_positive("n_total", n_total)
        if max_grad_norm is not None:
            require_positive("max_grad_norm", max_grad_norm)
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay,
                         dampening=dampening, nesterov=nesterov)
        self.lam, self.n_total, self.max_grad_norm = lam, n_total, max_grad_norm
        self.last_trace = float("nan")
        self.source = PerSampleSource(per_sample, model, trainable_params(self.param_groups), "COV")

    def _trace(self, losses: torch.Tensor, params: list[torch.Tensor]) -> torch.Tensor:
        """tr Sigma_B = (1/b) sum ||g_i||^2 - ||g||^2, differentiable."""
        b = losses.shape[0]
        psg = self.source.factors(losses, create_graph=True)
        if psg is not None:
            mean = psg.weighted_sum(losses.new_full((b,), 1.0 / b))
            sq_mean = sum((g**2).sum() for g in mean.values())
            return psg.sq_norms().sum() / b - sq_mean
        grads = [g for g in per_sample_grads(losses, params, create_graph=True) if g is not None]
        mean_sq = sum((g**2).sum() for g in grads) / b
        sq_mean = sum((g.mean(0) ** 2).sum() for g in grads)
        return mean_sq - sq_mean

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None):
        """One step on L_B + (a lam / 2) tr Sigma_B; returns the mean loss L_B (detached)."""
        if closure is None:
            raise ConfigError("COV.step needs a closure returning per-sample losses")
        self.zero_grad()
        params = trainable_params(self.param_groups)
        with torch.enable_grad():
            losses = self.source.run(closure)
            trace = self._trace(losses, params)
            loss = losses.mean()
            total = loss + 0.5 * noise_factor(losses.shape[0], self.n_total) * self.lam * trace
            total.backward()
        self.last_trace = float(trace)
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None],
                                           self.max_grad_norm)
        super().step()
        return loss.detach()


register_optimizer("cov", OptimizerEntry(COV, per_sample=True, radius="lam", needs_model=True,
                                         accepts=("lam", "n_total", "model"),
                                         search_radii=(0.1, 1.0, 10.0), standard=4))
