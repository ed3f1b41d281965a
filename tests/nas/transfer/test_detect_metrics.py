"""VOC 2007 11-point AP against hand-worked precision/recall curves (difficult boxes ignored,
duplicates false positives, IoU exactly 0.5 a miss), the trivial detector by hand, and COCOeval
on perfect and empty results through the COCO results file."""

import numpy as np
import pytest

from genlab.nas.transfer.detection.metrics import (
    box_iou,
    class_ap,
    eleven_point_ap,
    trivial_detector,
    voc_map,
)


def _truth(boxes, labels, difficult=None):
    return {"boxes": np.asarray(boxes, float), "labels": np.asarray(labels),
            "difficult": np.asarray(difficult or [0] * len(labels), bool)}


def _pred(rows):  # rows: (label, score, box)
    return {"labels": np.asarray([r[0] for r in rows], int),
            "scores": np.asarray([r[1] for r in rows], float),
            "boxes": np.asarray([r[2] for r in rows], float).reshape(-1, 4)}


# image A: class 0 box a1 and a difficult a2, class 1 box; image B: class 0 boxes b1, b2
TARGETS = [_truth([[0, 0, 10, 10], [20, 0, 30, 10], [40, 40, 50, 50]], [0, 0, 1], [0, 1, 0]),
           _truth([[0, 0, 10, 10], [50, 50, 60, 60]], [0, 0])]
PREDS = [_pred([(0, 0.9, [0, 0, 10, 10]),      # TP a1
                (0, 0.8, [0, 0, 10, 9]),       # IoU 0.9 with a1, already matched: FP
                (0, 0.7, [20, 0, 30, 10]),     # the difficult a2: ignored
                (1, 0.95, [40, 40, 50, 50])]),  # class 1: TP
         _pred([(0, 0.6, [30, 30, 40, 40]),    # no overlap: FP
                (0, 0.5, [0, 0, 10, 10]),      # TP b1
                (0, 0.4, [50, 50, 60, 55]),    # IoU exactly 0.5 with b2: FP (needs > 0.5)
                (2, 0.3, [0, 0, 5, 5])])]      # class 2 has no box: no AP


def test_hand_worked_curve():
    # class 0 after ignoring the difficult hit: TP FP FP TP FP, 3 positives
    # recall 1/3 1/3 1/3 2/3 2/3, precision 1 1/2 1/3 1/2 2/5
    # thresholds 0-0.3: max precision 1; 0.4-0.6: 1/2; 0.7-1: none -> 0
    res = voc_map(PREDS, TARGETS, 3)
    assert res["ap"][0] == pytest.approx((4 * 1 + 3 * 0.5) / 11)
    assert res["ap"][1] == pytest.approx(1.0)
    assert res["ap"][2] is None
    assert res["map"] == pytest.approx((0.5 + 1.0) / 2)


def test_order_of_detections_does_not_matter_scores_do():
    shuffled = [{k: v[::-1] for k, v in p.items()} for p in PREDS]
    assert voc_map(shuffled, TARGETS, 3)["ap"] == voc_map(PREDS, TARGETS, 3)["ap"]
    # one hit of three boxes: recall 1/3 at precision 1 -> thresholds 0, 0.1, 0.2, 0.3
    one = [_pred([(0, 0.9, [0, 0, 10, 10])]), _pred([])]
    assert voc_map(one, TARGETS, 3)["ap"][0] == pytest.approx(4 / 11)
    # the same hit scored below a false positive: precision 1/2 at recall 1/3
    two = [_pred([(0, 0.5, [0, 0, 10, 10]), (0, 0.9, [70, 70, 80, 80])]), _pred([])]
    assert voc_map(two, TARGETS, 3)["ap"][0] == pytest.approx(4 * 0.5 / 11)


def test_eleven_points_and_iou_by_hand():
    assert eleven_point_ap(np.array([0.5, 1.0]), np.array([1.0, 0.5])) == pytest.approx(
        (6 * 1 + 5 * 0.5) / 11)
    assert box_iou(np.array([0, 0, 10, 10.]), np.array([[5, 0, 15, 10.]]))[0] == \
        pytest.approx(50 / 150)
    only_difficult = {0: (np.array([[0, 0, 10, 10.]]), np.array([True]))}
    assert class_ap([(0, 1.0, [0, 0, 10, 10])], only_difficult) is None


def test_trivial_detector_by_hand():
    # class 0: two boxes at relative (0.1, 0.1, 0.3, 0.3); class 1: one at (0, 0, 0.5, 0.5)
    targets = [{"boxes": np.array([[10, 10, 30, 30.], [0, 0, 50, 50.]]),
                "labels": np.array([0, 1])},
               {"boxes": np.array([[20, 10, 60, 30.]]), "labels": np.array([0])}]
    predict = trivial_detector(targets, [(100, 100), (100, 200)], num_classes=3)
    p = predict(50, 100)
    assert p["labels"].tolist() == [0, 1]
    np.testing.assert_allclose(p["boxes"], [[10, 5, 30, 15], [0, 0, 50, 25]])
    np.testing.assert_allclose(p["scores"], [2 / 3, 1 / 3])


def test_coco_eval_of_perfect_and_empty_results(tmp_path):
    pytest.importorskip("pycocotools")
    from detect_fixtures import make_coco

    from genlab.nas.transfer.detection.coco import (
        annotation_file,
        coco_eval,
        read_coco,
        results_json,
    )

    root = make_coco(tmp_path / "coco")
    _, val, names, ids = read_coco(root)
    assert names == ["car", "dog"] and ids == [3, 18]
    perfect = [{"boxes": it.boxes, "scores": np.ones(len(it.boxes)), "labels": it.labels}
               for it in val]
    results = results_json(perfect, val, ids)
    assert {r["category_id"] for r in results} == {3, 18}  # labels mapped back to the ids
    figures, text = coco_eval(annotation_file(root, "val"), results)
    assert figures == {"map": pytest.approx(1.0), "map50": pytest.approx(1.0),
                       "map75": pytest.approx(1.0)}
    assert "Average Precision" in text
    # swapping the two classes' labels: nothing matches
    swapped = [{**p, "labels": 1 - p["labels"]} for p in perfect]
    assert coco_eval(annotation_file(root, "val"), results_json(swapped, val, ids))[0]["map"] \
        == pytest.approx(0.0)
    assert coco_eval(annotation_file(root, "val"), [])[0] == {"map": 0.0, "map50": 0.0,
                                                                "map75": 0.0}
