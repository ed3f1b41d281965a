"""genlab.core.stats against independent truths: every sign flip, bootstrap resample and
relabelling listed by itertools, scipy's t tests and Kendall tau, a Holm family worked by
hand, the power formula against simulated benches, and chance distributions against direct
counts over small enumerated populations."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats as scipy_stats

from genlab.core.errors import ConfigError
from genlab.core.stats import (
    Estimate,
    count_distribution,
    distribution_of,
    exact_distribution,
    holm,
    holm_adjust,
    judge,
    kendall_tau_b,
    kendall_tau_interval,
    minimum_detectable_effect,
    not_testable,
    paired_bootstrap,
    paired_difference,
    paired_t,
    paired_tau_difference,
    pilot_sd,
    pooled_sd,
    sampled_distribution,
    sd_from_interval,
    seeds_needed,
    sign_flip,
    sign_flip_floor,
    sign_flip_seeds,
    unpaired_difference,
    unpaired_permutation,
    unpaired_t,
    verdict_counts,
)

# --- brute force -------------------------------------------------------------------------


def flip_tails(d, delta):
    """P(T* >= T), P(T* <= T) over all 2^n sign flips of d - delta (T = the observed sum)."""
    x = np.asarray(d, float) - delta
    observed = x.sum()
    sums = [float(np.dot(s, x)) for s in itertools.product([1, -1], repeat=len(x))]
    upper = sum(t >= observed - 1e-12 for t in sums) / len(sums)
    lower = sum(t <= observed + 1e-12 for t in sums) / len(sums)
    return upper, lower


def relabel_tails(a, b, delta):
    """P(T* >= T), P(T* <= T) over all relabellings of (a - delta) and b (T = mean diff)."""
    pooled = [x - delta for x in a] + list(b)
    observed = np.mean(pooled[:len(a)]) - np.mean(pooled[len(a):])
    stats = []
    for chosen in itertools.combinations(range(len(pooled)), len(a)):
        rest = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        stats.append(np.mean([pooled[i] for i in chosen]) - np.mean(rest))
    upper = sum(t >= observed - 1e-12 for t in stats) / len(stats)
    lower = sum(t <= observed + 1e-12 for t in stats) / len(stats)
    return upper, lower


def accepted(tails, level):
    """Whether both one-sided tests at (1 - level)/2 keep the shift."""
    return min(tails) > (1 - level) / 2


def check_inversion(est, tails_at, level, step=1e-7):
    """The interval's ends are where the brute-force tests start to reject."""
    low, high = est.interval(level)
    assert math.isfinite(low) and math.isfinite(high)
    assert accepted(tails_at(low + step), level) and not accepted(tails_at(low - step), level)
    assert accepted(tails_at(high - step), level)
    assert not accepted(tails_at(high + step), level)


# --- paired sign-flip --------------------------------------------------------------------


@pytest.mark.parametrize("n,level,seed", [(5, 0.75, 0), (6, 0.95, 1), (7, 0.9, 2)])
def test_sign_flip_matches_every_flip(n, level, seed):
    d = np.random.default_rng(seed).normal(0.4, 1.0, n)
    est = sign_flip(d)
    assert est.test == "paired sign-flip exact" and est.n == n
    assert est.effect == pytest.approx(d.mean())
    up, down = flip_tails(d, 0.0)
    assert est.p == pytest.approx(min(1.0, 2 * min(up, down)), abs=1e-12)
    # the two-sided |T| form of the same p-value (the flip distribution is symmetric)
    sums = [abs(float(np.dot(s, d))) for s in itertools.product([1, -1], repeat=n)]
    assert est.p == pytest.approx(
        sum(t >= abs(d.sum()) - 1e-12 for t in sums) / 2 ** n, abs=1e-12)
    check_inversion(est, lambda delta: flip_tails(d, delta), level)


