"""CSAM family: SAM whose second perturbation follows the change of the gradient (noise).

Source: the official code of "Beyond Sharpness: The Role of Nonuniformity in
Generalization" (AAAI-26). Three forward-backward passes per step:
    g0 = grad L_B(w);           e1 = rho1 g0 / ||g0||;     g1 = grad L_B(w + e1);
    m <- alpha m + (1 - alpha)(g1 - g0)   (m = 0 at the first step);   v = g1 - g0 - m;
    CSAM_Identity:  e2 = rho2 v / ||v||;
    CSAM:           e2 = rho2 F^-1 v / sqrt(v^T F^-1 v), F the K-FAC Fisher (kfac.py)
                    (``length="euclidean"``, ours: e2 = rho2 F^-1 v / ||F^-1 v||);
    ACSAM_Identity: e2 = rho2 v (|w| + eta)^2 / ||v (|w| + eta)||;
then the base optimiser (SGD with momentum in the paper's runs) steps from w with
grad L_B(w + e2). Defaults rho1 = rho2 = 0.1, alpha = 0.4, eta = 0.01.
Unlike the official code, the two extra passes leave BatchNorm statistics alone
(pass ``model=``) and only the last pass all-reduces gradients under DDP.
The closure is SAM's: it calls backward and returns the loss; ``step`` returns
the loss at w.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from genlab.core.errors import ConfigError, require_positive
from genlab.optim.optimizers.kfac import KFAC
from genlab.optim.optimizers.perturb import (
    PerturbedOptimizer,
    detached,
    finite_scale,
    global_norm,
)
from genlab.optim.optimizers.registry import OptimizerEntry, register_optimizer


class _CSAMBase(PerturbedOptimizer):
    """Shared three-pass step; subclasses choose the second perturbation's direction."""

    def __init__(self, params, base_optimizer: Callable | None = None, rho1: float = 0.1,
                 rho2: float = 0.1, alpha: float = 0.4, *, model: nn.Module | None = None,
                 max_grad_norm: float | None = None, extra_defaults: dict | None = None,
                 **base_kwargs):
        require_positive("rho1", rho1)
        require_positive("rho2", rho2)
        if not 0.0 <= alpha < 1.0:
            raise ConfigError(f"alpha must be in [0, 1), got {alpha}")
        own = dict(rho1=rho1, rho2=rho2, alpha=alpha, **(extra_defaults or {}))
        super().__init__(params, base_optimizer, own, base_kwargs, model=model,
                         max_grad_norm=max_grad_norm)

    def _direction(self, params: list[torch.Tensor], v: list[torch.Tensor]) -> list[torch.Tensor]:
        """e2 for parameters ``params`` given v (one tensor per parameter)."""
        raise NotImplementedError

    def _first_pass(self, closure: Callable):
        return self._run_closure(closure, perturbed=False, sync=False)

    def _after_first_pass(self) -> None:
        """Hook for K-FAC bookkeeping."""

    @torch.no_grad()
    def step(self, closure: Callable | None = None):
        """Gradients at w, w + e1 and w + e2; the base optimiser steps from w with the last."""
        if closure is None:
            raise ConfigError(f"{type(self).__name__}.step needs a closure (three passes)")
        loss = self._first_pass(closure)
        self._after_first_pass()
        groups = [(g, [p for p in g["params"] if p.grad is not None]) for g in self.param_groups]
        params = [p for _, ps in groups for p in ps]
        g0 = torch._foreach_mul([p.grad for p in params], 1.0)          # a copy
        scale = finite_scale(1.0, global_norm(g0))
        eps1 = []
        for group, ps in groups:
            eps1.extend(torch._foreach_mul([p.grad for p in ps], group["rho1"] * scale))
        self._perturb(params, eps1)
        self._run_closure(closure, perturbed=True, sync=False)
        self.restore()
        diff = [(p.grad if p.grad is not None else torch.zeros_like(p)) - g
                for p, g in zip(params, g0, strict=True)]
        v = []
        for (group, ps), start in zip(groups, _offsets(groups), strict=True):
            for p, d in zip(ps, diff[start:start + len(ps)], strict=True):
                st = self.state[p]
                if "csam_m" not in st:
                    st["csam_m"] = torch.zeros_like(p)
                m = st["csam_m"]
                m.mul_(group["alpha"]).add_(d, alpha=1 - group["alpha"])
                v.append(d - m)
        self._perturb(params, self._direction(params, v))
        self._run_closure(closure, perturbed=True, sync=True)
        self._second_step()
        return detached(loss)

    def _rho2_scaled(self, params: list[torch.Tensor], directions: list[torch.Tensor],
                     norm: torch.Tensor) -> list[torch.Tensor]:
        """rho2 (per group) * directions / norm, zeros when the norm is 0 or not finite."""
        rho2 = {p: g["rho2"] for g in self.param_groups for p in g["params"]}
        scale = finite_scale(1.0, norm)
        return [d * (rho2[p] * scale) for p, d in zip(params, directions, strict=True)]


