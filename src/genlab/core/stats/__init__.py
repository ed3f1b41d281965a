"""The statistics layer: the tests, intervals, verdicts, power and chance distributions that
every comparison of methods goes through.

- intervals: paired sign-flip permutation, paired bootstrap, unpaired permutation and t
  tests of an effect, each an :class:`Estimate` (effect, n, test, p, interval at any level).
- family: the :class:`Verdict` of a comparison (better, worse, no difference larger than a
  margin, undecided, not testable) alone or under Holm's correction over a family.
- power: the minimum detectable effect of a paired or unpaired design, the seeds it needs
  (from a pilot's sd, or from its recorded interval), and the units a decision on an
  estimate needs.
- chance: exact distributions of a statistic over a finite population and of a count of
  independent choices, with a draws-based fallback.
- ranks: Kendall tau-b, its bootstrap interval and the paired difference of two taus.
- checks: the input checks every function above applies.
"""

from genlab.core.stats.chance import (
    Distribution,
    count_distribution,
    distribution_of,
    exact_distribution,
    sampled_distribution,
)
from genlab.core.stats.family import (
    KINDS,
    Verdict,
    classify,
    holm,
    holm_adjust,
    judge,
    not_testable,
    verdict_counts,
)
from genlab.core.stats.intervals import (
    PAIRED_TESTS,
    UNPAIRED_TESTS,
    Estimate,
    bootstrap_estimate,
    paired_bootstrap,
    paired_difference,
    paired_t,
    sign_flip,
    unpaired_difference,
    unpaired_permutation,
    unpaired_t,
)
from genlab.core.stats.power import (
    decision_size,
    minimum_detectable_effect,
    pilot_sd,
    pooled_sd,
    sd_from_interval,
    seeds_needed,
    sign_flip_floor,
    sign_flip_seeds,
)
from genlab.core.stats.ranks import (
    bootstrap_counts,
    kendall_tau_b,
    kendall_tau_interval,
    paired_tau_difference,
)

__all__ = [
    "KINDS", "PAIRED_TESTS", "UNPAIRED_TESTS", "Distribution", "Estimate", "Verdict",
    "bootstrap_counts", "bootstrap_estimate", "classify", "count_distribution", "decision_size",
    "distribution_of",
    "exact_distribution", "holm", "holm_adjust", "judge", "kendall_tau_b",
    "kendall_tau_interval", "minimum_detectable_effect", "not_testable", "paired_bootstrap",
    "paired_difference", "paired_t", "paired_tau_difference", "pilot_sd", "pooled_sd",
    "sampled_distribution", "sd_from_interval", "seeds_needed", "sign_flip", "sign_flip_floor",
    "sign_flip_seeds",
    "unpaired_difference", "unpaired_permutation", "unpaired_t", "verdict_counts",
]
