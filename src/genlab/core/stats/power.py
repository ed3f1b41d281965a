"""Power: the minimum detectable effect of a planned comparison and the seeds it needs, from
the variances of a pilot.

Paired design (n seeds, sd the standard deviation of the per-seed differences), for a
two-sided paired t test at significance alpha with the wanted power:

    MDE = (t_{1 - alpha/2, n - 1} + t_{power, n - 1}) * sd / sqrt(n)

Unpaired design (n_a and n_b runs, sd the pooled standard deviation, Student's t test):

    MDE = (t_{1 - alpha/2, n_a + n_b - 2} + t_{power, n_a + n_b - 2}) * sd * sqrt(1/n_a + 1/n_b)

The verdicts of genlab's paired comparisons come from the exact sign-flip test, which over n
seeds cannot give a two-sided p below 2 / 2^n (the observed signs, or all flipped, are the
most extreme of the 2^n): below the n where that reaches alpha no effect is detectable, and
``test="sign-flip"`` returns an infinite MDE there (five seeds at alpha 0.05: 2/32 = 0.0625).
From that n on its power is taken as the t test's, which the permutation test approaches
(Lehmann & Romano 2005, "Testing Statistical Hypotheses", 3rd ed., sec. 15.2).

This is the usual t approximation of the power of the t test: the noncentral t of the test
statistic under the effect is replaced by a central t shifted by its noncentrality, and the
far tail is neglected (Julious 2004, "Sample sizes for clinical trials with normal data",
Statistics in Medicine 23; Cohen 1988, "Statistical Power Analysis for the Behavioral
Sciences", 2nd ed., ch. 2). With the z quantiles in place of t it is the normal formula
n = (z_{1-alpha/2} + z_{power})^2 sd^2 / MDE^2. :func:`seeds_needed` inverts it: the
fewest seeds (runs per group) whose MDE is at most the wanted effect.

A pilot recorded only as an interval of a mean difference (its seeds gone) gives its sd by
inverting the paired t interval, mean +- t_{(1+level)/2, n-1} sd / sqrt(n):
:func:`sd_from_interval`. For an interval of another test (a bootstrap) it is the sd that a
t interval of that width would have: an approximation, and said so where it is used.

:func:`decision_size` turns an :class:`~genlab.core.stats.intervals.Estimate` over n units
(seeds, models) into the units a decision on it needs: its per-unit sd is se sqrt(n), se
half the width of its 68.27 % interval (a statistic whose variance falls as 1/n: a mean, a
difference of U-statistics such as two Kendall taus); "better" / "worse" needs the MDE at
the wanted power below |effect|, "no difference larger than margin" the interval's
half-width (the MDE at power 0.5) below margin - |effect|; the fewer of the two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as scipy_stats

from genlab.core.errors import ConfigError
from genlab.core.stats import checks
from genlab.core.stats.intervals import Estimate

DESIGNS = ("paired", "unpaired")
TESTS = ("t", "sign-flip")
#: the most seeds (runs per group) seeds_needed looks at
MAX_SEEDS = 1_000_000


def sign_flip_floor(n: int) -> float:
    """The smallest two-sided p the exact sign-flip test gives over ``n`` paired seeds."""
    return min(1.0, 2.0 / 2 ** checks.count("n", n, minimum=1))


def sign_flip_seeds(alpha: float) -> int:
    """The fewest seeds at which the exact sign-flip test can reject at ``alpha``."""
    checks.level(alpha, "alpha")
    return max(2, math.ceil(1 + math.log2(1 / alpha) - 1e-12))


def minimum_detectable_effect(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8,
                              design: str = "paired", n_b: int | None = None,
                              test: str = "t") -> float:
    """The smallest true effect that a two-sided t test at ``alpha`` finds with probability
    ``power``: paired over ``n`` seeds, or unpaired with ``n`` and ``n_b`` runs (n_b
    defaults to n). ``test="sign-flip"`` (paired): infinite where the sign-flip test cannot
    reach ``alpha`` at n (module doc)."""
    checks.positive("sd", sd, allow_zero=True)
    checks.level(alpha, "alpha")
    checks.level(power, "power")
    if design not in DESIGNS:
        raise ConfigError(f"design must be one of {', '.join(DESIGNS)}, got {design!r}")
    if test not in TESTS or (test == "sign-flip" and design != "paired"):
        raise ConfigError(f"test must be one of {', '.join(TESTS)} (sign-flip: paired "
                          f"designs), got {test!r} for a {design} design")
    checks.count("n", n, minimum=2)
    if test == "sign-flip" and sign_flip_floor(n) > alpha:
        return math.inf
    if design == "paired":
        df, scale = n - 1, 1 / math.sqrt(n)
    else:
        n_b = n if n_b is None else checks.count("n_b", n_b, minimum=2)
        df, scale = n + n_b - 2, math.sqrt(1 / n + 1 / n_b)
    factor = scipy_stats.t.ppf(1 - alpha / 2, df) + scipy_stats.t.ppf(power, df)
    return float(factor * sd * scale)


def seeds_needed(sd: float, effect: float, *, alpha: float = 0.05, power: float = 0.8,
                 design: str = "paired", test: str = "t") -> int:
    """The fewest seeds (paired) or runs per group (unpaired, equal groups) whose minimum
    detectable effect is at most ``effect`` (``test="sign-flip"``: never fewer than the
    test can reject with)."""
    checks.positive("effect", effect)
    checks.positive("sd", sd, allow_zero=True)

    def mde(n: int) -> float:
        return minimum_detectable_effect(sd, n, alpha=alpha, power=power, design=design,
                                         test=test)

    start = sign_flip_seeds(alpha) if test == "sign-flip" else 2
    if mde(start) <= effect:
        return start
    high = 2 * start
    while mde(high) > effect:
        high *= 2
        if high > MAX_SEEDS:
            raise ConfigError(f"effect {effect:g} needs more than {MAX_SEEDS:,} seeds at "
                              f"sd {sd:g}; expected a larger effect or a smaller sd")
    low = high // 2  # mde(low) > effect >= mde(high); the MDE falls as n grows
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if mde(mid) <= effect else (mid, high)
    return high


def pilot_sd(a: Sequence[float], b: Sequence[float] | None = None) -> float:
    """The standard deviation (n - 1 in the denominator) of a pilot's paired differences
    a - b (of ``a`` itself when ``b`` is None): the sd of the paired formulas."""
    if b is None:
        d = checks.sample("a", a, minimum=2)
    else:
        xa, xb = checks.paired("a", a, "b", b, minimum=2)
        d = xa - xb
    return float(np.std(d, ddof=1))


def sd_from_interval(low: float, high: float, n: int, *, level: float = 0.95) -> float:
    """The sd of n paired differences whose paired t interval at ``level`` is [low, high]."""
    checks.level(level)
    checks.count("n", n, minimum=2)
    if not (math.isfinite(low) and math.isfinite(high)) or high < low:
        raise ConfigError(f"interval must be finite with low <= high, got [{low}, {high}]")
    half = (high - low) / 2
    return float(half * math.sqrt(n) / scipy_stats.t.ppf((1 + level) / 2, n - 1))


def pooled_sd(a: Sequence[float], b: Sequence[float]) -> float:
    """The pooled standard deviation of two pilot samples: the sd of the unpaired formula."""
    xa, xb = checks.sample("a", a, minimum=2), checks.sample("b", b, minimum=2)
    na, nb = len(xa), len(xb)
    return math.sqrt(((na - 1) * xa.var(ddof=1) + (nb - 1) * xb.var(ddof=1)) / (na + nb - 2))


def decision_size(estimate: Estimate, *, alpha: float = 0.05, margin: float | None = None,
                  power: float = 0.8) -> int | None:
    """The fewest units (seeds, models) at which a decision on ``estimate`` is expected at
    two-sided ``alpha`` (module docstring); None when neither decision can be reached
    (effect 0 and no margin, or a zero se)."""
    low, high = estimate.interval(0.6827)  # +-1 se of a normal sampling distribution
    sd = (high - low) / 2 * math.sqrt(estimate.n)
    if not sd > 0:
        return None
    effect = abs(estimate.effect)
    sizes = []
    for wanted, at_power in ((effect, power), ((margin or 0.0) - effect, 0.5)):
        if wanted > 0:
            try:
                sizes.append(seeds_needed(sd, wanted, alpha=alpha, power=at_power))
            except ConfigError:  # more than MAX_SEEDS
                continue
    return min(sizes) if sizes else None
