"""Kendall tau against scipy; granulated tau against a hand-computed grid."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from genlab.core.errors import ConfigError, DataError
from genlab.optim.measures.correlation import granulated_tau, kendall_tau, tau_table


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=25))
def test_kendall_tau_matches_scipy_with_ties(pairs):
    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    ours, ref = kendall_tau(x, y), kendalltau(x, y).statistic
    if math.isnan(ref):
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(ref, abs=1e-12)


def test_kendall_tau_continuous_values():
    rng = np.random.default_rng(0)
    x = rng.normal(size=40)
    y = x + rng.normal(size=40)
    assert kendall_tau(x.tolist(), y.tolist()) == pytest.approx(kendalltau(x, y).statistic)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0


def test_granulated_tau_hand_computed():
    # 2 x 2 grid over lr and batch; measure ranks the gap correctly when lr varies
    # (both lr-groups: +1) and wrongly when batch varies (both batch-groups: -1).
    records = []
    for lr, batch in itertools.product([0.1, 0.2], [16, 32]):
        gap = lr * 10 + batch / 100  # lr dominates
        measure = lr * 10 - batch / 100
        records.append({"lr": lr, "batch": batch, "gap": gap, "m": measure})
    res = granulated_tau(records, "m", "gap", ["lr", "batch"])
    assert res["per_hyperparameter"] == {"lr": 1.0, "batch": -1.0}
    assert res["granulated"] == 0.0
    # plain tau over 4 points: pairs differing in lr concordant (4), in batch only discordant (2)
    assert res["plain"] == pytest.approx((4 - 2) / 6)
    rows = tau_table(records, ["m"], "gap", ["lr", "batch"])
    assert rows[0]["psi_lr"] == 1.0 and rows[0]["granulated"] == 0.0


def test_bad_input():
    with pytest.raises(DataError):
        kendall_tau([1, 2], [1])
    with pytest.raises(DataError):
        granulated_tau([], "m", "gap", ["lr"])
    with pytest.raises(ConfigError):
        granulated_tau([{"m": 1, "gap": 2}], "m", "gap", ["lr"])


def test_tau_interval_brackets_tau_and_narrows_with_data():
    from genlab.optim.measures.correlation import _tau_b, kendall_tau_interval

    rng = np.random.default_rng(1)
    x = rng.normal(size=60)
    y = x + rng.normal(size=60)
    tau = kendall_tau(x.tolist(), y.tolist())
    assert _tau_b(x, y) == pytest.approx(tau, abs=1e-12)  # the vectorised form used inside
    lo, hi = kendall_tau_interval(x, y, resamples=400)
    assert lo < tau < hi and hi - lo < 0.4
    lo_small, hi_small = kendall_tau_interval(x[:10], y[:10], resamples=400)
    assert hi_small - lo_small > hi - lo
    ties = [1, 1, 2, 2, 3]
    assert _tau_b(np.array(ties, float), np.array([5, 4, 3, 2, 1], float)) == pytest.approx(
        kendall_tau(ties, [5, 4, 3, 2, 1]))
    assert all(math.isnan(v) for v in kendall_tau_interval([1, 1, 1], [1, 2, 3]))
    with pytest.raises(DataError):
        kendall_tau_interval([1, 2], [1])


def test_random_sanity_measure_is_fixed_and_unrelated_to_any_gap():
    from genlab.optim.measures.correlation import RANDOM_MEASURE, with_random_measure

    records = [{"gap": float(i), "m": float(i)} for i in range(300)]
    a, b = with_random_measure(records), with_random_measure(records)
    assert [r[RANDOM_MEASURE] for r in a] == [r[RANDOM_MEASURE] for r in b]  # reproducible
    assert all(r["m"] == i for i, r in enumerate(a)) and RANDOM_MEASURE not in records[0]
    rows = {r["measure"]: r for r in tau_table(a, ["m", RANDOM_MEASURE], "gap", [])}
    assert rows["m"]["tau"] == pytest.approx(1.0)  # the monotone measure, for contrast
    # a draw independent of the order: |tau| ~ N(0, 0.04) for n = 300
    assert abs(rows[RANDOM_MEASURE]["tau"]) < 0.15
    assert rows[RANDOM_MEASURE]["tau_lo"] < 0 < rows[RANDOM_MEASURE]["tau_hi"]
