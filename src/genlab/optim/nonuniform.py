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

Per-sample gradients (``per_sample``): ``"layers"`` computes what each step needs from
the layers' inputs and output gradients (ghost.py): ||g_i||^2 for COV (differentiated
through a double backward), the Gram matrix G G^T and weighted sums G^T w for SAMGCM's
Woodbury solve, never the (b, d) matrix; it needs ``model=``. ``"autograd"`` takes the
gradient of each loss by a vectorised backward (``is_grads_batched``), with a per-sample
loop as fallback, and differentiates through them (the reference implementation).
``"auto"`` (default) uses ``"layers"`` when ``model`` is given and its layers own every
parameter. The two agree to rounding when samples do not interact in the forward pass;
with BatchNorm in training mode ``"layers"`` uses per-sample contributions to the batch
gradient (see ghost.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from genlab.core.errors import ConfigError, require_choice, require_positive
from genlab.optim.ghost import (
    LayerPathUnavailable,
    LayerRecorder,
    PerSampleGrads,
    per_sample_factors,
)
from genlab.optim.perturb import PerturbedOptimizer

SOLVERS = ("auto", "dense", "woodbury")
PRECISIONS = ("model", "float64")
WOODBURY_MIN_DIM = 1000
PER_SAMPLE_METHODS = ("auto", "layers", "autograd")


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
        if method == "autograd" or (method == "auto" and model is None):
            return
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
            return _check_losses(closure(), self.who)
        with self.recorder.recording():
            return _check_losses(closure(), self.who)

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

    ``last_trace`` holds tr Sigma_B of the latest batch (before the step). ``model`` and
    ``per_sample`` choose how the per-sample gradients are formed (module doc).
    """

    requires_closure = True  # the penalty's gradient comes from the per-sample closure

    def __init__(self, params, lr: float, lam: float, n_total: int | None = None,
                 momentum: float = 0.0, weight_decay: float = 0.0, dampening: float = 0.0,
                 nesterov: bool = False, max_grad_norm: float | None = None, *,
                 model: nn.Module | None = None, per_sample: str = "auto"):
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
        self.source = PerSampleSource(per_sample, model, _trainable(self.param_groups), "COV")

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
        params = _trainable(self.param_groups)
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
        self.source = PerSampleSource(per_sample, model, _trainable(self.param_groups),
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
        params = _trainable(self.param_groups)
        self._drop_grads()
        with torch.enable_grad():
            losses = self.source.run(closure)
        used, direction = self._direction(losses, params)
        eps = torch._foreach_mul(direction, rho) if direction else []
        self.last_perturbation_norm = float(torch.sqrt(sum((e.double() ** 2).sum() for e in eps))
                                            ) if eps else 0.0
        self._perturb(used, eps)
        with torch.enable_grad():
            perturbed = _check_losses(self._run_closure(closure, perturbed=True), "SAMGCM")
            perturbed.mean().backward()
        self._second_step()
        return losses.mean().detach()
