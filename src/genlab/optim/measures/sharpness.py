"""Sharpness by perturbing the weights: adaptive worst-case m-sharpness and average-case.

- Adaptive worst-case m-sharpness (Andriushchenko et al. 2023, "A modern look at the
  relationship between sharpness and generalization", eq. 2 with elementwise |w| scaling):
      S_max = E_S [ max_{||delta / |w| ||_2 <= rho} L_S(w + delta) - L_S(w) ],
  S a batch of m samples (default m = 128) drawn from n_samples (default 1024) samples.
  Approximation (ours): the inner max is taken by a few steps of normalised projected
  gradient ascent in the rescaled variable eta = delta / |w| (step rho/2, ball of radius rho,
  best iterate kept); the paper uses Auto-PGD. It is a lower bound of the true max.
- Average-case sharpness: E_{delta ~ N(0, sigma^2 diag(|w|^2))} L(w + delta) - L(w), by Monte
  Carlo with ``draws`` seeded draws over all the given samples.

Every parameter is scaled by its own magnitude (``adaptive=True``); ``adaptive=False``
gives the plain (non-adaptive) ball ||delta||_2 <= rho and delta ~ N(0, sigma^2 I).
BatchNorm: ``bn_mode="eval"`` (running statistics) or ``"batch"`` (statistics of each batch
S; running statistics restored).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call

from genlab.core.errors import require_positive
from genlab.optim.measures.per_sample import chunks, collect, fill_none, measuring, trainable


def _loss_at(model, loss_fn, params, buffers, x, y) -> torch.Tensor:
    return loss_fn(functional_call(model, (params, buffers), (x,)), y)


def _subset(x, y, n_samples: int, seed: int):
    n = min(n_samples, len(x))
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))[:n]
    return x[order], y[order]


def worst_case_sharpness(model: nn.Module, loss_fn: Callable, inputs, targets=None, *,
                         rho: float = 0.1, m: int = 128, n_samples: int = 1024, steps: int = 5,
                         adaptive: bool = True, seed: int = 0, bn_mode: str = "eval") -> float:
    """Adaptive worst-case m-sharpness (approximate inner max; see module doc)."""
    require_positive("rho", rho)
    require_positive("m", m)
    require_positive("n_samples", n_samples)
    require_positive("steps", steps)
    x, y = _subset(*collect(inputs, targets), n_samples, seed)
    total, count = 0.0, 0
    with measuring(model, bn_mode):
        params = trainable(model)
        buffers = dict(model.named_buffers())
        scale = {k: (p.abs() if adaptive else torch.ones_like(p)) for k, p in params.items()}
        for sl in chunks(len(x), m):
            xs, ys = x[sl], y[sl]
            with torch.no_grad():
                base = float(_loss_at(model, loss_fn, params, buffers, xs, ys))
            eta = {k: torch.zeros_like(p) for k, p in params.items()}
            best = base
            for _ in range(steps):
                leaf = {k: e.clone().requires_grad_(True) for k, e in eta.items()}
                moved = {k: params[k] + scale[k] * leaf[k] for k in params}
                loss = _loss_at(model, loss_fn, moved, buffers, xs, ys)
                best = max(best, float(loss.detach()))
                grads = torch.autograd.grad(loss, list(leaf.values()), allow_unused=True)
                grads = fill_none(grads, list(eta.values()))
                norm = torch.sqrt(sum((g**2).sum() for g in grads))
                if float(norm) == 0.0:
                    break
                step = {k: (rho / 2) * g / norm for k, g in zip(eta, grads, strict=True)}
                eta = {k: e + step[k] for k, e in eta.items()}
                enorm = torch.sqrt(sum((e**2).sum() for e in eta.values()))
                if float(enorm) > rho:
                    eta = {k: e * (rho / enorm) for k, e in eta.items()}
            with torch.no_grad():
                moved = {k: params[k] + scale[k] * eta[k] for k in params}
                best = max(best, float(_loss_at(model, loss_fn, moved, buffers, xs, ys)))
            total += (best - base) * len(ys)
            count += len(ys)
    return total / count


@torch.no_grad()
def average_sharpness(model: nn.Module, loss_fn: Callable, inputs, targets=None, *,
                      sigma: float = 0.05, draws: int = 10, adaptive: bool = True,
                      chunk_size: int | None = 512, seed: int = 0, bn_mode: str = "eval") -> float:
    """E_delta L(w + delta) - L(w), delta ~ N(0, sigma^2 diag(|w|^2)) (Monte Carlo)."""
    require_positive("sigma", sigma)
    require_positive("draws", draws)
    x, y = collect(inputs, targets)
    gen = torch.Generator().manual_seed(seed)
    with measuring(model, bn_mode):
        params = trainable(model)
        buffers = dict(model.named_buffers())

        def mean_loss(p):
            total = 0.0
            for sl in chunks(len(x), chunk_size):
                loss = _loss_at(model, loss_fn, p, buffers, x[sl], y[sl])
                total += float(loss) * (sl.stop - sl.start)
            return total / len(x)

        base = mean_loss(params)
        shifted = 0.0
        for _ in range(draws):
            moved = {}
            for k, p in params.items():
                noise = torch.randn(p.shape, generator=gen).to(p.device) * sigma
                moved[k] = p + noise * (p.abs() if adaptive else 1.0)
            shifted += mean_loss(moved)
    return shifted / draws - base