def test_sign_flip_few_pairs_give_an_infinite_interval_and_consistent_p():
    # five pairs: the smallest two-sided p is 2/32 = 0.0625 > 0.05, so no shift is rejected
    d = [0.5, 0.7, 0.2, 0.9, 0.4]
    est = sign_flip(d)
    assert est.p == pytest.approx(2 / 32)
    assert est.interval(0.95) == (-math.inf, math.inf)
    assert flip_tails(d, -1e6)[0] == pytest.approx(1 / 32)
    assert judge(est).kind == "undecided"
    # six pairs, all positive: the 95 % interval is [min, max], p = 2/64
    d6 = [0.42, 0.1, 0.75, 0.3, 0.6, 0.5]
    v = judge(sign_flip(d6), margin=0.1)
    assert v.line() == "+0.45 [0.10, 0.75] (n=6, paired sign-flip exact) better"
    assert v.p == pytest.approx(2 / 64)


def test_interval_excludes_zero_exactly_when_p_is_below_alpha():
    rng = np.random.default_rng(3)
    for _ in range(40):
        n = int(rng.integers(6, 11))
        d = rng.normal(rng.uniform(-1, 1), 1, n)
        est = sign_flip(d)
        for level in (0.8, 0.9, 0.95):
            low, high = est.interval(level)
            assert (low > 0 or high < 0) == (est.p <= 1 - level + 1e-12)


def test_sign_flip_draws_are_seeded_and_close_to_the_exact_p():
    d = np.random.default_rng(4).normal(0.3, 1.0, 18)
    mc = sign_flip(d, draws=20_000, seed=5)
    assert mc.test == "paired sign-flip, 20000 draws"
    again = sign_flip(d, draws=20_000, seed=5)
    assert (mc.p, mc.interval(0.9)) == (again.p, again.interval(0.9))
    exact = sign_flip(d, exact_limit=2 ** 18)  # all 262,144 flips
    assert exact.test == "paired sign-flip exact"
    assert mc.p == pytest.approx(exact.p, abs=0.01)
    for got, want in zip(mc.interval(0.9), exact.interval(0.9), strict=True):
        assert got == pytest.approx(want, abs=0.05)


# --- paired bootstrap --------------------------------------------------------------------


@pytest.mark.parametrize("d", [[0.3, -0.1, 0.8, 0.2], [1.0, 0.5, -0.4, 0.9, 0.1]])
def test_bootstrap_lists_every_resample_of_small_samples(d):
    n = len(d)
    means = [np.mean([d[i] for i in idx]) for idx in itertools.product(range(n), repeat=n)]
    est = paired_bootstrap(d)
    assert est.test == "paired bootstrap exhaustive"
    for level in (0.8, 0.95):
        tail = 100 * (1 - level) / 2
        want = (np.percentile(means, tail), np.percentile(means, 100 - tail))
        assert est.interval(level) == pytest.approx(want, abs=1e-12)
    share_low = sum(m <= 0 for m in means) / len(means)
    share_high = sum(m >= 0 for m in means) / len(means)
    assert est.p == pytest.approx(min(1.0, 2 * min(share_low, share_high)), abs=1e-12)


def test_drawn_bootstrap_tails_match_the_exhaustive_distribution():
    d = np.array([0.9, -0.3, 0.4, 1.2, 0.1, 0.6])  # 6^6 = 46,656 resamples
    means = np.sort([np.mean(d[list(idx)]) for idx in itertools.product(range(6), repeat=6)])
    est = paired_bootstrap(d, resamples=20_000, seed=1)
    assert est.test == "paired bootstrap, 20000 resamples"
    low, high = est.interval(0.95)
    # the exact share of resampled means below each end: 2.5 % and 97.5 %, up to draws
    assert np.searchsorted(means, low) / len(means) == pytest.approx(0.025, abs=0.006)
    assert np.searchsorted(means, high) / len(means) == pytest.approx(0.975, abs=0.006)
    assert paired_bootstrap(d, resamples=20_000, seed=1).interval(0.95) == (low, high)


# --- unpaired ----------------------------------------------------------------------------


def test_unpaired_permutation_matches_every_relabelling():
    a, b = [2.1, 3.4, 2.9], [1.2, 2.0, 1.7, 0.8]
    est = unpaired_permutation(a, b)
    assert est.test == "unpaired permutation exact" and est.n == 7
    assert est.effect == pytest.approx(np.mean(a) - np.mean(b))
    up, down = relabel_tails(a, b, 0.0)
    assert est.p == pytest.approx(min(1.0, 2 * min(up, down)), abs=1e-12)
    check_inversion(est, lambda delta: relabel_tails(a, b, delta), 0.8)
    assert unpaired_difference(a, b).p == est.p


