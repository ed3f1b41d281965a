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
