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
from genlab.optim.optimizers.perturb import (
    PerturbedOptimizer,
    detached,
    finite_scale,
    global_norm,
)
from genlab.optim.optimizers.registry import OptimizerEntry, register_optimizer


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

    @torch.no_grad()
    def first_step(self, zero_grad: bool = False) -> None:
        """Move the weights to w + e (e from the current gradients) and remember w."""
        self._first_step()
        if zero_grad:
            self._drop_grads()

    def _first_step(self) -> None:
        # per group: (group, plain params, their grads, scaled params, |w|, |w| * grad)
        per_group, norm_terms = [], []
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if group["adaptive"]:
                include_1d = group["adaptive_include_1d"]
                scaled = [p for p in params if p.ndim > 1 or include_1d]
                plain = [p for p in params if not (p.ndim > 1 or include_1d)]
            else:
                scaled, plain = [], params
            plain_grads = [p.grad for p in plain]
            ts = torch._foreach_abs(scaled) if scaled else []
            tg = torch._foreach_mul([p.grad for p in scaled], ts) if scaled else []
            per_group.append((group, plain, plain_grads, scaled, ts, tg))
            norm_terms += plain_grads + list(tg)
        norm = float(global_norm(norm_terms))        # one host sync per step
        if not math.isfinite(norm):                  # AMP overflow: no perturbation this step
            self._save([])
            return
        self._save([p for entry in per_group for p in entry[1] + entry[3]])
        for group, plain, plain_grads, scaled, ts, tg in per_group:
            scale = finite_scale(group["rho"], norm)
            if plain:                                # SAM part: w += scale * g
                torch._foreach_add_(plain, plain_grads, alpha=scale)
            if scaled:                               # ASAM part: w += scale * |w|^2 g
                torch._foreach_mul_(tg, ts)
                torch._foreach_add_(scaled, tg, alpha=scale)

    @torch.no_grad()
    def step(self, closure: Callable | None = None):
        """Two passes: gradient at w, gradient at w + e, base step at w. Returns the first loss
        (detached).

        Without a closure (the AMP GradScaler recipe, see docs/optimizers.md) this is
        ``second_step()``: restore the weights and let the base optimiser step.
        """
        if closure is None:
            self._second_step()
            return None
        loss = self._run_closure(closure, perturbed=False, sync=False)
        self._first_step()
        self._run_closure(closure, perturbed=True, sync=True)
        self._second_step()
        return detached(loss)


_RHO = (0.01, 0.05, 0.25)  # the search grid's radii: factor 5 apart around SAM's usual 0.05
register_optimizer("sam", OptimizerEntry(SAM, radius="rho", accepts=("rho", "model"),
                                         search_radii=_RHO, standard=2))
register_optimizer("asam", OptimizerEntry(SAM, fixed={"adaptive": True}, radius="rho",
                                          accepts=("rho", "model"),
                                          search_radii=(0.05, 0.25, 1.25), standard=3))
