"""Nonuniformity and sharpness measures of a trained model, one call for all of them.

The formulas and their sources are in the modules that compute them:
:mod:`genlab.optim.measures.per_sample` (per-sample gradients, tr Sigma, mini-batch noise, gradient
diversity, noise scale), :mod:`genlab.optim.measures.hessian` (lambda_max, tr H, curvature
nonuniformity s) and :mod:`genlab.optim.measures.sharpness` (m-sharpness, average-case sharpness).

Every measure takes ``(model, loss_fn, inputs, targets)`` or ``(model, loss_fn, batches)``
with ``batches`` an iterable of (x, y) (e.g. a DataLoader); ``loss_fn`` is mean-reduced.

``MEASURES`` is their registry: :func:`all_measures` (what `optim train` records and prints)
runs every registered measure in the order of registration; a new one is one
``@register_measure`` function wherever it is defined (docs/contributing.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from torch import nn

from genlab.core.errors import require_choice, require_positive
from genlab.core.registry import Registry
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
    "MEASURES", "Measure", "MeasureConfig", "MeasureInputs", "TraceEstimate",
    "all_measures", "average_sharpness", "curvature_nonuniformity", "gradient_diversity",
    "gradient_noise_stats", "hessian_top_eigenvalue", "hessian_trace", "hvp", "minibatch_factor",
    "measure_names", "minibatch_noise", "noise_scale", "noise_trace", "per_sample_grads",
    "register_measure",
    "worst_case_sharpness",
]


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


@dataclass
class MeasureInputs:
    """What every measure reads: the model, the mean-reduced loss, the samples (``x``, ``y``:
    the first ``config.n_samples``; ``x_all``, ``y_all``: all given), the config, and the
    values of the measures computed before it (a measure may reuse an earlier one's)."""

    model: nn.Module
    loss_fn: Callable
    x: Any
    y: Any
    x_all: Any
    y_all: Any
    config: MeasureConfig
    values: dict


@dataclass(frozen=True)
class Measure:
    """A registered measure: ``compute(inputs)`` returns its values by name (``names``: the
    values that are measures, the rest of what it returns is bookkeeping; a name beginning
    with "_" is kept for the measures after it and not reported), timed as ``timing`` (None:
    too cheap to time, or timed by the measure whose pass it reads)."""

    compute: Callable[[MeasureInputs], dict]
    names: tuple[str, ...]
    timing: str | None = None


MEASURES: Registry[Measure] = Registry("measure")


def register_measure(name: str, names: tuple[str, ...] = (), *, timing: str | None = None):
    """Decorator: register ``compute(inputs) -> dict`` as the measure ``name`` (its values
    ``names``, default ``(name,)``); :func:`all_measures` runs the measures in the order
    they were registered."""
    def add(compute: Callable[[MeasureInputs], dict]) -> Callable[[MeasureInputs], dict]:
        MEASURES.register(name, Measure(compute, names or (name,), timing))
        return compute
    return add


NOISE_STATS = "_noise"  # the per-sample pass's figures, read by the measures after it


@register_measure("trace_sigma", timing="noise")
def _trace_sigma(m: MeasureInputs) -> dict:
    # per-sample measures always run with eval-mode BatchNorm (see per_sample.py); the one
    # pass gives the gradient diversity, the noise scale and the mean gradient's norm too
    stats = gradient_noise_stats(m.model, m.loss_fn, m.x, m.y, chunk_size=m.config.chunk_size)
    return {"trace_sigma": stats["trace_sigma"], NOISE_STATS: stats}


@register_measure("minibatch_noise")
def _minibatch_noise(m: MeasureInputs) -> dict:
    b = min(m.config.batch_size, len(m.x))
    return {"minibatch_noise": minibatch_factor(len(m.x), b) * m.values["trace_sigma"]}


@register_measure("curvature_nonuniformity", timing="curvature_nonuniformity")
def _curvature_nonuniformity(m: MeasureInputs) -> dict:
    cfg = m.config
    xc, yc = m.x[: cfg.curvature_samples], m.y[: cfg.curvature_samples]
    return {"curvature_nonuniformity": curvature_nonuniformity(
        m.model, m.loss_fn, xc, yc, iterations=cfg.power_iterations,
        chunk_size=cfg.chunk_size, seed=cfg.seed)}


@register_measure("hessian_top_eigenvalue", timing="hessian_top_eigenvalue")
def _hessian_top_eigenvalue(m: MeasureInputs) -> dict:
    cfg = m.config
    return {"hessian_top_eigenvalue": hessian_top_eigenvalue(
        m.model, m.loss_fn, m.x, m.y, iterations=cfg.power_iterations,
        chunk_size=cfg.chunk_size, seed=cfg.seed, bn_mode=cfg.bn_mode)}


@register_measure("hessian_trace", timing="hessian_trace")
def _hessian_trace(m: MeasureInputs) -> dict:
    cfg = m.config
    tr = hessian_trace(m.model, m.loss_fn, m.x, m.y, probes=cfg.trace_probes,
                       chunk_size=cfg.chunk_size, seed=cfg.seed, bn_mode=cfg.bn_mode)
    return {"hessian_trace": tr.value, "hessian_trace_stderr": tr.stderr}


@register_measure("m_sharpness", timing="m_sharpness")
def _m_sharpness(m: MeasureInputs) -> dict:
    cfg = m.config
    return {"m_sharpness": worst_case_sharpness(
        m.model, m.loss_fn, m.x_all, m.y_all, rho=cfg.rho, m=cfg.m,
        n_samples=cfg.sharpness_samples, steps=cfg.ascent_steps, seed=cfg.seed,
        bn_mode=cfg.bn_mode)}


@register_measure("average_sharpness", timing="average_sharpness")
def _average_sharpness(m: MeasureInputs) -> dict:
    cfg = m.config
    return {"average_sharpness": average_sharpness(
        m.model, m.loss_fn, m.x, m.y, sigma=cfg.sigma, draws=cfg.draws,
        chunk_size=cfg.chunk_size, seed=cfg.seed, bn_mode=cfg.bn_mode)}


def _from_noise_pass(name: str) -> None:
    register_measure(name)(lambda m: {name: m.values[NOISE_STATS][name]})


for _name in ("gradient_diversity", "noise_scale", "grad_norm_sq"):
    _from_noise_pass(_name)


def measure_names() -> tuple[str, ...]:
    """The values that are measures: every registered measure's names, in the order they
    were registered (the rest of all_measures' keys is bookkeeping)."""
    return tuple(n for _, entry in MEASURES.items() for n in entry.names)


def all_measures(model: nn.Module, loss_fn: Callable, inputs, targets=None,
                 config: MeasureConfig | None = None) -> dict:
    """Every registered measure on (a seeded-order prefix of) the given data, in the order
    they were registered, with timings and bn_mode."""
    cfg = config or MeasureConfig()
    cfg.validate()
    x_all, y_all = collect(inputs, targets)
    x, y = x_all[: cfg.n_samples], y_all[: cfg.n_samples]
    out: dict = {"bn_mode": cfg.bn_mode, "n_samples": len(x), "config": asdict(cfg)}
    seconds: dict = {}
    values: dict = {}
    for _, entry in MEASURES.items():
        t0 = time.perf_counter()
        values.update(entry.compute(MeasureInputs(model, loss_fn, x, y, x_all, y_all, cfg,
                                                  values)))
        if entry.timing is not None:
            seconds[entry.timing] = round(time.perf_counter() - t0, 3)
    out.update({k: v for k, v in values.items() if not k.startswith("_")})
    out["seconds"] = seconds
    return out
