"""Sizing a gaze study from a pilot: the variance split by hand, the seeds a known sd needs
by a brute-force loop, more target subjects where the seed x subject part dominates."""

import json
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from genlab.core.errors import ConfigError, DataError
from genlab.core.stats import minimum_detectable_effect, seeds_needed
from genlab.gaze.studies.sizing import (
    Pilot,
    interval_pilot,
    load_pilots,
    pilot_dicts,
    plan,
    plan_lines,
    variance_parts,
)


def brute_force_seeds(sd: float, effect: float, power: float = 0.8) -> int:
    """The first n from 2 up whose (t_{0.975, n-1} + t_{power, n-1}) sd / sqrt(n) <= effect."""
    n = 2
    while ((scipy_stats.t.ppf(0.975, n - 1) + scipy_stats.t.ppf(power, n - 1)) * sd
           / math.sqrt(n)) > effect:
        n += 1
    return n


def test_variance_parts_hand_computed():
    # d = [[1, 3], [2, 6]], one image per subject: seed means 2, 4 (variance 2); residuals
    # +-0.5, sum of squares 1 over (2-1)(2-1): seed x subject variance 1; seed variance
    # 2 - 1/2 = 1.5
    sd_seed, sd_subject = variance_parts(np.array([[1.0, 3.0], [2.0, 6.0]]), np.ones(2))
    assert sd_seed == pytest.approx(math.sqrt(1.5)) and sd_subject == pytest.approx(1.0)
    with pytest.raises(DataError, match="at least 2 seeds and 2 test subjects"):
        variance_parts(np.ones((1, 3)), np.ones(3))


def test_variance_parts_recover_a_simulated_layout():
    rng = np.random.default_rng(7)
    seeds, subjects = 400, 30
    d = (0.5 + rng.normal(0, 0.3, (seeds, 1)) + rng.normal(0, 1.0, (1, subjects))
         + rng.normal(0, 2.0, (seeds, subjects)))  # the subject effect is shared by seeds
    sd_seed, sd_subject = variance_parts(d, np.ones(subjects))
    assert sd_seed == pytest.approx(0.3, abs=0.06) and sd_subject == pytest.approx(2.0, abs=0.05)


def test_plan_seeds_against_a_brute_force_loop_and_core_stats():
    p = Pilot("gate", seeds=5, fixed=16, scaled=0, scale=1, sd_seed=0.3, sd_subject=0.0)
    sized = plan([p], mde=0.2, power=0.8, seeds_run=5, scale_run=1)
    # hand: (t_{0.975, 19} + t_{0.8, 19}) 0.3 / sqrt(20) = (2.0930 + 0.8610) 0.0671 = 0.198
    assert brute_force_seeds(0.3, 0.2) == 20 == sized["seeds_needed"]
    assert sized["seeds_needed"] == seeds_needed(0.3, 0.2)
    row = sized["rows"][0]
    assert row["mde_run"] == pytest.approx(minimum_detectable_effect(0.3, 5))
    assert row["mde_run"] == pytest.approx((2.776445 + 0.940965) * 0.3 / math.sqrt(5), abs=1e-5)
    assert sized["target_scale_needed"] == 1  # no target subjects: scaling cannot help


def test_plan_renders_target_subjects_where_they_help():
    # seed part 0.1, seed x subject part 1.2 over 15 target subjects: sd 0.33 at scale 1
    p = Pilot("E->M", seeds=3, fixed=0, scaled=15, scale=1, sd_seed=0.1, sd_subject=1.2)
    sized = plan([p], mde=0.2, power=0.8, seeds_run=5, scale_run=1)
    want = {k: brute_force_seeds(math.sqrt(0.01 + 1.44 / (15 * k)), 0.2) for k in range(1, 9)}
    k = sized["target_scale_needed"]
    assert want[k] == min(want.values()) == sized["seeds_needed"]
    assert all(want[j] > want[k] for j in range(1, k))  # the smallest scale that gets there
    assert want[1] > sized["seeds_needed"]
    assert sized["rows"][0]["subjects_planned"] == 15 * k
    lines = plan_lines(sized, "pilot.json")
    assert lines[0].startswith("Sizing from pilot.json: MDE 0.2 deg at 80 % power")
    assert lines[-1] == (f"Plan: --target-scale {k} and {sized['seeds_needed']} seeds give "
                         "every comparison an MDE of at most 0.2 deg.")


def test_pilots_round_trip_through_a_file_and_an_interval(tmp_path):
    p = Pilot("x", seeds=3, fixed=4, scaled=10, scale=2, sd_seed=0.2, sd_subject=0.5)
    assert p.subjects(4) == 4 + 20 and p.sd(2) == pytest.approx(math.sqrt(0.04 + 0.25 / 14))
    (tmp_path / "bench.json").write_text(json.dumps({"pilot": pilot_dicts([p])}))
    (tmp_path / "results.json").write_text(json.dumps({"figures": {"pilot": pilot_dicts([p])}}))
    assert load_pilots(tmp_path / "bench.json") == [p] == load_pilots(tmp_path / "results.json")
    (tmp_path / "none.json").write_text(json.dumps({"figures": {"oracle": 1}}))
    with pytest.raises(ConfigError, match="holds no pilot"):
        load_pilots(tmp_path / "none.json")
    # the anatomy world's recorded gate, -0.34 [-0.77, +0.00] over 5 seeds
    q = interval_pilot("ana-e gate", -0.77, 0.0, 5, 16)
    assert q.sd(1) == pytest.approx(0.385 * math.sqrt(5) / 2.776445, abs=1e-4)


def test_target_scale_renders_more_subjects_with_as_many_images_each(tmp_path):
    from genlab.gaze.protocol import SyntheticCache
    from genlab.gaze.synth.domains import get_domain

    cache = SyntheticCache(tmp_path)
    one, two = (cache.get("narrow-d", 28, 0, (16, 24), scale=k) for k in (1, 2))
    n = get_domain("narrow-d").n_subjects
    assert len(one.labels.subject.unique()) == n and len(one.labels.subject) == 28
    assert len(two.labels.subject.unique()) == 2 * n and len(two.labels.subject) == 56
    assert sorted(p.name for p in tmp_path.iterdir()) == ["narrow-d_n28_s0_16x24.pt",
                                                          "narrow-d_n28_s0_16x24_x2.pt"]
