"""Means, intervals, the one comparison rule the studies' tables use, and their seed lists.

Accuracies are percentages (0-100) throughout.

Over seeds: mean and sample standard deviation (ddof = 1). Two results differ *beyond
their intervals* when their mean +- std intervals do not overlap,
|mean_a - mean_b| > std_a + std_b (a deliberately strict reading for 3-5 seeds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from genlab.core.errors import ConfigError


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """(mean, sample std); std 0 for one value, (nan, nan) for none."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(arr) == 0:
        return math.nan, math.nan
    return float(arr.mean()), float(arr.std(ddof=1)) if len(arr) > 1 else 0.0


def pct(mean: float, std: float | None = None, digits: int = 1) -> str:
    """A percentage (already 0-100) as text, ``97.2 ± 0.4``."""
    if mean is None or not math.isfinite(mean):
        return "-"
    text = f"{mean:.{digits}f}"
    return text if std is None else f"{text} ± {std:.{digits}f}"


def seed_list(seeds, first: int = 0, name: str = "seeds") -> list[int]:
    """A study's seeds as a list: a list is checked (non-empty, integers >= 0, no repeat);
    an int n, the count earlier versions took, means ``first .. first + n - 1``."""
    if isinstance(seeds, bool):
        raise ConfigError(f"{name}: expected a list of seeds, got {seeds!r}")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ConfigError(f"{name}: a count of seeds must be >= 1, got {seeds}")
        seeds = range(first, first + seeds)
    try:
        values = [int(s) for s in seeds]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}: expected a list of integer seeds, got {seeds!r}") from exc
    if any(v != s for v, s in zip(values, seeds, strict=True)):
        raise ConfigError(f"{name}: expected integer seeds, got {list(seeds)!r}")
    if not values:
        raise ConfigError(f"{name}: give at least one seed, e.g. 0,1,2 or 0-4")
    if min(values) < 0:
        raise ConfigError(f"{name}: seeds are >= 0, got {values}")
    if len(set(values)) != len(values):
        raise ConfigError(f"{name}: a seed is repeated in {values}")
    return values


def beyond_intervals(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when the mean +- std intervals of a and b do not overlap."""
    return abs(a[0] - b[0]) > a[1] + b[1]


def verdict(ours: tuple[float, float], ref: tuple[float, float]) -> str:
    """'better', 'worse' (beyond the intervals) or 'within intervals'."""
    if not beyond_intervals(ours, ref):
        return "within intervals"
    return "better" if ours[0] > ref[0] else "worse"
