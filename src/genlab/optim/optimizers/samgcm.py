"""SAMGCM: SAM whose ball is an ellipsoid shaped by the gradient-noise covariance.

Source: the official code of "Beyond Sharpness: The Role of Nonuniformity in
Generalization" (AAAI-26); names and formulas follow that code. Notation: per-sample
gradients g_i (rows of G, b x d), batch mean g, centred rows G_c = G - 1 g^T.

    C = (1/b) G^T G - g g^T + xi I = xi I + (1/b) G_c^T G_c,
    e = rho * C^-1 g / sqrt(g^T C^-1 g),    w <- w - lr * grad L_B(w + e).
``solver="dense"`` builds C (d x d, O(d^3)); ``solver="woodbury"`` uses
    C^-1 g = (1/xi) [g - G_c^T (b xi I_b + G_c G_c^T)^-1 G_c g]     (O(b^2 d)),
and ``"auto"`` picks Woodbury when d > 1000. C is xi I plus a matrix of rank
<= b - 1, and g generally has a part g_perp outside the span of G_c's rows; on that
part C^-1 acts as 1/xi, so when ||g_perp||^2 / xi dominates g^T C^-1 g the
perturbation is e ~= rho * g_perp / (||g_perp|| sqrt(xi)), of Euclidean length
rho / sqrt(xi) (0.5 for the paper's rho 5e-4, xi 1e-6) whatever the gradient:
xi, not rho alone, sets the step's reach. ``last_perturbation_norm`` records ||e||.
The closure returns per-sample losses and ``model=`` chooses the fast per-layer
per-sample gradients (per_sample_source.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from genlab.core.errors import ConfigError, require_choice, require_positive
from genlab.optim.optimizers.per_sample_source import (
    PerSampleSource,
    check_losses,
    per_sample_grads,
    trainable_params,
)
from genlab.optim.optimizers.perturb import PerturbedOptimizer
from genlab.optim.optimizers.registry import OptimizerEntry, register_optimizer

SOLVERS = ("auto", "dense", "woodbury")
PRECISIONS = ("model", "float64")
WOODBURY_MIN_DIM = 1000


def covariance_direction(G: torch.Tensor, xi: float, solver: str = "auto") -> torch.Tensor:
    """C^-1 g / sqrt(g^T C^-1 g) for per-sample gradients G (b x d); zeros when g = 0."""
    require_positive("xi", xi)
    require_choice("solver", solver, SOLVERS)
    b, d = G.shape
    if solver == "auto":
        solver = "woodbury" if d > WOODBURY_MIN_DIM else "dense"
    Gd = G.double()
    g = Gd.mean(0)
    Gc = Gd - g
    if solver == "dense":
        C = Gc.T @ Gc / b + xi * torch.eye(d, dtype=Gd.dtype, device=Gd.device)
        cinv_g = torch.cholesky_solve(g[:, None], torch.linalg.cholesky(C))[:, 0]
    else:
        K = Gc @ Gc.T + b * xi * torch.eye(b, dtype=Gd.dtype, device=Gd.device)
        z = torch.linalg.solve(K, Gc @ g)
        cinv_g = (g - Gc.T @ z) / xi
    quad = torch.dot(g, cinv_g).clamp_min(0.0)
    return (cinv_g / (quad.sqrt() + 1e-12)).to(G.dtype)


def woodbury_weights(gram: torch.Tensor, xi: float) -> torch.Tensor:
    """w with G^T w = C^-1 g / sqrt(g^T C^-1 g), from the Gram matrix K = G G^T alone.

    With P = I - 11^T/b (so G_c = P G): G_c G_c^T = P K P, G_c g = P r with r = K 1 / b
    (r_i = <g_i, g>), and the Woodbury form above gives C^-1 g = G^T u / xi with
    u = 1/b - P z, z = (b xi I + P K P)^-1 P r, and g^T C^-1 g = r . u / xi.
    """
    b = gram.shape[0]
    K = gram.double()
    r = K.mean(1)
    m = r.mean()
    centred = K - r[:, None] - r[None, :] + m
    centred.diagonal().add_(b * xi)
    L, info = torch.linalg.cholesky_ex(centred)
    rhs = (r - m)[:, None]
    if int(info) == 0:
        z = torch.cholesky_solve(rhs, L)[:, 0]
    else:  # not numerically positive definite: a general solve
        z = torch.linalg.solve(centred, rhs)[:, 0]
    u = (1.0 / b) - (z - z.mean())
    quad = (r @ u / xi).clamp_min(0.0)
    return u / (xi * (quad.sqrt() + 1e-12))


class SAMGCM(PerturbedOptimizer):
    """SAM with the ellipsoid {e : e^T C e <= rho^2} of the gradient-noise covariance C.

    All parameters form one vector (one rho: the first group's). ``closure`` returns
    per-sample losses (see module doc); ``step`` returns their mean at w.
    """

    def __init__(self, params, base_optimizer: Callable | None = None, rho: float = 5e-4,
                 xi: float = 1e-6, *, solver: str = "auto", model: nn.Module | None = None,
                 max_grad_norm: float | None = None, per_sample: str = "auto",
                 precision: str = "model", **base_kwargs):
        require_positive("rho", rho)
        require_positive("xi", xi)
        require_choice("solver", solver, SOLVERS)
        require_choice("precision", precision, PRECISIONS)
        super().__init__(params, base_optimizer, dict(rho=rho, xi=xi), base_kwargs,
                         model=model, max_grad_norm=max_grad_norm)
        self.solver = solver
        self.products_dtype = torch.float64 if precision == "float64" else None
        self.last_perturbation_norm = float("nan")
        self.source = PerSampleSource(per_sample, model, trainable_params(self.param_groups),
                                      "SAMGCM")

    def _direction(self, losses: torch.Tensor, params: list[torch.Tensor]
                   ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """(parameters, their parts of C^-1 g / sqrt(g^T C^-1 g)) at w."""
        group = self.param_groups[0]
        b = losses.shape[0]
        d = sum(p.numel() for p in params)
        solver = self.solver
        if solver == "auto":
            solver = "woodbury" if d > WOODBURY_MIN_DIM else "dense"
        with torch.enable_grad():
            psg = self.source.factors(losses, dtype=self.products_dtype)
        if psg is not None:
            if solver == "woodbury":
                parts = psg.weighted_sum(woodbury_weights(psg.gram(), group["xi"]))
                used = [p for p in params if p in parts]
                return used, [parts[p].to(p.dtype) for p in used]
            G = psg.materialise(params).double()
            used = params
        else:
            with torch.enable_grad():
                grads = per_sample_grads(losses, params)
            pairs = [(p, g) for p, g in zip(params, grads, strict=True) if g is not None]
            used = [p for p, _ in pairs]
            G = torch.cat([g.reshape(b, -1) for _, g in pairs], dim=1)
        direction = covariance_direction(G, group["xi"], solver)
        pieces = torch.split(direction, [p.numel() for p in used])
        return used, [e.view_as(p).to(p.dtype) for e, p in zip(pieces, used, strict=True)]

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None):
        """Per-sample gradients at w, perturb along the covariance direction, step with
        the gradient at w + e; returns the mean loss at w."""
        if closure is None:
            raise ConfigError("SAMGCM.step needs a closure returning per-sample losses")
        rho = self.param_groups[0]["rho"]
        params = trainable_params(self.param_groups)
        self._drop_grads()
        with torch.enable_grad():
            losses = self.source.run(closure)
        used, direction = self._direction(losses, params)
        eps = torch._foreach_mul(direction, rho) if direction else []
        self.last_perturbation_norm = float(torch.sqrt(sum((e.double() ** 2).sum() for e in eps))
                                            ) if eps else 0.0
        self._perturb(used, eps)
        with torch.enable_grad():
            perturbed = check_losses(self._run_closure(closure, perturbed=True), "SAMGCM")
            perturbed.mean().backward()
        self._second_step()
        return losses.mean().detach()


register_optimizer("samgcm", OptimizerEntry(SAMGCM, per_sample=True, radius="rho",
                                            needs_model=True, accepts=("rho", "xi", "model"),
                                            search_radii=(1e-4, 5e-4, 2.5e-3)))
