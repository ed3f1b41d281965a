"""One row of a bench against each of the others (`nas bench --versus ROW`): paired by seed.

For each metric (CIFAR-10 through the table when the space has one, the parameter-free edges
of the cell), ROW minus every other row over the seeds both have: the exact sign-flip
interval at ``VERSUS_LEVEL`` (genlab.core.stats), Holm's correction over the rows of the
metric's family, the verdict class ("better": ROW is better; higher accuracy, fewer
parameter-free edges), n, and the minimum detectable effect of a paired t test at that n and
80% power from the sd of the differences.
"""

from __future__ import annotations

import statistics

from genlab.core.report import markdown_table
from genlab.core.stats import holm, minimum_detectable_effect, sign_flip

VERSUS_LEVEL = 0.90
#: metric of a record -> (its name in the table, higher is better)
VERSUS_METRICS = {"cifar10": ("CIFAR-10 (%)", True), "param_free_ops": ("p-free edges", False)}


def per_seed(records: list[dict], row: str, metric: str) -> dict[int, float]:
    """{seed: value} of ``row``'s records that have ``metric``."""
    return {int(r["seed"]): float(r[metric]) for r in records
            if r["reg"] == row and r.get(metric) is not None}


def versus_family(records: list[dict], rows: list[str], versus: str, metric: str) -> list[dict]:
    """``versus`` minus every other row on ``metric``, judged as one family."""
    mine = per_seed(records, versus, metric)
    pairs = []
    for row in rows:
        theirs = per_seed(records, row, metric)
        seeds = sorted(set(mine) & set(theirs))
        if row != versus and len(seeds) >= 2:
            pairs.append((row, seeds, [mine[s] - theirs[s] for s in seeds]))
    if not pairs:
        return []
    name, higher = VERSUS_METRICS[metric]
    estimates = [sign_flip(d) for _, _, d in pairs]
    verdicts = holm(estimates, level=VERSUS_LEVEL, higher_is_better=higher)
    alpha = (1 - VERSUS_LEVEL) / len(pairs)  # Holm's first step
    return [{"metric": name, "row": f"{versus} - {row}", "seeds": f"{seeds[0]}-{seeds[-1]}"
             if seeds == list(range(seeds[0], seeds[-1] + 1)) else ",".join(map(str, seeds)),
             "n": len(d), "effect": v.effect, "low": v.low, "high": v.high,
             "p (Holm)": v.p_corrected, "verdict": v.label,
             "MDE (80%)": minimum_detectable_effect(statistics.stdev(d), len(d), alpha=alpha,
                                                    test="sign-flip")}
            for (row, seeds, d), v in zip(pairs, verdicts, strict=True)]


def versus_rows(records: list[dict], rows: list[str], versus: str) -> list[dict]:
    """The comparisons of every metric the records hold."""
    return [r for metric in VERSUS_METRICS
            for r in versus_family(records, rows, versus, metric)]


def versus_markdown(table: list[dict], versus: str) -> str:
    """The comparisons as the report's section."""
    return (f"\n### {versus} minus every other row, paired by seed (sign-flip, "
            f"{100 * VERSUS_LEVEL:.0f}% intervals, Holm over the rows of each metric; MDE: the "
            "minimum detectable effect at n and 80% power at Holm's first alpha, inf where "
            "the sign-flip test cannot reach it at n)\n\n"
            + markdown_table(table, digits=2))
