"""The MoEGaze section of `genlab demo` on tiny runs: table with the paired interval and its
verdict (genlab.core.stats', checked against a direct call on the same numbers), figures."""

from dataclasses import replace

import numpy as np
import pytest

from genlab.core.report import Report
from genlab.core.stats import Verdict, holm, paired_difference
from genlab.gaze import demo
from genlab.gaze.studies.stats import Cell


def test_demo_section_reports_paired_difference_and_figures(tmp_path, monkeypatch):
    real = demo.demo_specs

    def tiny(out_dir, quick):
        return [replace(s, config=replace(s.config, steps=2, eval_every=2, train_count=80,
                                          test_count=40, size=[16, 24], width=4))
                for s in real(out_dir, quick)[:2]]  # 1 seed x 2 models

    monkeypatch.setattr(demo, "demo_specs", tiny)
    report = Report("demo")
    result = demo.demo_section(tmp_path / "gaze", report)
    assert [r["tested on"] for r in result["rows"]] == ["held-out source subjects",
                                                          "target app-m"]
    for row in result["rows"]:
        assert row["MoEGaze - baseline"].count("[") == 1  # value [low, high]
    md = report.markdown()
    assert "MoEGaze - baseline" in md and "constant (source mean)" in md
    for name in ("gaze_arrows.png", "loss_curves.png", "router_assignment.png"):
        assert (tmp_path / "gaze" / "moegaze_s0" / name).is_file()
    assert set(result["paired"]) == {"val", "app-m"}
    assert "*Reading:* In this quick run on held-out source subjects MoEGaze's error is" in md
    assert "±" not in md
    for row in result["rows"]:  # one seed: no paired test over seeds
        assert row[demo.VERDICT] == f"not testable: {demo.ONE_SEED} (paired t)"
    assert f"not testable: {demo.ONE_SEED}" in md


def test_demo_runs_evaluate_often_enough_for_a_loss_curve(tmp_path):
    for quick in (True, False):
        for spec in demo.demo_specs(tmp_path, quick):
            evaluations = -(-spec.config.steps // spec.config.eval_every)
            assert evaluations == demo.CURVE_POINTS  # one point of loss_curves.png each


def numbers(diff, kind, low, high, label="target app-m", baseline=8.0, constant=20.0):
    verdict = Verdict(diff, low, high, 0.975, 3, "paired t", kind, correction="Holm 2")
    return {"label": label, "constant": constant, "baseline": baseline,
            "moegaze": baseline + diff, "diff": diff, "verdict": verdict}


def test_reading_says_when_moegaze_does_not_beat_the_baseline():
    text = demo.reading([numbers(0.49, "worse", 0.1, 0.9)])
    assert text.startswith("In this quick run on target app-m MoEGaze's error is 0.49 deg above "
                           "the baseline's: higher here: at this budget it does not beat it "
                           "(+0.49 [0.10, 0.90] (n=3, paired t, Holm 2)).")
    assert text.endswith("Both models are at least 11.51 deg below the constant predictor on "
                         "every row.")
    assert "equal to the baseline's to 0.01 deg: undecided" in demo.reading(
        [numbers(0.001, "undecided", -0.2, 0.2)])


def test_reading_separates_a_clear_gain_from_an_unclear_one():
    clear = demo.reading([numbers(-0.5, "better", -0.9, -0.1)], quick=False)
    assert clear.startswith("In this run on target app-m MoEGaze's error is 0.50 deg below the "
                            "baseline's: lower here (-0.50 [-0.90, -0.10] (n=3, paired t, "
                            "Holm 2))")
    unclear = demo.reading([numbers(-0.37, "undecided", -0.87, 0.06,
                                    label="held-out source subjects")])
    assert ("0.37 deg below the baseline's: undecided (-0.37 [-0.87, 0.06] (n=3, paired t, "
            "Holm 2))") in unclear
    worse_than_constant = demo.reading([numbers(0.2, "worse", 0.1, 0.3, baseline=19.9)])
    assert worse_than_constant.endswith("Not below the constant predictor (the source mean) "
                                        "on: target app-m.")


def _cell(m) -> Cell:
    return Cell(np.array(m, dtype=float), np.array([10.0, 30.0]), ["1", "2"])


def test_demo_verdict_is_core_stats_holm_over_the_rows():
    base = [[8.0, 9.0], [8.5, 9.5], [7.5, 8.0]]  # 3 seeds x 2 subjects (10 and 30 images)
    moe_val = [[7.5, 8.3], [7.9, 8.7], [7.1, 7.4]]  # about 0.6 lower on every seed
    moe_target = [[8.2, 8.9], [8.3, 9.7], [7.6, 7.9]]  # both signs: no clear difference
    pairs = {"val": (_cell(base), _cell(moe_val)), "app-m": (_cell(base), _cell(moe_target))}
    got = demo.verdicts(pairs)

    def seed_means(m):  # each seed's image-weighted mean, by hand
        return [(row[0] * 10 + row[1] * 30) / 40 for row in m]

    want = holm([paired_difference(seed_means(m), seed_means(base), test="t")
                 for m in (moe_val, moe_target)], higher_is_better=False)
    for where, w in zip(("val", "app-m"), want, strict=True):
        v = got[where]
        assert (v.kind, v.test, v.correction, v.n) == (w.kind, w.test, w.correction, 3)
        assert (v.effect, v.low, v.high, v.p_corrected) == pytest.approx(
            (w.effect, w.low, w.high, w.p_corrected))
    # by hand: per-seed differences -0.65, -0.75, -0.55 (mean -0.65, sd 0.1); the smaller p
    # of the two rows is tested first, at level 1 - 0.05/2: -0.65 +- t_{0.9875, 2} 0.1/sqrt(3)
    assert np.subtract(seed_means(moe_val), seed_means(base)) == pytest.approx(
        [-0.65, -0.75, -0.55])
    assert (got["val"].effect, got["val"].high) == pytest.approx(
        (-0.65, -0.65 + 6.205347 * 0.1 / 3 ** 0.5), abs=1e-5)
    assert (got["val"].kind, got["app-m"].kind) == ("better", "undecided")
    one = demo.verdicts({"val": (_cell(base[:1]), _cell(moe_val[:1]))})["val"]
    assert one.kind == "not testable" and one.reason == demo.ONE_SEED