def _offsets(groups) -> list[int]:
    out, start = [], 0
    for _, ps in groups:
        out.append(start)
        start += len(ps)
    return out


class CSAM_Identity(_CSAMBase):
    """CSAM with a Euclidean second perturbation e2 = rho2 v / ||v||."""

    def _direction(self, params, v):
        return self._rho2_scaled(params, v, global_norm(v))


class ACSAM_Identity(_CSAMBase):
    """CSAM with a scale-adaptive second perturbation e2 = rho2 v (|w|+eta)^2 / ||v (|w|+eta)||."""

    def __init__(self, params, base_optimizer: Callable | None = None, rho1: float = 0.1,
                 rho2: float = 0.1, alpha: float = 0.4, eta: float = 0.01, **kw):
        require_positive("eta", eta, allow_zero=True)
        super().__init__(params, base_optimizer, rho1, rho2, alpha,
                         extra_defaults=dict(eta=eta), **kw)

    def _direction(self, params, v):
        eta = {p: g["eta"] for g in self.param_groups for p in g["params"]}
        t = [p.abs().add_(eta[p]) for p in params]
        tv = torch._foreach_mul(v, t)
        return self._rho2_scaled(params, torch._foreach_mul(tv, t), global_norm(tv))


LENGTHS = ("fisher", "euclidean")  # CSAM's normalisation of e2


class CSAM(_CSAMBase):
    """CSAM with a K-FAC-shaped second perturbation e2 = rho2 F^-1 v / sqrt(v^T F^-1 v).

    Needs ``model=`` (the hooks capture Linear/Conv2d inputs and output gradients in
    the first pass); factors are part of ``state_dict()``.

    ``length``: "fisher" (the official code's) normalises e2 in F's metric, so its
    Euclidean length is rho2 ||F^-1 v|| / sqrt(v^T F^-1 v), up to rho2 / sqrt(damping)
    (~32 rho2 at the default damping); "euclidean" keeps K-FAC's direction at SAM's
    length rho2 (docs/nonuniformity.md: at the default the Transformer trains only at
    rho2 0.01; with "euclidean" at 0.05 and 0.25).
    """

    def __init__(self, params, base_optimizer: Callable | None = None, rho1: float = 0.1,
                 rho2: float = 0.1, alpha: float = 0.4, *, model: nn.Module | None = None,
                 damping: float = 1e-3, decay: float = 0.95, refresh: int = 50,
                 length: str = "fisher", **kw):
        if length not in LENGTHS:
            raise ConfigError(f"length must be one of {', '.join(LENGTHS)}, got {length!r}")
        if model is None:
            raise ConfigError("CSAM needs model= (its K-FAC factors come from the model's layers)")
        require_positive("damping", damping)
        require_positive("refresh", refresh)
        if not 0.0 <= decay < 1.0:
            raise ConfigError(f"decay must be in [0, 1), got {decay}")
        super().__init__(params, base_optimizer, rho1, rho2, alpha, model=model, **kw)
        trainable = {p for g in self.param_groups for p in g["params"]}
        self.kfac = KFAC(model, trainable, self, damping=damping, decay=decay, refresh=refresh)
        self.length = length

    def _first_pass(self, closure):
        with self.kfac.capturing():
            return super()._first_pass(closure)

    def _after_first_pass(self) -> None:
        first = self.param_groups[0]["params"][0]
        step = int(self.state[first].get("csam_step", 0))
        self.kfac.update(step)
        self.state[first]["csam_step"] = step + 1

    def _direction(self, params, v):
        pv = self.kfac.precondition(dict(zip(params, v, strict=True)))
        pv_list = [pv[p] for p in params]
        if self.length == "euclidean":
            return self._rho2_scaled(params, pv_list, global_norm(pv_list))
        quad = sum((a * b).sum() for a, b in zip(v, pv_list, strict=True)).clamp_min(0.0)
        return self._rho2_scaled(params, pv_list, torch.sqrt(quad))


_CSAM_OPTIONS = ("rho1", "rho2", "model")
_RHO = (0.01, 0.05, 0.25)  # the search grid's radii (rho1 = rho2), as SAM's
register_optimizer("csam_identity", OptimizerEntry(CSAM_Identity, radius="rho",
                                                   accepts=_CSAM_OPTIONS, search_radii=_RHO,
                                                   standard=5))
register_optimizer("acsam_identity", OptimizerEntry(ACSAM_Identity, radius="rho",
                                                    accepts=_CSAM_OPTIONS, search_radii=_RHO,
                                                    standard=6))
register_optimizer("csam", OptimizerEntry(CSAM, radius="rho", needs_model=True,
                                          accepts=_CSAM_OPTIONS, search_radii=_RHO, standard=7))
