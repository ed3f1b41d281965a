"""SAM and ASAM: sharpness-aware minimisation with a (scale-adaptive) ball perturbation.

SAM (Foret et al., ICLR 2021, Eq. 2-3): with g = grad L_B(w),
    e = rho * g / ||g||,        w <- w - lr * grad L_B(w + e)   (through the base optimiser).
ASAM (Kwon et al., ICML 2021, Eq. 9 with T_w = |w|):
    e = rho * T_w^2 g / ||T_w g||.
By default ASAM scales only parameters with two or more dimensions (weights of
Linear / Conv layers); biases and normalisation parameters (1-D) keep T_w = 1, i.e.
they are perturbed as in plain SAM inside the same ball. This avoids the known
ASAM pathology of near-zero biases getting no perturbation at all; set
``adaptive_include_1d=True`` to scale every parameter by |w| as in the paper.

Closure protocol: ``closure()`` runs the forward pass, calls ``loss.backward()``
and returns the loss (zeroing the gradients inside it is optional: ``step``
zeroes them before each call). genlab's ``Trainer.step`` closure fits as is.
``step(closure)`` returns the loss at the *unperturbed* weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from genlab.core.errors import require_positive
from genlab.optim.perturb import PerturbedOptimizer, finite_scale, global_norm


class SAM(PerturbedOptimizer):
    """Sharpness-aware minimisation around any base optimiser (``adaptive=True``: ASAM).

    ``model`` (optional) lets the extra pass keep BatchNorm statistics untouched and
    skip the DDP all-reduce of the first pass; ``max_grad_norm`` clips the gradient
    used for the update.
    """

    def __init__(self, params, base_optimizer: Callable | None = None, rho: float = 0.05,
                 adaptive: bool = False, *, adaptive_include_1d: bool = False,
                 model: nn.Module | None = None, max_grad_norm: float | None = None,
                 **base_kwargs):
        require_positive("rho", rho)
        own = dict(rho=rho, adaptive=adaptive, adaptive_include_1d=adaptive_include_1d)
        super().__init__(params, base_optimizer, own, base_kwargs, model=model,
                         max_grad_norm=max_grad_norm)

    @staticmethod
    def _scaled(group: dict, params: list[torch.Tensor]) -> list[torch.Tensor | None]:
        """T_w per parameter: |w| where ASAM scales it, None where T_w = 1."""
        if not group["adaptive"]:
            return [None] * len(params)
        include_1d = group["adaptive_include_1d"]
        return [p.abs() if (p.ndim > 1 or include_1d) else None for p in params]

    @torch.no_grad()
    def first_step(self, zero_grad: bool = False) -> None:
        """Move the weights to w + e (e from the current gradients) and remember w."""
        per_group, scaled_grads = [], []
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            grads = [p.grad for p in params]
            ts = self._scaled(group, params)
            if group["adaptive"]:
                grads = [g if t is None else g * t for g, t in zip(grads, ts, strict=True)]
            per_group.append((group, params, ts, grads))
            scaled_grads.extend(grads)
        norm = float(global_norm(scaled_grads))      # one host sync per step
        all_params, all_eps = [], []
        if math.isfinite(norm):                      # AMP overflow: no perturbation this step
            for group, params, ts, tg in per_group:
                scale = finite_scale(group["rho"], norm)
                if group["adaptive"]:
                    eps = [g * scale if t is None else g * t * scale
                           for g, t in zip(tg, ts, strict=True)]
                else:
                    eps = torch._foreach_mul(tg, scale) if tg else []
                all_params.extend(params)
                all_eps.extend(eps)
        self._perturb(all_params, all_eps)
        if zero_grad:
            self._drop_grads()

    @torch.no_grad()
    def step(self, closure: Callable | None = None):
        """Two passes: gradient at w, gradient at w + e, base step at w. Returns the first loss.

        Without a closure (the AMP GradScaler recipe, see docs/optimizers.md) this is
        ``second_step()``: restore the weights and let the base optimiser step.
        """
        if closure is None:
            self.second_step()
            return None
        loss = self._run_closure(closure, perturbed=False, sync=False)
        self.first_step()
        self._run_closure(closure, perturbed=True, sync=True)
        self.second_step()
        return loss
