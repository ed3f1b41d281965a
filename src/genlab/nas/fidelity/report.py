"""Kendall's tau-b of a ranking of cells against the NB201 table, with its intervals.

Intervals are percentile bootstraps over cells (``RESAMPLES`` resamples of the cells with
replacement, a fixed seed, Efron & Tibshirani 1993): for one ranking the 2.5 and 97.5
percentiles of tau over the resamples; for two rankings of the same cells (a proxy against
the parameter count, say) the percentiles of tau(a) - tau(b), both computed on each resample
(paired: the cells' shared difficulty cancels). Resamples where tau is undefined (every
drawn value tied) are left out. ``LEVEL`` is the interval's coverage.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import kendalltau

RESAMPLES = 2000
LEVEL = 0.95
BOOT_SEED = 1


def tau(x, y) -> float:
    """Kendall's tau-b (NaN when either side is constant)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    return float(kendalltau(x, y).statistic)


def _resamples(n: int, seed: int = BOOT_SEED) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, (RESAMPLES, n))


def _bounds(values: list[float]) -> tuple[float, float]:
    finite = [v for v in values if np.isfinite(v)]
    if not finite:
        return math.nan, math.nan
    lo, hi = np.percentile(finite, [50 * (1 - LEVEL), 100 - 50 * (1 - LEVEL)])
    return float(lo), float(hi)


def tau_row(name: str, x, y) -> dict:
    """tau of ``x`` against ``y`` with its bootstrap interval over the cells."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    boot = [tau(x[i], y[i]) for i in _resamples(len(x))] if len(x) > 3 else []
    lo, hi = _bounds(boot)
    return {"ranking": name, "tau": tau(x, y), "low": lo, "high": hi, "cells": len(x)}


def paired_row(name: str, a, b, y) -> dict:
    """tau(a, y) - tau(b, y) over the same cells, with its paired bootstrap interval."""
    a, b, y = (np.asarray(v, float) for v in (a, b, y))
    boot = [tau(a[i], y[i]) - tau(b[i], y[i]) for i in _resamples(len(y))] if len(y) > 3 else []
    lo, hi = _bounds(boot)
    return {"difference": name, "delta tau": tau(a, y) - tau(b, y), "low": lo, "high": hi,
            "cells": len(y)}