def test_unpaired_permutation_draws_approach_the_exact_p():
    rng = np.random.default_rng(6)
    a, b = rng.normal(0.8, 1, 9), rng.normal(0, 1, 10)  # C(19, 9) = 92,378 relabellings
    exact = unpaired_permutation(a, b, exact_limit=10 ** 6)
    mc = unpaired_permutation(a, b, draws=20_000, seed=2)
    assert mc.test == "unpaired permutation, 20000 draws"
    assert mc.p == pytest.approx(exact.p, abs=0.01)


def test_t_tests_match_scipy():
    rng = np.random.default_rng(7)
    a, b = rng.normal(1, 1, 8), rng.normal(0.2, 1, 8)
    ours, ref = paired_difference(a, b, test="t"), scipy_stats.ttest_rel(a, b)
    assert ours.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert ours.interval(0.9) == pytest.approx(tuple(ref.confidence_interval(0.9)), rel=1e-10)
    ours, ref = unpaired_t(a, b[:6]), scipy_stats.ttest_ind(a, b[:6])
    assert ours.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert ours.interval(0.95) == pytest.approx(tuple(ref.confidence_interval(0.95)),
                                                rel=1e-10)
    assert paired_t([1.0, 1.0, 1.0]).p == 0.0 and paired_t([0.0, 0.0]).p == 1.0


# --- verdicts and Holm -------------------------------------------------------------------


def z_estimate(effect: float) -> Estimate:
    """An effect with standard error 1 and a normal interval (the test: a z test)."""
    def bounds(level):
        z = scipy_stats.norm.ppf((1 + level) / 2)
        return effect - z, effect + z
    return Estimate(effect, 10, "z", float(2 * scipy_stats.norm.sf(abs(effect))), bounds)


def test_holm_adjusted_p_values_worked_by_hand():
    # sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04,
    # raised to the running maximum 0.06)
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # 2 x 0.5, then capped


def test_holm_family_worked_by_hand():
    # effects in standard errors: two-sided p = 2(1 - Phi(|z|))
    #   z = 3.0 -> p = 0.002700, z = 2.2 -> 0.027807, z = -2.5 -> 0.012419, z = 0.3 -> 0.764177
    # step 1: 0.002700 x 4 = 0.010799 <= 0.05, level 1 - 0.05/4 = 0.9875, z = 2.4977:
    #         3.0 +- 2.4977 = [0.502, 5.498] -> better
    # step 2: 0.012419 x 3 = 0.037257 <= 0.05, level 1 - 0.05/3, z = 2.3940:
    #         -2.5 +- 2.3940 = [-4.894, -0.106] -> worse
    # step 3: 0.027807 x 2 = 0.055614 > 0.05: stops; level 0.975, z = 2.2414:
    #         2.2 +- 2.2414 = [-0.041, 4.441] -> undecided (alone at 95 % it is "better")
    # step 4: max(0.764177, 0.055614); the level stays 0.975 -> undecided
    family = [z_estimate(z) for z in (3.0, 2.2, -2.5, 0.3)]
    verdicts = holm(family)
    assert [v.kind for v in verdicts] == ["better", "undecided", "worse", "undecided"]
    assert [v.p_corrected for v in verdicts] == pytest.approx(
        [0.010799, 0.055614, 0.037257, 0.764177], abs=2e-6)
    assert [v.level for v in verdicts] == pytest.approx(
        [1 - 0.05 / 4, 1 - 0.05 / 2, 1 - 0.05 / 3, 1 - 0.05 / 2])
    assert (verdicts[0].low, verdicts[0].high) == pytest.approx((0.5023, 5.4977), abs=1e-4)
    assert (verdicts[2].low, verdicts[2].high) == pytest.approx((-4.8940, -0.1060), abs=1e-4)
    assert verdicts[1].low == pytest.approx(-0.0414, abs=1e-4)
    assert judge(family[1]).kind == "better"
    assert verdicts[0].line() == "+3.00 [0.50, 5.50] (n=10, z, Holm 4) better"
    assert verdict_counts(verdicts) == {"better": 1, "worse": 1, "no difference": 0,
                                        "undecided": 2, "not testable": 0}
    # lower is better (an error): the same intervals read the other way round
    flipped = holm(family, higher_is_better=False)
    assert [v.kind for v in flipped] == ["worse", "undecided", "better", "undecided"]


