"""Nonuniformity and sharpness measures of a trained model, one call for all of them.

The formulas and their sources are in the modules that compute them:
:mod:`genlab.optim.measures.per_sample` (per-sample gradients, tr Sigma, mini-batch noise, gradient
diversity, noise scale), :mod:`genlab.optim.measures.hessian` (lambda_max, tr H, curvature
nonuniformity s) and :mod:`genlab.optim.measures.sharpness` (m-sharpness, average-case sharpness).

Every measure takes ``(model, loss_fn, inputs, targets)`` or ``(model, loss_fn, batches)``
with ``batches`` an iterable of (x, y) (e.g. a DataLoader); ``loss_fn`` is mean-reduced.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from torch import nn

from genlab.core.errors import require_choice, require_positive
from genlab.optim.limits import MAX_ITERATIONS, require_at_most
from genlab.optim.measures.hessian import (
    TraceEstimate,
    curvature_nonuniformity,
    hessian_top_eigenvalue,
    hessian_trace,
    hvp,
)
from genlab.optim.measures.per_sample import (
    BN_MODES,
    collect,
    gradient_diversity,
    gradient_noise_stats,
    minibatch_factor,
    minibatch_noise,
    noise_scale,
    noise_trace,
    per_sample_grads,
)
from genlab.optim.measures.sharpness import average_sharpness, worst_case_sharpness

__all__ = [
    "MeasureConfig", "TraceEstimate", "all_measures", "average_sharpness",
    "curvature_nonuniformity", "gradient_diversity", "gradient_noise_stats",
    "hessian_top_eigenvalue", "hessian_trace", "hvp", "minibatch_factor", "minibatch_noise",
    "noise_scale", "noise_trace", "per_sample_grads", "worst_case_sharpness", "MEASURE_NAMES",
]

# Keys of all_measures that are measures (the rest is bookkeeping).
MEASURE_NAMES = (
    "trace_sigma", "minibatch_noise", "curvature_nonuniformity", "hessian_top_eigenvalue",
    "hessian_trace", "m_sharpness", "average_sharpness", "gradient_diversity", "noise_scale",
    "grad_norm_sq",
)


@dataclass
class MeasureConfig:
    """Sizes of the estimates made by :func:`all_measures` (defaults: seconds on a small net)."""

    n_samples: int = 512  # samples for tr Sigma, lambda_max, tr H, average sharpness
    curvature_samples: int = 128  # samples for the per-sample-Hessian nonuniformity s
    batch_size: int = 32  # b of the mini-batch noise a * tr Sigma
    power_iterations: int = 50
    trace_probes: int = 30
    rho: float = 0.1  # adaptive m-sharpness radius
    m: int = 128
    sharpness_samples: int = 1024
    ascent_steps: int = 5
    sigma: float = 0.05  # average-case sharpness
    draws: int = 5
    chunk_size: int = 128
    bn_mode: str = "eval"
    seed: int = 0

    def validate(self) -> None:
        for name in ("n_samples", "curvature_samples", "batch_size", "power_iterations",
                     "trace_probes", "rho", "m", "sharpness_samples", "ascent_steps", "sigma",
                     "draws", "chunk_size"):
            require_positive(name, getattr(self, name))
        for name in ("power_iterations", "trace_probes", "ascent_steps", "draws"):
            require_at_most(name, getattr(self, name), MAX_ITERATIONS)
        require_choice("bn_mode", self.bn_mode, BN_MODES)


def all_measures(model: nn.Module, loss_fn: Callable, inputs, targets=None,
                 config: MeasureConfig | None = None) -> dict:
    """Every measure on (a seeded-order prefix of) the given data, with timings and bn_mode."""
    cfg = config or MeasureConfig()
    cfg.validate()
    x_all, y_all = collect(inputs, targets)
    x, y = x_all[: cfg.n_samples], y_all[: cfg.n_samples]
    out: dict = {"bn_mode": cfg.bn_mode, "n_samples": len(x), "config": asdict(cfg)}
    seconds: dict = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        value = fn()
        seconds[name] = round(time.perf_counter() - t0, 3)
        return value

    # Per-sample measures always run with eval-mode BatchNorm (see per_sample.py).
    stats = timed("noise", lambda: gradient_noise_stats(model, loss_fn, x, y,
                                                        chunk_size=cfg.chunk_size))
    b = min(cfg.batch_size, len(x))
    out.update({k: stats[k] for k in ("trace_sigma", "grad_norm_sq", "gradient_diversity",
                                      "noise_scale")})
    out["minibatch_noise"] = minibatch_factor(len(x), b) * stats["trace_sigma"]
    xc, yc = x[: cfg.curvature_samples], y[: cfg.curvature_samples]
    out["curvature_nonuniformity"] = timed("curvature_nonuniformity", lambda: (
        curvature_nonuniformity(model, loss_fn, xc, yc, iterations=cfg.power_iterations,
                                chunk_size=cfg.chunk_size, seed=cfg.seed)))
    out["hessian_top_eigenvalue"] = timed("hessian_top_eigenvalue", lambda: (
        hessian_top_eigenvalue(model, loss_fn, x, y, iterations=cfg.power_iterations,
                               chunk_size=cfg.chunk_size, seed=cfg.seed, bn_mode=cfg.bn_mode)))
    tr = timed("hessian_trace", lambda: hessian_trace(
        model, loss_fn, x, y, probes=cfg.trace_probes, chunk_size=cfg.chunk_size,
        seed=cfg.seed, bn_mode=cfg.bn_mode))
    out["hessian_trace"], out["hessian_trace_stderr"] = tr.value, tr.stderr
    out["m_sharpness"] = timed("m_sharpness", lambda: worst_case_sharpness(
        model, loss_fn, x_all, y_all, rho=cfg.rho, m=cfg.m, n_samples=cfg.sharpness_samples,
        steps=cfg.ascent_steps, seed=cfg.seed, bn_mode=cfg.bn_mode))
    out["average_sharpness"] = timed("average_sharpness", lambda: average_sharpness(
        model, loss_fn, x, y, sigma=cfg.sigma, draws=cfg.draws, chunk_size=cfg.chunk_size,
        seed=cfg.seed, bn_mode=cfg.bn_mode))
    out["seconds"] = seconds
    return out
