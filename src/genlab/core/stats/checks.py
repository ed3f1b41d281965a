"""The checked inputs of the statistics layer: a sample, two paired samples, a level, a count.

Every function of ``genlab.core.stats`` passes its inputs through these, so that an empty
sample, samples of unequal length where pairs are meant, a nan or inf, or a level outside
(0, 1) is refused with one ConfigError line naming the argument and what was expected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from genlab.core.errors import ConfigError


def sample(name: str, values: Sequence[float] | np.ndarray, *, minimum: int = 1) -> np.ndarray:
    """``values`` as a 1-D float array of at least ``minimum`` finite numbers."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a sequence of numbers, got {values!r:.60}") from None
    if arr.ndim != 1:
        raise ConfigError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if len(arr) < minimum:
        raise ConfigError(f"{name} needs at least {minimum} value(s), got {len(arr)}")
    bad = int((~np.isfinite(arr)).sum())
    if bad:
        raise ConfigError(f"{name} holds {bad} value(s) that are nan, inf or None; "
                          "expected finite numbers")
    return arr


def paired(name_a: str, a: Sequence[float], name_b: str, b: Sequence[float], *,
           minimum: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Two checked samples of equal length (pair i: the same seed, subject or item)."""
    xa, xb = sample(name_a, a, minimum=minimum), sample(name_b, b, minimum=minimum)
    if len(xa) != len(xb):
        raise ConfigError(f"{name_a} and {name_b} must have equal lengths (one pair per "
                          f"seed or item), got {len(xa)} and {len(xb)}")
    return xa, xb


def level(value: float, name: str = "level") -> float:
    """A probability strictly inside (0, 1): a confidence level, alpha, power, a quantile."""
    try:
        ok = 0 < float(value) < 1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ConfigError(f"{name} must lie in (0, 1), got {value!r}")
    return float(value)


def count(name: str, value: int, *, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (resamples, draws, seeds, group sizes)."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{name} must be {what}, got {value!r}")
    return int(value)


def positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """A finite number > 0 (>= 0 with ``allow_zero``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name} must be a finite number {bound}, got {value!r}")
    return v
