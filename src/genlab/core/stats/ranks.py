"""Rank agreement: Kendall tau-b of two orderings of the same items, its bootstrap interval
over the items, and the paired difference tau(a, y) - tau(b, y) of two orderings of them.

- Kendall tau-b (Kendall 1945, ties in both variables):
      tau_b = (P - Q) / sqrt((P + Q + T_x)(P + Q + T_y)),
  P / Q the concordant / discordant pairs, T_x (T_y) the pairs tied only in x (only in y);
  nan when either variable is constant.
- Interval of tau: the (1 - level)/2 and (1 + level)/2 percentiles of tau over bootstrap
  resamples of the items (1,000 by default, seeded; Efron & Tibshirani 1993, the percentile
  interval); resamples with a constant variable are skipped.
- Paired difference: tau(a, y) - tau(b, y) over the same items, with a paired percentile
  bootstrap interval: each resample draws the items with replacement
  (:func:`bootstrap_counts`) and computes both taus from that one sample
  (:func:`weighted_tau_b`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from genlab.core.stats import checks


def check_bootstrap(resamples: int, level: float) -> None:
    """ConfigError unless ``resamples`` is a positive integer and ``level`` lies in (0, 1)."""
    checks.count("resamples", resamples)
    checks.level(level)


def tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall tau-b by sign matrices: S / sqrt(pairs untied in x * pairs untied in y)."""
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    denom = math.sqrt(float(np.abs(sx).sum()) * float(np.abs(sy).sum()))
    return float((sx * sy).sum()) / denom if denom > 0 else math.nan


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall tau-b of two equal-length samples of finite numbers (nan when one is
    constant)."""
    xs, ys = checks.paired("x", x, "y", y)
    return tau_b(xs, ys)


def kendall_tau_interval(x: Sequence[float], y: Sequence[float], *, resamples: int = 1000,
                         level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of Kendall tau-b over resampled items (nan, nan when no
    resample defines tau)."""
    xs, ys = checks.paired("x", x, "y", y)
    check_bootstrap(resamples, level)
    rng = np.random.default_rng(seed)
    taus = []
    for _ in range(resamples):
        idx = rng.integers(0, len(xs), len(xs))
        t = tau_b(xs[idx], ys[idx])
        if not math.isnan(t):
            taus.append(t)
    if not taus:
        return math.nan, math.nan
    tail = 100 * (1 - level) / 2
    return float(np.percentile(taus, tail)), float(np.percentile(taus, 100 - tail))


def sign_matrix(v: np.ndarray) -> np.ndarray:
    """S[i, j] = sgn(v_i - v_j)."""
    return np.sign(v[:, None] - v[None, :])


def weighted_tau_b(w: np.ndarray, s_m: np.ndarray, s_g: np.ndarray) -> np.ndarray:
    """Kendall tau-b of the sample holding item i w[r, i] times, for every row r of w
    (``s_m``, ``s_g``: the :func:`sign_matrix` of the two variables).

    Two copies of one item form a pair tied in both variables, which tau-b leaves out, so
    the sums over the ordered pairs of that sample are quadratic forms in w:
    tau_b = w'(S_m * S_g)w / sqrt(w'|S_m|w * w'|S_g|w) (nan where a variable is constant).
    """
    num = ((w @ (s_m * s_g)) * w).sum(axis=1)
    den = ((w @ np.abs(s_m)) * w).sum(axis=1) * ((w @ np.abs(s_g)) * w).sum(axis=1)
    out = np.full(len(w), np.nan)
    ok = den > 0
    out[ok] = num[ok] / np.sqrt(den[ok])
    return out


def bootstrap_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n) array: how often each of n items is drawn in each resample.

    Resample r is row r of ``np.random.default_rng(seed).integers(0, n, (resamples, n))``,
    so every paired statistic computed with the same (n, resamples, seed) sees the same
    resamples.
    """
    idx = np.random.default_rng(seed).integers(0, n, (resamples, n))
    flat = (np.arange(resamples)[:, None] * n + idx).ravel()
    return np.bincount(flat, minlength=resamples * n).reshape(resamples, n).astype(float)


def percentile_interval(values: np.ndarray, level: float
                        ) -> tuple[float | None, float | None]:
    """Percentile interval of the finite ``values`` (None, None when there are none)."""
    v = values[np.isfinite(values)]
    if not len(v):
        return None, None
    tail = 100 * (1 - level) / 2
    return float(np.percentile(v, tail)), float(np.percentile(v, 100 - tail))


def _number(value: float) -> float | None:
    """A float, or None where it is undefined (nan)."""
    return None if value is None or math.isnan(value) else float(value)


def paired_tau_difference(a: Sequence[float], b: Sequence[float], y: Sequence[float], *,
                          resamples: int = 1000, seed: int = 0, level: float = 0.95) -> dict:
    """tau(a, y) - tau(b, y) (Kendall tau-b) over the same items, paired bootstrap.

    Each resample draws items with replacement (:func:`bootstrap_counts`) and computes both
    taus from that one sample; resamples where either tau is undefined are skipped.
    ``low``/``high`` are the (1 - level)/2 and (1 + level)/2 percentiles of the resampled
    differences. Returns {"difference", "low", "high", "tau_a", "tau_b", "n", "resamples",
    "replicates"} (resamples: those that gave a difference; replicates: the resampled
    differences, nan where undefined; an undefined value is None).
    """
    check_bootstrap(resamples, level)
    xa, xy = checks.paired("a", a, "y", y, minimum=2)
    xb, _ = checks.paired("b", b, "y", y, minimum=2)
    s_g = sign_matrix(xy)
    s_a, s_b = sign_matrix(xa), sign_matrix(xb)
    n = len(xy)
    ones = np.ones((1, n))
    tau_a, tau_b_ = weighted_tau_b(ones, s_a, s_g)[0], weighted_tau_b(ones, s_b, s_g)[0]
    counts = bootstrap_counts(n, resamples, seed)
    diffs = weighted_tau_b(counts, s_a, s_g) - weighted_tau_b(counts, s_b, s_g)
    low, high = percentile_interval(diffs, level)
    return {"difference": _number(tau_a - tau_b_), "low": low, "high": high,
            "tau_a": _number(tau_a), "tau_b": _number(tau_b_), "n": n,
            "resamples": int(np.isfinite(diffs).sum()), "replicates": diffs}
