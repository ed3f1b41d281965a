"""Rank correlation of measures with the generalization gap (Jiang et al. 2020).

- Kendall tau-b (Kendall 1945, ties in both variables):
      tau_b = (P - Q) / sqrt((P + Q + T_x)(P + Q + T_y)),
  P / Q the concordant / discordant pairs, T_x (T_y) the pairs tied only in x (only in y).
- Interval of tau (ours): the 2.5 and 97.5 percentiles of tau over bootstrap resamples of
  the trainings (1,000 by default, seeded); resamples with a constant variable are skipped.
- Granulated tau (Jiang et al. 2020, "Fantastic generalization measures and where to find
  them", eq. 4): for hyper-parameter i, psi_i is the mean over the groups of trainings that
  share every other hyper-parameter value of the tau within the group (only i varies), and
  Psi = mean_i psi_i. Groups with fewer than two trainings or a constant measure/gap give
  no tau and are skipped; psi_i is None when no group of i qualifies.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from genlab.core.errors import ConfigError, DataError


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall tau-b of two equal-length sequences (nan when either is constant)."""
    if len(x) != len(y):
        raise DataError(f"kendall_tau needs equal lengths, got {len(x)} and {len(y)}")
    n = len(x)
    if n < 2:
        return math.nan
    concordant = discordant = tie_x = tie_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (x[i] > x[j]) - (x[i] < x[j])
            dy = (y[i] > y[j]) - (y[i] < y[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tie_x += 1
            elif dy == 0:
                tie_y += 1
            elif dx == dy:
                concordant += 1
            else:
                discordant += 1
    denom = math.sqrt((concordant + discordant + tie_x) * (concordant + discordant + tie_y))
    return (concordant - discordant) / denom if denom > 0 else math.nan


def _tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall tau-b by sign matrices: S / sqrt(pairs untied in x * pairs untied in y)."""
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    denom = math.sqrt(float(np.abs(sx).sum()) * float(np.abs(sy).sum()))
    return float((sx * sy).sum()) / denom if denom > 0 else math.nan


def kendall_tau_interval(x: Sequence[float], y: Sequence[float], *, resamples: int = 1000,
                         level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of Kendall tau-b over resampled pairs (nan if undefined)."""
    if len(x) != len(y):
        raise DataError(f"kendall_tau_interval needs equal lengths, got {len(x)} and {len(y)}")
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(seed)
    taus = []
    for _ in range(resamples):
        idx = rng.integers(0, len(xs), len(xs))
        t = _tau_b(xs[idx], ys[idx])
        if not math.isnan(t):
            taus.append(t)
    if not taus:
        return math.nan, math.nan
    tail = 100 * (1 - level) / 2
    return float(np.percentile(taus, tail)), float(np.percentile(taus, 100 - tail))


def granulated_tau(records: Sequence[dict], measure: str, gap: str,
                   hyperparameters: Sequence[str]) -> dict:
    """{"per_hyperparameter": {h: psi_h}, "granulated": Psi, "plain": tau} for one measure."""
    if not records:
        raise DataError("granulated_tau: no records")
    for key in (measure, gap, *hyperparameters):
        if any(key not in r for r in records):
            raise ConfigError(f"granulated_tau: some records lack {key!r}")
    per: dict[str, float | None] = {}
    for h in hyperparameters:
        others = [o for o in hyperparameters if o != h]
        groups: dict[tuple, list[dict]] = defaultdict(list)
        for r in records:
            groups[tuple(r[o] for o in others)].append(r)
        taus = []
        for members in groups.values():
            if len({m[h] for m in members}) < 2:
                continue
            t = kendall_tau([m[measure] for m in members], [m[gap] for m in members])
            if not math.isnan(t):
                taus.append(t)
        per[h] = sum(taus) / len(taus) if taus else None
    valid = [v for v in per.values() if v is not None]
    return {
        "plain": kendall_tau([r[measure] for r in records], [r[gap] for r in records]),
        "per_hyperparameter": per,
        "granulated": sum(valid) / len(valid) if valid else None,
    }


def tau_table(records: Sequence[dict], measures: Sequence[str], gap: str,
              hyperparameters: Sequence[str]) -> list[dict]:
    """One row per measure: plain tau (with its bootstrap interval), granulated tau and each
    psi_h against ``gap``."""
    rows = []
    for m in measures:
        res = granulated_tau(records, m, gap, hyperparameters)
        lo, hi = kendall_tau_interval([r[m] for r in records], [r[gap] for r in records])
        row = {"measure": m, "tau": res["plain"], "tau_lo": lo, "tau_hi": hi,
               "granulated": res["granulated"]}
        row.update({f"psi_{h}": v for h, v in res["per_hyperparameter"].items()})
        rows.append(row)
    return rows


#: the sanity row of every tau table: a "measure" drawn at random per training, whose tau
#: with any gap must be about 0 with an interval containing 0
RANDOM_MEASURE = "random_sanity"


def with_random_measure(records: Sequence[dict], seed: int = 0) -> list[dict]:
    """Copies of ``records`` with RANDOM_MEASURE: one uniform draw per record, in order."""
    draws = np.random.default_rng(seed).random(len(records))
    return [{**r, RANDOM_MEASURE: float(d)} for r, d in zip(records, draws, strict=True)]
