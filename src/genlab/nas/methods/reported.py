"""Figures the methods' authors report, cited beside genlab's bench tables (never compared).

These are CIFAR-10 searches on GPUs at the authors' budgets, judged on the real NAS-Bench-201
(test accuracy, %, CIFAR-10 / CIFAR-100 / ImageNet16-120); genlab's bench rows are digits-proxy
searches judged through the table, so the two are not comparable: the reported rows say what a
method reaches at full scale, the bench says what it does at the proxy.
"""

from __future__ import annotations

# method row -> (CIFAR-10, CIFAR-100, ImageNet16-120 test accuracy %, source)
REPORTED_NB201 = {
    "darts": (54.30, 15.61, 16.32, "NAS-Bench-201 paper (Dong & Yang, ICLR-20), DARTS-V1"),
    "gdas": (93.61, 70.70, 41.71, "NAS-Bench-201 paper (Dong & Yang, ICLR-20)"),
    "darts-minus": (93.80, 71.53, 45.12, "DARTS- paper (Chu et al., ICLR-21)"),
    "pc-darts": (93.41, 67.48, 41.31, "DrNAS README (xiangning-chen/DrNAS)"),
    "drnas": (94.36, 73.51, 46.34, "DrNAS README (xiangning-chen/DrNAS)"),
    "beta": (94.36, 73.51, 46.34, "beta-DARTS paper (Ye et al., CVPR-22)"),
    "optimum": (94.37, 73.51, 47.31, "the best cell of NAS-Bench-201 (its test accuracies)"),
}


def reported_rows(space: str) -> list[dict]:
    """The cited rows of ``space``'s bench table (NB201 only: the others report errors of
    retrained networks, which the proxy bench does not measure)."""
    if space != "nb201":
        return []
    return [{"row": f"reported: {name}", "C10": f"{c10:.2f}",
             "C100": f"{c100:.2f}", "IN16": f"{in16:.2f}", "source": source}
            for name, (c10, c100, in16, source) in REPORTED_NB201.items()]


STANDING_RESAMPLES, STANDING_LEVEL, STANDING_SEED = 2000, 0.90, 1


def standing(per_row: dict[str, dict], per_seed: dict[str, list[float]] | None = None
             ) -> dict | None:
    """How the bench's rows rank against their published standing: Kendall's tau-b between
    each row's mean CIFAR-10 accuracy through the table (``per_row``: bench.aggregate's) and
    its reported figure, over the rows that have both (None under three such rows).

    With ``per_seed`` (row -> its seeds' CIFAR-10 accuracies), a percentile bootstrap
    interval over seeds (``STANDING_LEVEL``): each resample redraws every row's seeds with
    replacement, within the row, and recomputes the rows' means and tau; resamples where tau
    is undefined are left out (genlab.core.stats.ranks)."""
    import numpy as np

    from genlab.core.stats.ranks import percentile_interval, tau_b

    pairs = [(row, agg["cifar10_mean"], REPORTED_NB201[row][0])
             for row, agg in per_row.items()
             if row in REPORTED_NB201 and agg.get("cifar10_mean") is not None]
    if len(pairs) < 3:
        return None
    reported = np.array([p[2] for p in pairs])
    tau = tau_b(np.array([p[1] for p in pairs]), reported)
    out = {"tau": float(tau), "rows": [{"row": r, "proxy C10": c, "reported C10": rep}
                                       for r, c, rep in pairs]}
    if per_seed and all(per_seed.get(r) for r, _, _ in pairs):
        rng = np.random.default_rng(STANDING_SEED)
        seeds = [np.asarray(per_seed[r], float) for r, _, _ in pairs]
        boot = np.array([tau_b(np.array([v[rng.integers(0, len(v), len(v))].mean()
                                         for v in seeds]), reported)
                         for _ in range(STANDING_RESAMPLES)])
        low, high = percentile_interval(boot, STANDING_LEVEL)
        out.update(low=low, high=high, level=STANDING_LEVEL,
                   seeds=min(len(v) for v in seeds))
    return out


def reachable_tau(per_seed: dict[str, list[float]], rows: list[str], seeds: int,
                  most_open: int = 3) -> float | None:
    """The highest tau of ``standing`` that a bench short of its ``seeds`` per row can still
    reach: each of ``rows`` with fewer seeds may end with any mean its missing seeds allow
    (each anywhere from 0 to 100 %), and every order of those open means among the complete
    rows' is tried (values between and at the fixed means, so ties too). None with more than
    ``most_open`` open rows (too many orders to try)."""
    import itertools
    import statistics

    import numpy as np

    from genlab.core.stats.ranks import tau_b

    fixed = {r: statistics.fmean(per_seed[r]) for r in rows if len(per_seed.get(r, [])) >= seeds}
    spans = {}
    for r in rows:
        if r not in fixed:
            done = per_seed.get(r, [])
            spans[r] = (sum(done) / seeds, (sum(done) + 100.0 * (seeds - len(done))) / seeds)
    if len(spans) > most_open:
        return None
    marks = sorted({0.0, 100.0, *fixed.values(), *(x for s in spans.values() for x in s)})
    points = sorted({float(x) for a, b in itertools.pairwise(marks)
                     for x in np.linspace(a, b, len(spans) + 2)})
    options = [[x for x in points if lo <= x <= hi] for lo, hi in spans.values()]
    reported = np.array([REPORTED_NB201[r][0] for r in [*fixed, *spans]])
    return max(float(tau_b(np.array([*fixed.values(), *choice]), reported))
               for choice in itertools.product(*options))


def random_cells(table, per_row: dict[str, dict]) -> dict:
    """Where the bench's rows stand among random cells of the space: the exact distribution
    of a uniformly drawn cell's CIFAR-10 accuracy over ``table`` (NB201Table.chance: every
    cell of the table once, not a few draws), its mean and quantiles, and for each row with a
    CIFAR-10 mean the share of random cells at least as accurate."""
    dist = table.chance("cifar10")
    return {"cells": len(table), "mean": dist.mean(), "median": dist.quantile(0.5),
            "q10": dist.quantile(0.1), "q90": dist.quantile(0.9),
            "at_least_row": {row: dist.at_least(agg["cifar10_mean"])
                             for row, agg in per_row.items()
                             if agg.get("cifar10_mean") is not None}}


__all__ = ["REPORTED_NB201", "random_cells", "reported_rows", "standing"]
