"""The MoEGaze section of `genlab demo` on tiny runs: table with the paired interval, figures."""

from dataclasses import replace

from genlab.core.report import Report
from genlab.gaze import demo


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


def test_demo_runs_evaluate_often_enough_for_a_loss_curve(tmp_path):
    for quick in (True, False):
        for spec in demo.demo_specs(tmp_path, quick):
            evaluations = -(-spec.config.steps // spec.config.eval_every)
            assert evaluations == demo.CURVE_POINTS  # one point of loss_curves.png each


def numbers(diff, ci, label="target app-m", baseline=8.0, constant=20.0):
    return {"label": label, "constant": constant, "baseline": baseline,
            "moegaze": baseline + diff, "diff": diff, "diff_ci": ci}


def test_reading_says_when_moegaze_does_not_beat_the_baseline():
    text = demo.reading([numbers(0.49, (0.1, 0.9))])
    assert text.startswith("In this quick run on target app-m MoEGaze's error is 0.49 deg above "
                           "the baseline's (interval [+0.10, +0.90]): at this budget it does "
                           "not beat it.")
    assert text.endswith("Both models are at least 11.51 deg below the constant predictor on "
                         "every row.")
    assert "equal to the baseline's" in demo.reading([numbers(0.001, (-0.2, 0.2))])


def test_reading_separates_a_clear_gain_from_an_unclear_one():
    clear = demo.reading([numbers(-0.5, (-0.9, -0.1))], quick=False)
    assert clear.startswith("In this run on target app-m MoEGaze's error is 0.50 deg below the "
                            "baseline's and the interval [-0.90, -0.10] excludes 0: lower here")
    unclear = demo.reading([numbers(-0.37, (-0.87, 0.06), label="held-out source subjects")])
    assert "0.37 deg below the baseline's, but the interval [-0.87, +0.06] includes 0: not a " \
           "clear gain" in unclear
    worse_than_constant = demo.reading([numbers(0.2, (0.1, 0.3), baseline=19.9)])
    assert worse_than_constant.endswith("Not below the constant predictor (the source mean) "
                                        "on: target app-m.")
