"""Bootstrap cells and paired differences against hand values and explicit loops."""

import numpy as np
import pytest

from genlab.core.errors import DataError
from genlab.gaze.studies.stats import Cell, Draws, cell_summary, fmt_ci, paired, replicates


def _cell(m, n):
    subjects = [str(j) for j in range(len(n))]
    return Cell.from_runs([{s: [m[i][j], n[j]] for j, s in enumerate(subjects)}
                           for i in range(len(m))])


def test_cell_value_is_seed_mean_of_image_weighted_means():
    c = _cell([[1.0, 3.0], [2.0, 4.0]], [1, 3])
    assert c.value == pytest.approx(((1 + 9) / 4 + (2 + 12) / 4) / 2)


def test_replicates_match_an_explicit_resampling_loop():
    rng = np.random.default_rng(0)
    m, n = rng.uniform(2, 9, (3, 5)), rng.integers(1, 6, 5)
    c = _cell(m, n)
    draws = Draws.make(3, 5, n_boot=7, seed=1)
    got = replicates(c, draws)
    for b in range(7):
        seeds = [s for s in range(3) for _ in range(draws.seeds[b, s])]
        subjects = [j for j in range(5) for _ in range(draws.subjects[b, j])]
        num = sum(n[j] * m[s, j] for s in seeds for j in subjects)
        den = len(seeds) * sum(n[j] for j in subjects)
        assert got[b] == pytest.approx(num / den)


def test_paired_difference_cancels_what_runs_share():
    rng = np.random.default_rng(1)
    m, n = rng.uniform(5, 15, (4, 6)), np.full(6, 10)
    a, b = _cell(m, n), _cell(m - 1.5, n)  # b is 1.5 degrees better everywhere
    d = paired(a, b, Draws.make(4, 6, 500))
    assert d["diff"] == pytest.approx(-1.5)
    assert d["diff_ci"] == (pytest.approx(-1.5), pytest.approx(-1.5))
    assert d["rel_pct"] == pytest.approx(100 * 1.5 / a.value)
    lo, hi = d["rel_ci"]
    assert lo <= d["rel_pct"] <= hi
    s = cell_summary(a, Draws.make(4, 6, 500))
    assert s["ci"][0] < s["value"] < s["ci"][1]


def test_seed_draws_are_shared_across_test_sets():
    a, b = Draws.make(5, 10, 50, stream=0), Draws.make(5, 7, 50, stream=1)
    assert np.array_equal(a.seeds, b.seeds)
    assert a.subjects.sum(1).tolist() == [10] * 50 and b.subjects.sum(1).tolist() == [7] * 50


def test_mismatched_cells_raise():
    with pytest.raises(DataError, match="different subjects"):
        Cell.from_runs([{"1": [1.0, 2]}, {"2": [1.0, 2]}], "x")
    with pytest.raises(DataError, match="no runs"):
        Cell.from_runs([], "x")
    with pytest.raises(DataError, match="same seeds"):
        paired(_cell([[1.0]], [1]), _cell([[1.0], [2.0]], [1]), Draws.make(1, 1))


def test_fmt_ci():
    assert fmt_ci(1.234, (1.0, 1.5)) == "1.23 [1.00, 1.50]"
    assert fmt_ci(-0.5, (-1.0, 0.25), 1, sign=True) == "-0.5 [-1.0, +0.2]"
    assert fmt_ci(None, None) == "-"
