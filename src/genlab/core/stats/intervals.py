"""Intervals and p-values of an effect: one method against another on the same seeds (paired)
or on separate runs (unpaired).

Every test returns an :class:`Estimate`: the effect, n, the test's name, the two-sided
p-value of a zero effect and the interval at any level (a family's correction asks for its
intervals at a corrected level, :mod:`genlab.core.stats.family`).

- Paired sign-flip permutation test of the mean difference (``sign-flip``; Fisher's
  randomisation test, Good 2005, "Permutation, Parametric, and Bootstrap Tests of
  Hypotheses", 3rd ed.): under "no effect" each difference is as likely to carry either
  sign, so the 2^n sign flips of the differences are equally likely. They are all listed
  for n <= 16 ("exact"); above, ``draws`` random flips (seeded) plus the observed one.
  The interval is the inversion of the two one-sided tests of a shift delta at (1 -
  level)/2 each: flipping the differences d_i - delta, the observed sum is exceeded exactly
  when the mean of the flipped subset lies below delta, so the bounds are order statistics
  of the subset means (Hartigan 1969, "Using subsample values as typical values", JASA 64:
  with K = floor((1 - level)/2 * 2^n), the interval between the K-th smallest and the K-th
  largest of the 2^n - 1 subset means covers the centre of a symmetric distribution with
  probability 1 - 2K / 2^n >= level). With few pairs K is 0 and the interval is infinite:
  six pairs are the fewest whose flips can reach p < 0.05.
- Unpaired permutation test of a difference of means (``permutation``; Good 2005): the
  C(n_a + n_b, n_a) relabellings of the pooled runs, all for up to 2^16 of them, else
  ``draws`` random ones. Its interval inverts the test of a shift delta in the same way:
  a relabelling that swaps the runs A' of a with as many runs B' of b exceeds the observed
  difference exactly when mean(A') - mean(B') lies below delta.
- Paired percentile bootstrap of the mean difference (``bootstrap``; Efron & Tibshirani
  1993, "An Introduction to the Bootstrap", the percentile interval): the (1 - level)/2 and
  (1 + level)/2 percentiles (numpy's linear interpolation) of the means of resamples drawn
  with replacement. When n^n <= ``resamples`` every one of the n^n resamples is listed
  (the exhaustive bootstrap, Fisher & Hall 1991, "Bootstrap algorithms for small samples",
  J. Stat. Plan. Inference 27); otherwise ``resamples`` are drawn (seeded). Its p-value is
  twice the smaller share of resampled means at or beyond 0 on either side.
  :func:`bootstrap_estimate` gives the same interval and p-value for any statistic whose
  bootstrap replicates a caller computed (a difference of two rank correlations over
  resampled models).
- Paired and unpaired (pooled-variance, Student) t tests (``t``): the tests whose power
  :mod:`genlab.core.stats.power` computes.

For the permutation tests p = 2 min(P_low, P_high), capped at 1, where P_low (P_high) is the
share of the listed sign flips or relabellings whose statistic is at least (at most) the
observed one; the interval at level L excludes 0 exactly when p <= 1 - L.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as scipy_stats

from genlab.core.registry import Registry
from genlab.core.stats import checks

#: the most sign flips or relabellings listed one by one; above, random draws
EXACT_LIMIT = 2 ** 16


@dataclass(frozen=True)
class Estimate:
    """An effect with its test: ``p`` is the two-sided p-value of a zero effect and
    ``bounds(level)`` gives the interval (low, high) at any level in (0, 1)."""

    effect: float
    n: int
    test: str
    p: float
    bounds: Callable[[float], tuple[float, float]] = field(repr=False, compare=False)

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """(low, high) at ``level``."""
        return self.bounds(checks.level(level))


def _inverted(low_breaks: np.ndarray, high_breaks: np.ndarray, total: int
              ) -> tuple[float, Callable[[float], tuple[float, float]]]:
    """p-value and interval of a permutation test by inversion.

    ``low_breaks`` (``high_breaks``): for each listed permutation, the shift delta below
    (above) which its statistic exceeds (falls short of) the observed one, -inf (+inf) for a
    permutation equal to the observed labelling; ``total`` counts them all.
    """
    low_sorted = np.sort(low_breaks)
    high_sorted = np.sort(high_breaks)
    p_low = float((low_sorted <= 0).sum()) / total
    p_high = float((high_sorted >= 0).sum()) / total
    p = min(1.0, 2 * min(p_low, p_high))

    def bounds(level: float) -> tuple[float, float]:
        k = math.floor((1 - level) / 2 * total + 1e-9)
        return float(low_sorted[k]), float(high_sorted[len(high_sorted) - 1 - k])

    return p, bounds


def _subsets(n: int) -> np.ndarray:
    """(2^n, n) 0/1 rows: every subset of n items (row 0: the empty one)."""
    codes = np.arange(2 ** n)[:, None]
    return ((codes >> np.arange(n)) & 1).astype(float)


def _subset_mean_breaks(flipped: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints of the flips in ``flipped`` (0/1 rows: which differences change sign)."""
    size = flipped.sum(axis=1)
    sums = flipped @ d
    means = np.divide(sums, size, out=np.zeros_like(sums), where=size > 0)
    return np.where(size > 0, means, -np.inf), np.where(size > 0, means, np.inf)


