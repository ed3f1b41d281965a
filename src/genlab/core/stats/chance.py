"""Chance distributions: what a value drawn at random from a finite population would be.

Where the population can be listed (every cell of a small search space with its tabulated
accuracy), the distribution of a statistic over it is exact: :func:`exact_distribution`
applies the statistic to every member, :func:`distribution_of` takes the values directly
(uniform or weighted members). A count that is a sum of independent per-item choices (item
i adds 1 with probability p_i, or adds k with probability p_i[k]) has its exact
distribution by convolution of the per-item distributions (:func:`count_distribution`: the
Poisson-binomial distribution when every item is a yes/no choice). Where neither applies,
:func:`sampled_distribution` draws the statistic ``draws`` times (seeded) and says so
(``exact`` False).

A :class:`Distribution` answers P(X <= x), P(X >= x) (the chance that a random draw is at
least as good as a method's value), quantiles (the smallest value whose P(X <= value)
reaches q), an equal-tailed interval, its mean, and the distribution of the best of k
independent draws (P(max <= x) = P(X <= x)^k).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from genlab.core.errors import ConfigError
from genlab.core.stats import checks

#: slack of the probability comparisons (sums of many floats)
TOLERANCE = 1e-12


@dataclass(frozen=True)
class Distribution:
    """A discrete distribution: distinct ``values`` in increasing order and their
    ``probabilities``; ``exact`` False with ``draws`` for one estimated by draws."""

    values: np.ndarray
    probabilities: np.ndarray
    exact: bool = True
    draws: int | None = None

    def at_most(self, x: float) -> float:
        """P(X <= x)."""
        return float(self.probabilities[self.values <= x].sum())

    def at_least(self, x: float) -> float:
        """P(X >= x)."""
        return float(self.probabilities[self.values >= x].sum())

    def quantile(self, q: float) -> float:
        """The smallest value v with P(X <= v) >= q."""
        checks.level(q, "q")
        cumulative = np.cumsum(self.probabilities)
        index = int(np.searchsorted(cumulative, q - TOLERANCE))
        return float(self.values[min(index, len(self.values) - 1)])

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The (1 - level)/2 and (1 + level)/2 quantiles."""
        checks.level(level)
        return self.quantile((1 - level) / 2), self.quantile((1 + level) / 2)

    def mean(self) -> float:
        return float((self.values * self.probabilities).sum())

    def maximum_of(self, k: int) -> Distribution:
        """The distribution of the largest of ``k`` independent draws."""
        checks.count("k", k)
        cdf = np.cumsum(self.probabilities).clip(0, 1) ** k
        return Distribution(self.values, np.diff(cdf, prepend=0.0), self.exact, self.draws)

    def describe(self) -> str:
        """How it was obtained, for a table's note ("exact over 125 values", "10000 draws")."""
        if self.exact:
            return f"exact over {len(self.values)} distinct values"
        return f"{self.draws} draws"


def _collect(values: np.ndarray, weights: np.ndarray, exact: bool,
             draws: int | None) -> Distribution:
    """Merge equal values and normalise the weights."""
    distinct, inverse = np.unique(values, return_inverse=True)
    mass = np.bincount(inverse.ravel(), weights=weights, minlength=len(distinct))
    keep = mass > 0
    return Distribution(distinct[keep], mass[keep] / mass.sum(), exact, draws)


def distribution_of(values: Sequence[float], weights: Sequence[float] | None = None
                    ) -> Distribution:
    """The exact distribution of a member drawn from a population with these ``values``,
    uniformly, or with probability proportional to ``weights``."""
    v = checks.sample("values", values)
    if weights is None:
        w = np.ones(len(v))
    else:
        w = checks.sample("weights", weights)
        if len(w) != len(v):
            raise ConfigError(f"values and weights must have equal lengths, got {len(v)} "
                              f"and {len(w)}")
        if (w < 0).any() or w.sum() <= 0:
            raise ConfigError("weights must be >= 0 with a positive sum")
    return _collect(v, w, True, None)


def exact_distribution(population: Iterable, statistic: Callable[[object], float]
                       ) -> Distribution:
    """The exact distribution of ``statistic(member)`` for a member drawn uniformly from
    ``population`` (every member is visited once: a finite iterable)."""
    values = [float(statistic(member)) for member in population]
    if not values:
        raise ConfigError("population is empty; expected at least one member")
    return distribution_of(values)


def _choice(i: int, choice) -> np.ndarray:
    """Item i's distribution over the amounts 0, 1, ... it adds to the count."""
    if np.ndim(choice) == 0:
        try:
            p = float(choice)
        except (TypeError, ValueError):
            p = float("nan")
        if not 0 <= p <= 1:
            raise ConfigError(f"choices[{i}] must be a probability in [0, 1], got {choice!r}")
        return np.array([1.0 - p, p])
    probs = checks.sample(f"choices[{i}]", choice)
    if (probs < 0).any() or abs(probs.sum() - 1) > 1e-9:
        raise ConfigError(f"choices[{i}] must be probabilities of adding 0, 1, ... that sum "
                          f"to 1, got {probs.tolist()}")
    return probs


def count_distribution(choices: Sequence) -> Distribution:
    """The exact distribution of a count that is a sum of independent per-item choices.

    ``choices[i]`` is either p (item i adds 1 with probability p, else 0) or a sequence q
    (item i adds k with probability q[k]). The count's distribution is the convolution of
    the items' distributions.
    """
    if not len(choices):
        raise ConfigError("choices is empty; expected one choice per item")
    pmf = np.array([1.0])
    for i, choice in enumerate(choices):
        pmf = np.convolve(pmf, _choice(i, choice))
    values = np.arange(len(pmf), dtype=float)
    keep = pmf > 0
    return Distribution(values[keep], pmf[keep] / pmf.sum(), True, None)


def sampled_distribution(draw: Callable[[np.random.Generator], float], *,
                         draws: int = 10_000, seed: int = 0) -> Distribution:
    """The distribution of ``draw(rng)`` estimated from ``draws`` calls with one seeded
    generator: the fallback where the population cannot be listed or the choices are not
    independent (``exact`` False)."""
    checks.count("draws", draws)
    rng = np.random.default_rng(seed)
    values = checks.sample("draws' values", [float(draw(rng)) for _ in range(draws)])
    return _collect(values, np.ones(len(values)), False, draws)
