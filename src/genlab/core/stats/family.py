"""Verdicts: what an interval decides, alone or within a family corrected by Holm's method.

A verdict is one of
- "better" / "worse": the interval (at the corrected level, in a family) excludes 0 and
  the corrected p-value is at most 1 - level; which of the two follows from the sign of the
  effect and ``higher_is_better``;
- "no difference larger than <margin>": the interval lies inside [-margin, margin];
- "undecided": neither;
- "not testable": the comparison cannot be made (the reason is given).
The classes are tried in this order: an interval that excludes 0 and lies inside the margin
reads "better" or "worse". For a test whose p-value and interval can disagree at the edge
(the bootstrap's percentiles are interpolated), "better" or "worse" needs both.

Holm's correction (Holm 1979, "A simple sequentially rejective multiple test procedure",
Scand. J. Statist. 6): with alpha = 1 - level and the m p-values ordered p_(1) <= ... <=
p_(m), the adjusted p-value of the i-th is max_{j <= i} min(1, (m - j + 1) p_(j)), and a
member is rejected when its adjusted p-value is <= alpha. The interval of the i-th member
is taken at level 1 - alpha / (m - i + 1), the level its step tests at; once a step fails
to reject, the members after it take that step's level (so their intervals, for a test whose
interval and p-value agree, contain 0). The family's size is printed with each verdict
("Holm 3").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from genlab.core.errors import ConfigError
from genlab.core.stats import checks
from genlab.core.stats.intervals import Estimate

BETTER, WORSE, NO_DIFFERENCE = "better", "worse", "no difference"
UNDECIDED, NOT_TESTABLE = "undecided", "not testable"
#: the verdict classes, as Verdict.kind holds them
KINDS = (BETTER, WORSE, NO_DIFFERENCE, UNDECIDED, NOT_TESTABLE)


@dataclass(frozen=True)
class Verdict:
    """One comparison's outcome: effect, interval (low, high) at ``level``, n, test,
    p-value (``p_corrected`` and ``correction`` when judged within a family), its class
    ``kind`` (one of KINDS), the ``margin`` of "no difference", and the ``reason`` of a
    "not testable" one."""

    effect: float | None
    low: float | None
    high: float | None
    level: float | None
    n: int | None
    test: str
    kind: str
    p: float | None = None
    p_corrected: float | None = None
    correction: str = ""
    margin: float | None = None
    reason: str = ""

    @property
    def interval(self) -> tuple[float | None, float | None]:
        return self.low, self.high

    @property
    def label(self) -> str:
        """The class in words ("no difference larger than 0.1" names its margin)."""
        if self.kind == NO_DIFFERENCE:
            return f"no difference larger than {self.margin:g}"
        return self.kind

    def line(self, digits: int = 2) -> str:
        """One line: ``+0.42 [0.10, 0.75] (n=6, paired sign-flip exact, Holm 3) better``."""
        if self.kind == NOT_TESTABLE:
            detail = ", ".join(x for x in (f"n={self.n}" if self.n else "", self.test) if x)
            return f"not testable: {self.reason}" + (f" ({detail})" if detail else "")
        about = ", ".join(x for x in (f"n={self.n}", self.test, self.correction) if x)
        return (f"{self.effect:+.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}] "
                f"({about}) {self.label}")

    def __str__(self) -> str:
        return self.line()


def classify(low: float, high: float, *, margin: float | None = None,
             higher_is_better: bool = True) -> str:
    """The class an interval decides on its own (see the module docstring)."""
    if low > 0 or high < 0:
        return BETTER if (low > 0) == higher_is_better else WORSE
    if margin is not None and -margin <= low and high <= margin:
        return NO_DIFFERENCE
    return UNDECIDED


def not_testable(reason: str, *, test: str = "", n: int | None = None) -> Verdict:
    """The verdict of a comparison that cannot be made (the stand-in lacks the room or the
    premise); ``reason`` says why, in a few words."""
    if not reason.strip():
        raise ConfigError("reason must say why the comparison is not testable")
    return Verdict(None, None, None, None, n, test, NOT_TESTABLE, reason=reason.strip())


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given."""
    ps = checks.sample("pvalues", pvalues)
    if ((ps < 0) | (ps > 1)).any():
        raise ConfigError(f"pvalues must lie in [0, 1], got {ps.tolist()}")
    m = len(ps)
    adjusted, running = [0.0] * m, 0.0
    for step, i in enumerate(sorted(range(m), key=lambda j: ps[j])):
        running = max(running, min(1.0, (m - step) * float(ps[i])))
        adjusted[i] = running
    return adjusted


def _verdict(est: Estimate, kind_level: float, p_corrected: float | None,
             correction: str, margin: float | None, higher_is_better: bool,
             alpha: float) -> Verdict:
    low, high = est.interval(kind_level)
    kind = classify(low, high, margin=margin, higher_is_better=higher_is_better)
    p_used = est.p if p_corrected is None else p_corrected
    if kind in (BETTER, WORSE) and not p_used <= alpha + 1e-12:
        kind = UNDECIDED  # an interval that excludes 0 while the test does not reject
    return Verdict(est.effect, low, high, kind_level, est.n, est.test, kind, p=est.p,
                   p_corrected=p_corrected, correction=correction, margin=margin)


def judge(estimate: Estimate, *, level: float = 0.95, margin: float | None = None,
          higher_is_better: bool = True) -> Verdict:
    """The verdict of one comparison, uncorrected (a family of one)."""
    checks.level(level)
    if margin is not None:
        checks.positive("margin", margin, allow_zero=True)
    return _verdict(estimate, level, None, "", margin, higher_is_better, 1 - level)


def holm(estimates: Sequence[Estimate], *, level: float = 0.95, margin: float | None = None,
         higher_is_better: bool = True) -> list[Verdict]:
    """The verdicts of a family of comparisons under Holm's correction, in the order given."""
    checks.level(level)
    if margin is not None:
        checks.positive("margin", margin, allow_zero=True)
    if not len(estimates):
        raise ConfigError("holm needs at least one estimate, got none")
    m, alpha = len(estimates), 1 - level
    adjusted = holm_adjust([e.p for e in estimates])
    order = sorted(range(m), key=lambda j: estimates[j].p)
    verdicts: list[Verdict | None] = [None] * m
    step_level, stopped = level, False
    for step, i in enumerate(order):
        if not stopped:
            step_level = 1 - alpha / (m - step)
        v = _verdict(estimates[i], step_level, adjusted[i], f"Holm {m}", margin,
                     higher_is_better, alpha)
        stopped = stopped or v.kind not in (BETTER, WORSE)
        verdicts[i] = v
    return [v for v in verdicts if v is not None]


def verdict_counts(verdicts: Sequence[Verdict]) -> dict[str, int]:
    """How many verdicts fall in each class (every class listed, zeros included)."""
    return {k: sum(v.kind == k for v in verdicts) for k in KINDS}

