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

from genlab.core.seeding import seed_list  # noqa: F401 - the studies import it from here


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


def beyond_intervals(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when the mean +- std intervals of a and b do not overlap."""
    return abs(a[0] - b[0]) > a[1] + b[1]


def verdict(ours: tuple[float, float], ref: tuple[float, float]) -> str:
    """'better', 'worse' (beyond the intervals) or 'within intervals'."""
    if not beyond_intervals(ours, ref):
        return "within intervals"
    return "better" if ours[0] > ref[0] else "worse"
