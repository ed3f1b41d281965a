"""Means, the paired comparisons of optimisers that the studies' tables print, and their seed
lists.

Accuracies are percentages (0-100) throughout.

Over seeds: mean and sample standard deviation (ddof = 1), the tables' ``mean ± std`` cells.

A comparison of two optimisers is paired by seed: each guided optimiser (every optimiser of
the study but the references SGD, SAM and ASAM) minus SAM and minus SGD, on the seeds both
finished, judged through genlab.core.stats: the paired sign-flip test (exact over the 2^n
sign flips; with fewer than six seeds its 95% interval is unbounded, so no verdict other
than "undecided" is possible there), Holm's correction over every comparison of the study
(its family), the verdict class, n, and the minimum detectable effect at that n: the paired
t formula of genlab.core.stats.power at 80% power and the family's strictest level
(two-sided alpha = 0.05 / family size), from the observed standard deviation of the
per-seed differences. A comparison with fewer than two seeds in common is "not testable".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from genlab.core.report import markdown_table
from genlab.core.seeding import seed_list  # noqa: F401 - the studies import it from here
from genlab.core.stats import (
    Estimate,
    Verdict,
    holm,
    judge,
    minimum_detectable_effect,
    not_testable,
    paired_difference,
    pilot_sd,
)

#: the optimisers every guided one is set against (in this order)
REFERENCES = ("sam", "sgd")
#: the optimisers that are not guided by nonuniformity (the baselines)
BASELINES = ("sgd", "sam", "asam")
#: the paired test of every comparison (a name of genlab.core.stats.PAIRED_TESTS)
TEST = "sign-flip"
LEVEL = 0.95
POWER = 0.8
#: the columns of a comparisons table
COMPARISON_COLUMNS = ["setting", "optimizer", "against", "difference", "low", "high", "n",
                      "p", "p_holm", "verdict", "mde"]


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


def per_seed(records: Sequence[dict], key: str = "test_acc") -> dict[int, float]:
    """{seed: value} of the records that hold a finite ``key`` (a diverged run holds none)."""
    out = {}
    for r in records:
        v = r.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[int(r["seed"])] = float(v)
    return out


def guided(optimizers: Sequence[str]) -> list[str]:
    """The guided optimisers among ``optimizers`` (those not in BASELINES), in order."""
    return [o for o in optimizers if o not in BASELINES]


def compare(values: Mapping[str, Mapping[str, Mapping[int, float]]], *,
            references: Sequence[str] = REFERENCES, higher_is_better: bool = True,
            level: float = LEVEL, power: float = POWER) -> list[dict]:
    """Every guided optimiser minus each reference, paired by seed, Holm over all of them.

    ``values``: {setting: {optimizer: {seed: value}}} (one setting "" for a study that has
    one). One row per (setting, guided optimiser, reference present in that setting), in
    that order: setting, optimizer, against, difference (mean of the per-seed
    differences), low/high (the interval at Holm's step level), n (seeds in common), test,
    p, p_holm, kind (the verdict class), verdict (the class in words), line (effect,
    interval, n, test, correction and class in one line), sd (of the per-seed differences)
    and mde (the minimum detectable effect at n, module docstring). ``higher_is_better``:
    whether a positive difference reads "better".
    """
    pairs: list[tuple[str, str, str, list[float], list[float]]] = []
    for setting, by_opt in values.items():
        for opt in guided(list(by_opt)):
            for ref in references:
                if ref not in by_opt:
                    continue
                common = [s for s in by_opt[opt] if s in by_opt[ref]]
                pairs.append((setting, opt, ref, [by_opt[opt][s] for s in common],
                              [by_opt[ref][s] for s in common]))
    testable = [i for i, p in enumerate(pairs) if len(p[3]) >= 2]
    estimates: dict[int, Estimate] = {i: paired_difference(pairs[i][3], pairs[i][4],
                                                           test=TEST) for i in testable}
    verdicts: dict[int, Verdict] = {}
    if len(testable) > 1:
        verdicts.update(zip(testable, holm([estimates[i] for i in testable], level=level,
                                           higher_is_better=higher_is_better), strict=True))
    elif testable:
        verdicts[testable[0]] = judge(estimates[testable[0]], level=level,
                                      higher_is_better=higher_is_better)
    alpha = (1 - level) / max(len(testable), 1)
    rows = []
    for i, (setting, opt, ref, a, b) in enumerate(pairs):
        v = verdicts.get(i) or not_testable("fewer than two seeds in common", test=TEST,
                                            n=len(a))
        sd = pilot_sd(a, b) if len(a) >= 2 else None
        rows.append({"setting": setting, "optimizer": opt, "against": ref,
                     "difference": v.effect, "low": v.low, "high": v.high, "n": len(a),
                     "test": v.test, "p": v.p, "p_holm": v.p_corrected, "kind": v.kind,
                     "verdict": v.label, "line": v.line(), "sd": sd,
                     "mde": (minimum_detectable_effect(sd, len(a), alpha=alpha, power=power,
                                                       test=TEST) if sd is not None else None)})
    return rows


def comparison_block(what: str, rows: list[dict]) -> tuple[str, list[dict], list[str]]:
    """The comparisons as a study's report prints them: (title, rows, columns), the p-values
    to three significant digits whatever the table's decimals (0.0625 is not 0.1)."""
    shown = [{**r, "p": p_text(r["p"]), "p_holm": p_text(r["p_holm"])} for r in rows]
    return comparison_title(what, rows), shown, COMPARISON_COLUMNS


def comparison_markdown(what: str, rows: list[dict]) -> str:
    """The comparisons as a study's table.md section."""
    title, shown, columns = comparison_block(what, rows)
    return f"\n### {title}\n\n" + markdown_table(shown, columns, digits=2)


def p_text(p: float | None) -> str | None:
    """A p-value to three significant digits (None: not tested)."""
    return None if p is None else f"{p:.3g}"


def comparison_title(what: str, rows: list[dict]) -> str:
    """The title of a comparisons table: what is compared, the test and the family."""
    return (f"{what}: each guided optimiser minus SAM and minus SGD, paired by seed ({TEST} "
            f"test, Holm over the study's {len(rows)} comparisons; mde: the minimum detectable "
            f"effect at n, {POWER:.0%} power, alpha 0.05/{max(len(rows), 1)}; inf: the {TEST} "
            f"test cannot reach that alpha at n)")
