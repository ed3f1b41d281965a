"""Optimisers guided by the gradient noise ("nonuniformity"): COV and SAMGCM.

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
gradients (double backward).

SAMGCM: SAM whose ball is an ellipsoid shaped by the noise covariance,
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

Closure protocol (both): ``closure()`` returns the per-sample losses, shape (b,),
with the autograd graph, WITHOUT calling backward; ``per_sample_closure`` builds
one. The optimiser forms the per-sample gradients itself.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from genlab.core.errors import ConfigError, require_choice, require_positive
from genlab.optim.perturb import PerturbedOptimizer

SOLVERS = ("auto", "dense", "woodbury")
WOODBURY_MIN_DIM = 1000


def per_sample_closure(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                       y: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Closure returning per-sample losses; ``loss_fn(out, y)`` must use reduction='none'."""

    def closure() -> torch.Tensor:
        return loss_fn(model(x), y)

    return closure


def _check_losses(losses, who: str) -> torch.Tensor:
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


def _trainable(param_groups: list[dict]) -> list[torch.Tensor]:
    return [p for group in param_groups for p in group["params"] if p.requires_grad]


# -- COV -------------------------------------------------------------------------------
def noise_factor(batch: int, n_total: int | None) -> float:
    """a = (n - b) / (b (n - 1)), the mini-batch noise factor; 1/b when n is unknown."""
    if n_total is None:
        return 1.0 / batch
    if n_total < batch or n_total < 2:
        raise ConfigError(f"n_total must be >= the batch size ({batch}) and >= 2, got {n_total}")
    return (n_total - batch) / (batch * (n_total - 1))


class COV(torch.optim.SGD):
    """SGD on the loss plus (a * lam / 2) * tr Sigma_B (per-sample-loss closure, see module doc).

    ``last_trace`` holds tr Sigma_B of the latest batch (before the step).
    """

    def __init__(self, params, lr: float, lam: float, n_total: int | None = None,
                 momentum: float = 0.0, weight_decay: float = 0.0, dampening: float = 0.0,
                 nesterov: bool = False, max_grad_norm: float | None = None):
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

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None):
        """One step on L_B + (a lam / 2) tr Sigma_B; returns the mean loss L_B (detached)."""
        if closure is None:
            raise ConfigError("COV.step needs a closure returning per-sample losses")
        self.zero_grad()
        params = _trainable(self.param_groups)
        with torch.enable_grad():
            losses = _check_losses(closure(), "COV")
            b = losses.shape[0]
            grads = [g for g in per_sample_grads(losses, params, create_graph=True)
                     if g is not None]
            mean_sq = sum((g**2).sum() for g in grads) / b
            sq_mean = sum((g.mean(0) ** 2).sum() for g in grads)
            trace = mean_sq - sq_mean
            loss = losses.mean()
            total = loss + 0.5 * noise_factor(b, self.n_total) * self.lam * trace
            total.backward()
        self.last_trace = float(trace)
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None],
                                           self.max_grad_norm)
        super().step()
        return loss.detach()


# -- SAMGCM ----------------------------------------------------------------------------
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


class SAMGCM(PerturbedOptimizer):
    """SAM with the ellipsoid {e : e^T C e <= rho^2} of the gradient-noise covariance C.

    All parameters form one vector (one rho: the first group's). ``closure`` returns
    per-sample losses (see module doc); ``step`` returns their mean at w.
    """

    def __init__(self, params, base_optimizer: Callable | None = None, rho: float = 5e-4,
                 xi: float = 1e-6, *, solver: str = "auto", model: nn.Module | None = None,
                 max_grad_norm: float | None = None, **base_kwargs):
        require_positive("rho", rho)
        require_positive("xi", xi)
        require_choice("solver", solver, SOLVERS)
        super().__init__(params, base_optimizer, dict(rho=rho, xi=xi), base_kwargs,
                         model=model, max_grad_norm=max_grad_norm)
        self.solver = solver
        self.last_perturbation_norm = float("nan")

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None):
        """Per-sample gradients at w, perturb along the covariance direction, step with
        the gradient at w + e; returns the mean loss at w."""
        if closure is None:
            raise ConfigError("SAMGCM.step needs a closure returning per-sample losses")
        group = self.param_groups[0]
        params = _trainable(self.param_groups)
        self._drop_grads()
        with torch.enable_grad():
            losses = _check_losses(closure(), "SAMGCM")
            grads = per_sample_grads(losses, params)
        used = [(p, g) for p, g in zip(params, grads, strict=True) if g is not None]
        b = losses.shape[0]
        G = torch.cat([g.reshape(b, -1) for _, g in used], dim=1)
        eps = group["rho"] * covariance_direction(G, group["xi"], self.solver)
        self.last_perturbation_norm = float(eps.norm())
        pieces = torch.split(eps, [p.numel() for p, _ in used])
        self._perturb([p for p, _ in used],
                      [e.view_as(p) for e, (p, _) in zip(pieces, used, strict=True)])
        with torch.enable_grad():
            perturbed = _check_losses(self._run_closure(closure, perturbed=True), "SAMGCM")
            perturbed.mean().backward()
        self._second_step()
        return losses.mean().detach()
