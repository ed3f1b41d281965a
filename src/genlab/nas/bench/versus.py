"""One row of a bench against each of the others (`nas bench --versus ROW`): paired by seed.

For each metric (CIFAR-10 through the table when the space has one, the parameter-free edges
of the cell), ROW minus every other row over the seeds both have: the exact sign-flip
interval at ``VERSUS_LEVEL`` (genlab.core.stats), Holm's correction over the rows of the
metric's family, the verdict class ("better": ROW is better; higher accuracy, fewer
parameter-free edges), n, and the minimum detectable effect of a paired t test at that n and
80% power from the sd of the differences.

The primary comparison (:func:`primary_row`) is ROW minus its best rival alone (the row with
the highest CIFAR-10 mean over its seeds), uncorrected: whether the interval's lower end
clears ``-margin`` (``--versus-margin``: ROW no worse than the best rival by more than the
margin), and the minimum detectable effect at the bench's planned number of seeds from the sd
of the differences so far (a pilot over the first seeds sizes the rest).
"""

from __future__ import annotations

import statistics

from genlab.core.options import seed_text
from genlab.core.report import markdown_table
from genlab.core.stats import holm, judge, minimum_detectable_effect, sign_flip

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
    return [{"metric": name, "row": f"{versus} - {row}", "seeds": seed_text(seeds),
             "n": len(d), "effect": v.effect, "low": v.low, "high": v.high,
             "p (Holm)": v.p_corrected, "verdict": v.label,
             "MDE (80%)": minimum_detectable_effect(statistics.stdev(d), len(d), alpha=alpha,
                                                    test="sign-flip")}
            for (row, seeds, d), v in zip(pairs, verdicts, strict=True)]


def best_rival(records: list[dict], rows: list[str], versus: str) -> str | None:
    """The row other than ``versus`` with the highest CIFAR-10 mean over its seeds."""
    means = {row: statistics.fmean(v.values()) for row in rows
             if row != versus and (v := per_seed(records, row, "cifar10"))}
    return max(means, key=means.__getitem__) if means else None


def rival_row(records: list[dict], versus: str, rival: str, *, margin: float,
              planned_seeds: int) -> dict | None:
    """``versus`` minus ``rival`` on CIFAR-10 alone, uncorrected: the sign-flip interval,
    whether its lower end clears ``-margin``, and the MDE at ``planned_seeds`` from the sd of
    the differences so far; None before two paired seeds exist."""
    mine, theirs = (per_seed(records, row, "cifar10") for row in (versus, rival))
    seeds = sorted(set(mine) & set(theirs))
    if len(seeds) < 2:
        return None
    d = [mine[s] - theirs[s] for s in seeds]
    v = judge(sign_flip(d), level=VERSUS_LEVEL, margin=margin)
    mde = minimum_detectable_effect(statistics.stdev(d), planned_seeds,
                                    alpha=1 - VERSUS_LEVEL, test="sign-flip")
    return {"row": f"{versus} - {rival}", "seeds": seed_text(seeds), "n": len(d),
            "effect": v.effect, "low": v.low, "high": v.high, "p": v.p, "verdict": v.label,
            f"low > -{margin:g}": "met" if v.low is not None and v.low > -margin else "missed",
            f"MDE (80%, n={planned_seeds})": mde, "rival": rival}


def primary_row(records: list[dict], rows: list[str], versus: str, *, margin: float,
                planned_seeds: int) -> dict | None:
    """``versus`` minus its best rival on CIFAR-10, uncorrected (module doc); None before two
    paired seeds exist."""
    if not per_seed(records, versus, "cifar10"):
        return None
    best = best_rival(records, rows, versus)
    row = best and rival_row(records, versus, best, margin=margin, planned_seeds=planned_seeds)
    return row and {**row, "row": f"{row['row']} (best rival)"}


def versus_rows(records: list[dict], rows: list[str], versus: str) -> list[dict]:
    """The comparisons of every metric the records hold."""
    return [r for metric in VERSUS_METRICS
            for r in versus_family(records, rows, versus, metric)]


def versus_markdown(table: list[dict], versus: str, primary: dict | None = None) -> str:
    """The comparisons as the report's section, the primary comparison first."""
    head = ""
    if primary is not None:
        head = (f"\n### The primary comparison: {versus} minus its best rival (the highest "
                f"CIFAR-10 mean), paired by seed (sign-flip, {100 * VERSUS_LEVEL:.0f}% "
                "interval, uncorrected; MDE at the bench's seeds from the sd so far)\n\n"
                + markdown_table([{k: v for k, v in primary.items() if k != "rival"}],
                                 digits=2) + "\n")
    return head + (f"\n### {versus} minus every other row, paired by seed (sign-flip, "
            f"{100 * VERSUS_LEVEL:.0f}% intervals, Holm over the rows of each metric; MDE: the "
            "minimum detectable effect at n and 80% power at Holm's first alpha, inf where "
            "the sign-flip test cannot reach it at n)\n\n"
            + markdown_table(table, digits=2))