def test_the_five_classes():
    assert judge(z_estimate(0.05 / 3), margin=5.0).line() == (
        "+0.02 [-1.94, 1.98] (n=10, z) no difference larger than 5")
    assert judge(z_estimate(0.5), margin=0.1).kind == "undecided"
    assert judge(z_estimate(-4.0)).kind == "worse"
    v = not_testable("the stand-in's room is 3.4 %, below the claimed 27.6 %", n=5)
    assert v.kind == "not testable"
    assert v.line() == "not testable: the stand-in's room is 3.4 %, below the claimed 27.6 % (n=5)"


# --- power -------------------------------------------------------------------------------


def test_minimum_detectable_effect_formula_and_inverse():
    # n = 10, sd 2: (t_{0.975, 9} + t_{0.8, 9}) * 2 / sqrt(10) = (2.262157 + 0.883404) * 0.632456
    assert minimum_detectable_effect(2.0, 10) == pytest.approx(
        (2.262157 + 0.883404) * 2 / math.sqrt(10), abs=1e-5)
    # unpaired, 8 and 8 runs: df 14, (2.144787 + 0.868055) * sd * sqrt(2/8)
    assert minimum_detectable_effect(1.0, 8, design="unpaired") == pytest.approx(
        (2.144787 + 0.868055) * 0.5, abs=1e-5)
    for design in ("paired", "unpaired"):
        n = seeds_needed(0.7, 0.4, design=design)
        assert minimum_detectable_effect(0.7, n, design=design) <= 0.4
        assert minimum_detectable_effect(0.7, n - 1, design=design) > 0.4
    assert pilot_sd([3.0, 5.0, 4.0], [1.0, 2.0, 3.0]) == pytest.approx(1.0)  # d = 2, 3, 1
    assert pooled_sd([1.0, 3.0], [2.0, 4.0, 6.0]) == pytest.approx(math.sqrt((2 + 8) / 3))


def test_sd_from_interval_inverts_the_paired_t_interval():
    d = [0.3, -0.1, 0.5, 0.2, 0.4]
    low, high = paired_t(d).interval(0.95)
    assert sd_from_interval(low, high, 5) == pytest.approx(float(np.std(d, ddof=1)))
    # by hand: [0, 2.776445] at n = 5 is a half-width of 1.388223 = t_{0.975, 4} sd / sqrt(5)
    assert sd_from_interval(0.0, 2.776445, 5) == pytest.approx(math.sqrt(5) / 2, abs=1e-5)
    with pytest.raises(ConfigError, match="interval must be"):
        sd_from_interval(1.0, 0.0, 5)


def test_power_formula_against_simulated_benches():
    """1,000 paired benches of n seeds with the true effect equal to the MDE at n: about 80 %
    of them end "better"; the same for unpaired benches."""
    rng = np.random.default_rng(2024)
    n = seeds_needed(1.0, 1.0)  # sd 1, wanted MDE 1.0
    assert n == 10
    effect = minimum_detectable_effect(1.0, n)
    benches = rng.normal(effect, 1.0, (1000, n))
    share = np.mean([judge(paired_t(d)).kind == "better" for d in benches])
    assert share == pytest.approx(0.80, abs=0.03)
    n_u = seeds_needed(1.0, 1.0, design="unpaired")
    effect_u = minimum_detectable_effect(1.0, n_u, design="unpaired")
    wins = [judge(unpaired_t(rng.normal(effect_u, 1.0, n_u), rng.normal(0, 1.0, n_u))).kind
            == "better" for _ in range(1000)]
    assert np.mean(wins) == pytest.approx(0.80, abs=0.03)