def sign_flip(differences: Sequence[float], *, draws: int = 10_000, seed: int = 0,
              exact_limit: int = EXACT_LIMIT) -> Estimate:
    """Sign-flip permutation test and interval of the mean of paired differences."""
    d = checks.sample("differences", differences)
    checks.count("draws", draws)
    n = len(d)
    if 2 ** n <= exact_limit:
        flipped = _subsets(n)  # row 0, no flip: the observed signs
        low, high = _subset_mean_breaks(flipped, d)
        total, test = 2 ** n, "paired sign-flip exact"
    else:
        flipped = (np.random.default_rng(seed).random((draws, n)) < 0.5).astype(float)
        low, high = _subset_mean_breaks(flipped, d)
        low, high = np.append(low, -np.inf), np.append(high, np.inf)  # the observed signs
        total, test = draws + 1, f"paired sign-flip, {draws} draws"
    p, bounds = _inverted(low, high, total)
    return Estimate(float(d.mean()), n, test, p, bounds)


def unpaired_permutation(a: Sequence[float], b: Sequence[float], *, draws: int = 10_000,
                         seed: int = 0, exact_limit: int = EXACT_LIMIT) -> Estimate:
    """Permutation test and interval of mean(a) - mean(b) for separate runs."""
    xa, xb = checks.sample("a", a), checks.sample("b", b)
    checks.count("draws", draws)
    na, nb = len(xa), len(xb)
    # a relabelling: which n_a of the pooled runs form the new a
    if math.comb(na + nb, na) <= exact_limit:
        chosen = np.array(list(itertools.combinations(range(na + nb), na)), dtype=int)
        test = "unpaired permutation exact"
    else:
        rng = np.random.default_rng(seed)
        chosen = np.sort(rng.random((draws, na + nb)).argsort(axis=1)[:, :na], axis=1)
        chosen = np.vstack([chosen, np.arange(na)[None, :]])  # the observed labelling
        test = f"unpaired permutation, {draws} draws"
    in_a = np.zeros((len(chosen), na + nb), dtype=bool)
    np.put_along_axis(in_a, chosen, True, axis=1)
    moved_out = (~in_a[:, :na]).astype(float)  # A': runs of a relabelled as b
    moved_in = in_a[:, na:].astype(float)  # B': runs of b relabelled as a
    k = moved_out.sum(axis=1)
    safe = np.where(k > 0, k, 1)
    breaks = (moved_out @ xa) / safe - (moved_in @ xb) / safe
    low, high = np.where(k > 0, breaks, -np.inf), np.where(k > 0, breaks, np.inf)
    p, bounds = _inverted(low, high, len(chosen))
    return Estimate(float(xa.mean() - xb.mean()), na + nb, test, p, bounds)


