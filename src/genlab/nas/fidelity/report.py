"""Kendall's tau-b of a ranking of cells against the NB201 table, with its intervals.

The numbers come from the statistics layer (genlab.core.stats.ranks): tau-b by sign matrices;
for one ranking the percentile bootstrap interval over cells (``RESAMPLES`` resamples of the
cells with replacement, a fixed seed, Efron & Tibshirani 1993); for two rankings of the same
cells (a proxy against the parameter count, say) the paired bootstrap of tau(a) - tau(b),
both computed on each resample (the cells' shared difficulty cancels). Resamples where tau
is undefined (every drawn value tied) are left out. ``LEVEL`` is the intervals' coverage.
"""

from __future__ import annotations

import math

import numpy as np

from genlab.core.stats import ranks


def ordinal(values) -> np.ndarray:
    """``values`` as floats whose order is theirs, infinities moved just past the finite
    ones (NWOT's log-determinant is -inf for a cell whose kernel is singular: the lowest
    rank, as the authors rank it); tau reads only the order."""
    x = np.asarray(values, float)
    finite = x[np.isfinite(x)]
    lo, hi = (finite.min(), finite.max()) if len(finite) else (0.0, 0.0)
    return np.where(x == -np.inf, lo - 1.0, np.where(x == np.inf, hi + 1.0, x))


RESAMPLES = 2000
LEVEL = 0.95
BOOT_SEED = 1


def tau(x, y) -> float:
    """Kendall's tau-b (NaN when either side is constant)."""
    return ranks.tau_b(ordinal(x), ordinal(y))


def tau_row(name: str, x, y) -> dict:
    """tau of ``x`` against ``y`` with its bootstrap interval over the cells."""
    x, y = ordinal(x), ordinal(y)
    lo = hi = math.nan
    if len(x) > 3:
        lo, hi = ranks.kendall_tau_interval(x, y, resamples=RESAMPLES, level=LEVEL,
                                            seed=BOOT_SEED)
    return {"ranking": name, "tau": tau(x, y), "low": lo, "high": hi, "cells": len(x)}


def paired_row(name: str, a, b, y) -> dict:
    """tau(a, y) - tau(b, y) over the same cells, with its paired bootstrap interval."""
    d = ranks.paired_tau_difference(ordinal(a), ordinal(b), ordinal(y), resamples=RESAMPLES,
                                    seed=BOOT_SEED, level=LEVEL)
    nan = lambda v: math.nan if v is None else v  # noqa: E731
    return {"difference": name, "delta tau": nan(d["difference"]), "low": nan(d["low"]),
            "high": nan(d["high"]), "cells": d["n"]}