def test_sign_flip_floor_is_the_tests_own_smallest_p():
    # all differences of one sign: the most extreme of the 2^n flips, the smallest p there is
    for n in range(1, 12):
        assert sign_flip(np.arange(1.0, n + 1)).p == pytest.approx(sign_flip_floor(n))
    # the fewest seeds that can reject, against the floor itself
    for alpha in (0.5, 0.25, 0.1, 0.05, 0.05 / 4, 0.01, 0.001):
        n = sign_flip_seeds(alpha)
        assert sign_flip_floor(n) <= alpha and (n == 2 or sign_flip_floor(n - 1) > alpha)


def test_sign_flip_mde_is_infinite_where_the_test_cannot_reject():
    # five seeds at alpha 0.05: the floor 2/32 = 0.0625 is above alpha, no effect detectable
    assert minimum_detectable_effect(1.0, 5, test="sign-flip") == math.inf
    assert minimum_detectable_effect(1.0, 6, test="sign-flip") == minimum_detectable_effect(1.0, 6)
    # a huge effect at five seeds never ends "better" under the test the verdicts use
    rng = np.random.default_rng(0)
    assert not any(judge(sign_flip(rng.normal(50.0, 1.0, 5))).kind == "better"
                   for _ in range(50))
    # the seeds a sign-flip verdict needs: never fewer than it can reject with
    assert seeds_needed(1.0, 100.0) == 2
    assert seeds_needed(1.0, 100.0, test="sign-flip") == 6
    assert seeds_needed(1.0, 1.0, test="sign-flip") == seeds_needed(1.0, 1.0) == 10
    assert seeds_needed(1.0, 100.0, alpha=0.05 / 4, test="sign-flip") == 8
    with pytest.raises(ConfigError, match="sign-flip: paired"):
        minimum_detectable_effect(1.0, 6, design="unpaired", test="sign-flip")


# --- chance distributions ----------------------------------------------------------------

OPS = ("none", "skip", "conv3", "conv5", "pool")
GAIN = {"none": -3.0, "skip": 0.5, "conv3": 2.0, "conv5": 2.5, "pool": 0.0}


def toy_accuracy(cell) -> float:
    """A made-up accuracy of a 3-edge cell: per-op gains, a penalty for two or more skips."""
    return 88.0 + sum(GAIN[op] for op in cell) - (4.0 if cell.count("skip") >= 2 else 0.0)


def test_exact_distribution_against_a_direct_count():
    cells = list(itertools.product(OPS, repeat=3))
    accs = sorted(toy_accuracy(c) for c in cells)
    dist = exact_distribution(itertools.product(OPS, repeat=3), toy_accuracy)
    assert dist.exact and math.fsum(dist.probabilities) == pytest.approx(1.0)
    for x in (80.0, 85.5, 88.0, 90.5, 94.0, 95.5):
        assert dist.at_most(x) == pytest.approx(sum(a <= x for a in accs) / 125, abs=1e-12)
        assert dist.at_least(x) == pytest.approx(sum(a >= x for a in accs) / 125, abs=1e-12)
    for q in (0.05, 0.5, 0.9, 0.975):
        assert dist.quantile(q) == accs[math.ceil(q * 125) - 1]
    assert dist.mean() == pytest.approx(sum(accs) / 125)
    assert dist.interval(0.9) == (accs[math.ceil(0.05 * 125) - 1], accs[math.ceil(0.95 * 125) - 1])
    # the best of two random cells, against all 125 x 125 ordered pairs
    best = dist.maximum_of(2)
    pairs = [max(a, b) for a in accs for b in accs]
    for x in (86.0, 90.5, 93.0):
        assert best.at_most(x) == pytest.approx(sum(m <= x for m in pairs) / len(pairs))
    weighted = distribution_of([1.0, 2.0, 2.0], weights=[1.0, 1.0, 2.0])
    assert weighted.at_most(1.0) == pytest.approx(0.25)


