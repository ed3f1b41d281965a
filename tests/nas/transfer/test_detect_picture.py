"""What detections.png shows, counted by hand: shapes found by a box of their class above the
score threshold (IoU above 0.5, each shape once), the other boxes drawn, and a picture that
draws exactly the counted boxes."""

import numpy as np

from genlab.nas.transfer.detection.evaluation import picture_found, plot_detections
from genlab.nas.transfer.detection.metrics import found_boxes
from genlab.nas.transfer.detection.records import DetectionImage

CLASSES = ["square", "disk", "triangle"]


def _image(boxes, labels, difficult=None):
    n = len(labels)
    return DetectionImage("", 64, 64, np.asarray(boxes, np.float32).reshape(-1, 4),
                          np.asarray(labels, np.int64),
                          np.asarray(difficult or [0] * n, bool),
                          pixels=np.zeros((64, 64, 3), np.uint8))


def _pred(rows):  # rows: (label, score, box)
    return {"labels": np.asarray([r[0] for r in rows], int),
            "scores": np.asarray([r[1] for r in rows], np.float32),
            "boxes": np.asarray([r[2] for r in rows], np.float32).reshape(-1, 4)}


# image 0: a square and a disk; image 1: a triangle and a difficult square; image 2: a disk
ITEMS = [_image([[0, 0, 10, 10], [20, 20, 30, 30]], [0, 1]),
         _image([[5, 5, 15, 15], [30, 30, 40, 40]], [2, 0], [0, 1]),
         _image([[40, 40, 60, 60]], [1])]
PREDS = [_pred([(0, 0.9, [0, 0, 10, 10]),     # square found
                (1, 0.8, [0, 0, 10, 10]),     # disk on the square: wrong class, other
                (0, 0.6, [1, 1, 10, 10]),     # second square box, IoU 0.81: other
                (1, 0.2, [20, 20, 30, 30])]),  # the disk, found only below 0.5
         _pred([(2, 0.5, [5, 5, 15, 15]),     # triangle at exactly 0.5: drawn and found
                (2, 0.7, [44, 44, 54, 54]),   # on no shape: other
                (0, 0.9, [30, 30, 40, 40])]),  # on the difficult square: neither
         _pred([(1, 0.95, [40, 40, 60, 80])])]  # IoU exactly 0.5 with the disk: other


def test_found_and_other_boxes_by_hand():
    targets = [it.target() for it in ITEMS]
    at = {t: found_boxes(PREDS, targets, 3, t) for t in (0.1, 0.5, 0.99)}
    # non-difficult shapes: square, disk (image 0), triangle (1), disk (2) = 4
    assert [(at[t]["found"], at[t]["other"]) for t in (0.1, 0.5, 0.99)] == \
        [(3, 4), (2, 4), (0, 0)]
    assert {a["boxes"] for a in at.values()} == {4}
    assert at[0.5] == {"score_threshold": 0.5, "iou_threshold": 0.5, "images": 3,
                       "boxes": 4, "found": 2, "other": 4}


def test_picture_counts_are_the_first_images_and_add_up():
    total, per_image = picture_found(ITEMS, PREDS, CLASSES, count=2, threshold=0.5)
    assert [(c["boxes"], c["found"], c["other"]) for c in per_image] == [(2, 1, 2), (1, 1, 1)]
    assert (total["images"], total["boxes"], total["found"], total["other"]) == (2, 3, 2, 3)


class _Run:  # the run folder as plot_detections sees it; keeps the figure
    is_main = True

    def save_figure(self, fig, name):
        self.fig, self.name = fig, name


def test_the_picture_draws_the_counted_boxes_and_states_them():
    run = _Run()
    total = plot_detections(run, ITEMS, PREDS, CLASSES, count=3, threshold=0.5)
    assert total == found_boxes(PREDS, [it.target() for it in ITEMS], 3, 0.5)
    axes = [ax for ax in run.fig.axes if ax.images]
    assert len(axes) == 3 and run.name == "detections.png"
    for ax, item, pred in zip(axes, ITEMS, PREDS, strict=True):
        solid = [p for p in ax.patches if p.get_linestyle() == "solid" and p.get_linewidth() == 2]
        dashed = [p for p in ax.patches if p.get_linestyle() == "--"]
        assert len(solid) == int((pred["scores"] >= 0.5).sum())  # every drawn one, no other
        assert len(dashed) == len(item.boxes)
    assert [ax.get_title() for ax in axes] == ["found 1 of 2, 2 other", "found 1 of 1, 1 other",
                                               "found 0 of 1, 1 other"]
    assert run.fig._suptitle.get_text().startswith("2 of 4 true boxes")
    assert "scoring >= 0.5" in run.fig._suptitle.get_text()
