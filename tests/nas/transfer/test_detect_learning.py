"""The learning check on embedded data: RetinaNet on a searched DARTS cell's backbone (C=8,
5 cells) learns the synthetic shapes well past the trivial detector (each class's mean
training box at every image, scored by the class prior) within ~40 s of one CPU core, and
draws its detections."""

import json

from nas_reference import DARTS_V2, run_cli

BUDGET = ["--data", "synthetic:128", "--channels", "8", "--cells", "5", "--fpn-channels", "32",
          "--head-norm", "gn", "--batch-size", "4", "--epochs", "8", "--lr", "0.02",
          "--warmup", "10", "--lr-steps", "7"]


def test_searched_cell_detector_beats_the_trivial_one(tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, err = run_cli(["nas", "detect", DARTS_V2, *BUDGET, "--out", out], capsys)
    assert code == 0, err
    s = json.loads((out / "summary.json").read_text())
    assert s["steps"] == 8 * 32 and s["map"] == s["map50"]
    assert 0 < s["trivial_map50"] < 0.1  # the mean box rarely overlaps a shape by IoU > 0.5
    assert s["map50"] > 2 * s["trivial_map50"] and s["map50"] > s["trivial_map50"] + 0.05, s
    assert "warning" not in s
    assert (out / "detections.png").stat().st_size > 10_000
    assert f"trivial mAP@0.5 {s['trivial_map50']:.4f}" in stdout
