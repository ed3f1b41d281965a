"""Rank correlation of measures with the generalization gap (Jiang et al. 2020).

- Kendall tau-b (Kendall 1945, ties in both variables):
      tau_b = (P - Q) / sqrt((P + Q + T_x)(P + Q + T_y)),
  P / Q the concordant / discordant pairs, T_x (T_y) the pairs tied only in x (only in y).
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
    """One row per measure: plain tau, granulated tau and each psi_h against ``gap``."""
    rows = []
    for m in measures:
        res = granulated_tau(records, m, gap, hyperparameters)
        row = {"measure": m, "tau": res["plain"], "granulated": res["granulated"]}
        row.update({f"psi_{h}": v for h, v in res["per_hyperparameter"].items()})
        rows.append(row)
    return rows