def test_count_distribution_against_every_outcome():
    choices = [0.2, 0.5, [0.1, 0.6, 0.3], 0.25, [0.0, 0.0, 1.0]]
    options = [[(0, 1 - c), (1, c)] if np.ndim(c) == 0 else list(enumerate(c)) for c in choices]
    truth: Counter = Counter()
    for outcome in itertools.product(*options):
        truth[sum(k for k, _ in outcome)] += math.prod(p for _, p in outcome)
    dist = count_distribution(choices)
    assert dist.values.tolist() == sorted(k for k, p in truth.items() if p > 0)
    for k, p in zip(dist.values, dist.probabilities, strict=True):
        assert p == pytest.approx(truth[int(k)], abs=1e-12)


def test_sampled_distribution_approaches_the_direct_count():
    # skip edges of a random toy cell when each node keeps its better input only: not a sum
    # of independent choices, so drawn; the truth is a count over all 125 cells
    def kept_skips(cell):
        return sum(op == "skip" for op in cell[:2] if GAIN[op] >= GAIN[cell[2]])

    truth = Counter(kept_skips(c) for c in itertools.product(OPS, repeat=3))
    dist = sampled_distribution(lambda rng: kept_skips([OPS[i] for i in rng.integers(0, 5, 3)]),
                                draws=10_000, seed=3)
    assert not dist.exact and dist.describe() == "10000 draws"
    for k in (0, 1):
        assert dist.at_most(k) == pytest.approx(
            sum(v for key, v in truth.items() if key <= k) / 125, abs=0.015)


# --- ranks -------------------------------------------------------------------------------


def test_kendall_tau_and_its_interval_against_scipy_and_a_loop():
    rng = np.random.default_rng(8)
    x = rng.normal(size=12)
    y = np.round(x + rng.normal(size=12))  # ties in y
    assert kendall_tau_b(x, y) == pytest.approx(scipy_stats.kendalltau(x, y).statistic)
    draws = np.random.default_rng(0)
    taus = []
    for _ in range(200):
        idx = draws.integers(0, 12, 12)
        t = scipy_stats.kendalltau(x[idx], y[idx]).statistic
        if not math.isnan(t):
            taus.append(t)
    want = (np.percentile(taus, 5), np.percentile(taus, 95))
    assert kendall_tau_interval(x, y, resamples=200, level=0.9) == pytest.approx(want)
    res = paired_tau_difference(x, rng.normal(size=12), y, resamples=100)
    assert res["n"] == 12 and res["low"] <= res["difference"] <= res["high"]


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("call,match", [
    (lambda: sign_flip([]), "differences needs at least 1"),
    (lambda: paired_bootstrap([1.0, math.nan]), "nan"),
    (lambda: paired_difference([1.0, 2.0], [1.0]), "equal lengths"),
    (lambda: unpaired_permutation([1.0], [None]), "nan"),
    (lambda: paired_t([1.0]), "at least 2"),
    (lambda: sign_flip([1.0, 2.0]).interval(1.0), "level must lie in"),
    (lambda: judge(sign_flip([1.0, 2.0]), level=0), "level must lie in"),
    (lambda: holm([]), "at least one"),
    (lambda: holm_adjust([0.2, 1.5]), r"\[0, 1\]"),
    (lambda: paired_difference([1.0], [2.0], test="magic"), "unknown paired test"),
    (lambda: minimum_detectable_effect(1.0, 10, power=1.2), "power must lie in"),
    (lambda: minimum_detectable_effect(1.0, 1), "n must be an integer >= 2"),
    (lambda: seeds_needed(1.0, 0.0), "effect must be"),
    (lambda: count_distribution([0.5, 1.5]), r"choices\[1\]"),
    (lambda: count_distribution([[0.5, 0.2]]), "sum to 1"),
    (lambda: exact_distribution([], float), "population is empty"),
    (lambda: distribution_of([1.0, 2.0]).quantile(0.0), "q must lie in"),
    (lambda: kendall_tau_b([1.0, 2.0], [1.0]), "equal lengths"),
    (lambda: kendall_tau_interval([1.0, 2.0], [1.0, math.inf]), "nan, inf"),
    (lambda: paired_tau_difference([1, 2], [1, 2], [1, 2], resamples=0), "resamples"),
    (lambda: not_testable(" "), "reason"),
])
def test_bad_input_is_one_config_error_line(call, match):
    with pytest.raises(ConfigError, match=match) as info:
        call()
    assert "\n" not in str(info.value)
