"""The transfer line of the demo: its reading is computed from the boxes its picture draws and
from the numbers, its budget is valid, and the section runs end to end at a tiny budget."""

import json
from dataclasses import replace

import numpy as np
from nas_reference import DARTS_V2 as UPSTREAM_DARTS_V2

from genlab.core.report import Report
from genlab.nas.spaces.darts.genotype import parse_darts_genotype
from genlab.nas.transfer.detection import demo
from genlab.nas.transfer.detection.demo import DARTS_V2, demo_config, detect_reading
from genlab.nas.transfer.detection.metrics import found_boxes


def _truth(boxes, labels):
    return {"boxes": np.asarray(boxes, float), "labels": np.asarray(labels),
            "difficult": np.zeros(len(labels), bool)}


def _pred(rows):  # rows: (label, score, box)
    return {"labels": np.asarray([r[0] for r in rows], int),
            "scores": np.asarray([r[1] for r in rows], float),
            "boxes": np.asarray([r[2] for r in rows], float).reshape(-1, 4)}


# three shapes in two images: the square found, the disk found only at a low score, the
# triangle boxed as a disk (another box) and once more off any shape
TARGETS = [_truth([[0, 0, 20, 20], [30, 30, 50, 50]], [0, 1]), _truth([[10, 10, 40, 40]], [2])]
PREDS = [_pred([(0, 0.8, [0, 0, 20, 20]), (1, 0.3, [30, 30, 50, 50])]),
         _pred([(1, 0.6, [10, 10, 40, 40]), (2, 0.7, [0, 40, 20, 60])])]


def summary(picture, found, ours=0.162, trivial=0.043):
    return {"picture": picture, "found": found, "map50": ours, "trivial_map50": trivial,
            "steps": 160}


def test_reading_counts_the_shapes_the_picture_draws():
    at_half = found_boxes(PREDS, TARGETS, 3, 0.5)
    every = found_boxes(PREDS * 2, TARGETS * 2, 3, 0.5)
    text = detect_reading(summary(at_half, every))
    assert ("In the 2 images drawn the detector finds some of the shapes: 1 of 3 shapes "
            "found, 2 other box(es) (a shape is found by a box of its class scoring >= 0.5 "
            "with IoU > 0.5;") in text
    assert "over all 4 held-out images 2 of 6 shapes found, 4 other box(es)." in text
    low = detect_reading(summary(found_boxes(PREDS, TARGETS, 3, 0.25), every))
    assert "finds most of the shapes: 2 of 3 shapes found, 2 other box(es)" in low
    assert "scoring >= 0.25" in low
    none = detect_reading(summary(found_boxes(PREDS, TARGETS, 3, 0.9), every))
    assert "finds none of the shapes: 0 of 3 shapes found, 0 other box(es)" in none


def test_reading_names_the_map_verdict_from_the_numbers():
    pic = found_boxes(PREDS, TARGETS, 3, 0.5)

    def reading(ours, trivial):
        return detect_reading(summary(pic, pic, ours, trivial))

    assert "0.162 after 160 iterations, well above the trivial detector's 0.043" in \
        reading(0.162, 0.043)
    assert ", above the trivial detector's 0.040" in reading(0.06, 0.04)
    assert "not above the trivial detector's 0.050" in reading(0.05, 0.05)


def test_the_demo_budget_is_valid_and_the_cell_is_upstreams_darts_v2():
    for quick in (True, False):
        demo_config(quick).validate()
    assert parse_darts_genotype(DARTS_V2) == parse_darts_genotype(UPSTREAM_DARTS_V2)


def test_the_section_runs_at_a_tiny_budget_and_reads_its_picture(tmp_path, monkeypatch):
    real = demo.demo_config
    monkeypatch.setattr(demo, "demo_config", lambda quick: replace(
        real(quick), data="synthetic:8", max_steps=2, min_size=64, max_size=64))
    report = Report("demo")
    result = demo.demo_section(tmp_path / "transfer", report)
    saved = json.loads((tmp_path / "transfer" / "summary.json").read_text())
    assert result == saved and saved["steps"] == 2
    pic, every = saved["picture"], saved["found"]
    assert pic["images"] == 8 and every["images"] == saved["eval_images"] == 16
    assert 0 <= pic["found"] <= pic["boxes"] <= every["boxes"]
    assert (tmp_path / "transfer" / "detections.png").stat().st_size > 10_000
    md = report.markdown()
    assert f"{pic['found']} of {pic['boxes']} shapes found, {pic['other']} other box(es)" in md
    assert f"{every['found']} of {every['boxes']} shapes found" in md
    assert md.index("transfer/detections.png") < md.index("In the 8 images drawn")
    again = Report("demo")  # a finished run is reused, its reading the same
    assert demo.demo_section(tmp_path / "transfer", again) == saved
    assert detect_reading(saved) in again.markdown()