def _bootstrap_indices(n: int, resamples: int, seed: int) -> tuple[np.ndarray, bool]:
    """(rows, n) indices of the resamples: all n^n when n^n <= resamples, else drawn."""
    if n <= 9 and n ** n <= resamples:  # 9^9 resamples is the most ever listed
        codes = np.arange(n ** n)[:, None]
        return (codes // n ** np.arange(n)) % n, True
    return np.random.default_rng(seed).integers(0, n, (resamples, n)), False


def bootstrap_estimate(effect: float, replicates: Sequence[float] | np.ndarray, n: int,
                       test: str) -> Estimate:
    """The Estimate of ``effect`` from its bootstrap replicates (the effect computed on each
    resample; those that are not finite numbers are skipped): the percentile interval and
    p = twice the smaller share of replicates at or beyond 0 on either side, capped at 1.
    ``n`` counts the resampled units (seeds, models); ``test`` names the bootstrap."""
    reps = np.asarray(replicates, dtype=float).ravel()
    reps = np.sort(reps[np.isfinite(reps)])
    checks.sample("replicates (finite ones)", reps)
    share_low, share_high = float((reps <= 0).mean()), float((reps >= 0).mean())
    p = min(1.0, 2 * min(share_low, share_high))

    def bounds(level: float) -> tuple[float, float]:
        tail = 100 * (1 - level) / 2
        return float(np.percentile(reps, tail)), float(np.percentile(reps, 100 - tail))

    return Estimate(float(effect), int(n), test, p, bounds)


def paired_bootstrap(differences: Sequence[float], *, resamples: int = 10_000,
                     seed: int = 0) -> Estimate:
    """Percentile bootstrap interval and p-value of the mean of paired differences."""
    d = checks.sample("differences", differences)
    checks.count("resamples", resamples)
    n = len(d)
    idx, exhaustive = _bootstrap_indices(n, resamples, seed)
    test = ("paired bootstrap exhaustive" if exhaustive
            else f"paired bootstrap, {resamples} resamples")
    return bootstrap_estimate(float(d.mean()), d[idx].mean(axis=1), n, test)


def _t_estimate(effect: float, se: float, df: int, n: int, test: str) -> Estimate:
    """Estimate of a t statistic effect / se with df degrees of freedom."""
    if se == 0:
        p = 1.0 if effect == 0 else 0.0
    else:
        p = float(2 * scipy_stats.t.sf(abs(effect) / se, df))

    def bounds(level: float) -> tuple[float, float]:
        half = float(scipy_stats.t.ppf((1 + level) / 2, df)) * se
        return effect - half, effect + half

    return Estimate(effect, n, test, p, bounds)


def paired_t(differences: Sequence[float]) -> Estimate:
    """Paired t test and interval: mean(d) +- t_{(1+level)/2, n-1} sd(d) / sqrt(n)."""
    d = checks.sample("differences", differences, minimum=2)
    n = len(d)
    return _t_estimate(float(d.mean()), float(d.std(ddof=1)) / math.sqrt(n), n - 1, n,
                       "paired t")


def unpaired_t(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """Student's two-sample t test (pooled variance) of mean(a) - mean(b)."""
    xa, xb = checks.sample("a", a, minimum=2), checks.sample("b", b, minimum=2)
    na, nb = len(xa), len(xb)
    pooled = ((na - 1) * xa.var(ddof=1) + (nb - 1) * xb.var(ddof=1)) / (na + nb - 2)
    se = math.sqrt(pooled * (1 / na + 1 / nb))
    return _t_estimate(float(xa.mean() - xb.mean()), se, na + nb - 2, na + nb, "unpaired t")


#: tests of paired differences (one per seed or subject): name -> f(differences, **options)
PAIRED_TESTS: Registry[Callable[..., Estimate]] = Registry("paired test")
PAIRED_TESTS.register("sign-flip", sign_flip)
PAIRED_TESTS.register("bootstrap", paired_bootstrap)
PAIRED_TESTS.register("t", paired_t)

#: tests of two separate samples: name -> f(a, b, **options)
UNPAIRED_TESTS: Registry[Callable[..., Estimate]] = Registry("unpaired test")
UNPAIRED_TESTS.register("permutation", unpaired_permutation)
UNPAIRED_TESTS.register("t", unpaired_t)


def paired_difference(a: Sequence[float], b: Sequence[float], *, test: str = "sign-flip",
                      **options) -> Estimate:
    """a - b on the same seeds (or subjects): pair i is a[i] against b[i]; ``test`` is a
    name of PAIRED_TESTS and ``options`` its keyword arguments (draws, resamples, seed)."""
    xa, xb = checks.paired("a", a, "b", b)
    return PAIRED_TESTS.get(test)(xa - xb, **options)


def unpaired_difference(a: Sequence[float], b: Sequence[float], *, test: str = "permutation",
                        **options) -> Estimate:
    """mean(a) - mean(b) for runs that are not paired; ``test`` is a name of UNPAIRED_TESTS."""
    return UNPAIRED_TESTS.get(test)(a, b, **options)
