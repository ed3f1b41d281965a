"""Detection metrics: PASCAL VOC 2007's 11-point AP at IoU 0.5 (our code, the devkit's rules)
and the trivial detector every detection run is compared with.

VOC rules (VOCdevkit 2007 ``VOCevaldet.m``, as ported in py-faster-rcnn's ``voc_eval.py``):
per class, the detections of every image sorted by score (highest first, ties in input
order); each is matched to the ground-truth box of its image with the largest IoU; IoU above
0.5 with a non-difficult box not matched before is a true positive, with one already matched
a false positive (a duplicate), with a difficult box neither (the detection is ignored);
IoU at or below 0.5 is a false positive. Recall is over the non-difficult boxes; AP is the
mean over recall thresholds 0, 0.1, ..., 1 of the highest precision at a recall at least the
threshold (0 where none). The devkit's pixel-inclusive widths (+1) are ours as continuous
coordinates: the VOC reader shifts ``xmin``/``ymin`` by -1, so ``x2 - x1`` is the devkit's
width. A class without a non-difficult box has no AP (None) and is left out of the mean.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one xyxy ``box`` with each row of ``boxes`` (continuous coordinates)."""
    if len(boxes) == 0:
        return np.zeros(0)
    ix = np.clip(np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0]), 0, None)
    iy = np.clip(np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1]), 0, None)
    inter = ix * iy
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return inter / np.maximum(area + areas - inter, np.finfo(float).tiny)


def eleven_point_ap(recall: np.ndarray, precision: np.ndarray) -> float:
    """VOC 2007's AP: mean over t in 0, 0.1, ..., 1 of max precision at recall >= t."""
    total = 0.0
    for t in np.linspace(0.0, 1.0, 11):
        reached = precision[recall >= t - 1e-12]
        total += float(reached.max()) if reached.size else 0.0
    return total / 11.0


def match_class(detections: Sequence[tuple[int, float, Sequence[float]]],
                truths: dict[int, tuple[np.ndarray, np.ndarray]],
                iou_threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray, int]:
    """True/false-positive flags of one class's ``detections`` (image, score, box), in score
    order, and the number of non-difficult boxes; ``truths`` maps an image to its (boxes,
    difficult) of this class."""
    npos = int(sum(int((~d).sum()) for _, d in truths.values()))
    order = sorted(range(len(detections)), key=lambda i: -detections[i][1])
    used = {img: np.zeros(len(b), dtype=bool) for img, (b, _) in truths.items()}
    tp, fp = [], []
    for i in order:
        img, _, box = detections[i]
        boxes, difficult = truths.get(img, (np.zeros((0, 4)), np.zeros(0, dtype=bool)))
        ious = box_iou(np.asarray(box, dtype=float), boxes)
        best = int(ious.argmax()) if ious.size else -1
        if best >= 0 and ious[best] > iou_threshold:
            if difficult[best]:
                continue  # neither true nor false positive
            hit = not used[img][best]
            used[img][best] = True
            tp.append(hit)
            fp.append(not hit)
        else:
            tp.append(False)
            fp.append(True)
    return np.asarray(tp, dtype=bool), np.asarray(fp, dtype=bool), npos


def class_ap(detections, truths, iou_threshold: float = 0.5) -> float | None:
    """11-point AP of one class (module docstring); None without a non-difficult box."""
    tp, fp, npos = match_class(detections, truths, iou_threshold)
    if npos == 0:
        return None
    ctp, cfp = np.cumsum(tp), np.cumsum(fp)
    recall = ctp / npos
    precision = ctp / np.maximum(ctp + cfp, np.finfo(float).tiny)
    return eleven_point_ap(recall, precision)


def class_lists(predictions: Sequence[dict], targets: Sequence[dict], c: int):
    """Class ``c``'s detections ``[(image, score, box)]`` and truths ``{image: (boxes,
    difficult)}`` over the images (``voc_map``'s arguments), as ``match_class`` takes them."""
    dets, truths = [], {}
    for img, (p, t) in enumerate(zip(predictions, targets, strict=True)):
        labels = np.asarray(t["labels"])
        keep = labels == c
        boxes = np.asarray(t["boxes"], dtype=float).reshape(-1, 4)[keep]
        diff = np.asarray(t.get("difficult", np.zeros(len(labels), dtype=bool)),
                          dtype=bool)[keep]
        truths[img] = (boxes, diff)
        pl = np.asarray(p["labels"])
        pb = np.asarray(p["boxes"], dtype=float).reshape(-1, 4)
        ps = np.asarray(p["scores"], dtype=float)
        dets += [(img, float(s), b) for s, b in zip(ps[pl == c], pb[pl == c], strict=True)]
    return dets, truths


def voc_map(predictions: Sequence[dict], targets: Sequence[dict], num_classes: int,
            iou_threshold: float = 0.5) -> dict:
    """Per-class 11-point AP and their mean (mAP@0.5) over images.

    ``predictions[i]``: ``boxes`` (n, 4) xyxy, ``scores`` (n,), ``labels`` (n,) of image i;
    ``targets[i]``: ``boxes``, ``labels`` and optionally ``difficult`` (bool) of image i.
    Labels are 0..num_classes-1. Returns ``{"ap": [AP or None per class], "map": mean}``.
    """
    aps: list[float | None] = []
    for c in range(num_classes):
        dets, truths = class_lists(predictions, targets, c)
        aps.append(class_ap(dets, truths, iou_threshold))
    scored = [a for a in aps if a is not None]
    return {"ap": aps, "map": float(np.mean(scored)) if scored else 0.0}


def found_boxes(predictions: Sequence[dict], targets: Sequence[dict], num_classes: int,
                score_threshold: float, iou_threshold: float = 0.5) -> dict:
    """What a picture of the detections scoring at least ``score_threshold`` shows, by the
    VOC matching of ``match_class`` on those detections alone: ``boxes``, the non-difficult
    true boxes; ``found``, those a kept detection of their class finds (IoU above
    ``iou_threshold``, each box found once, higher scores first); ``other``, the kept
    detections that find no box (misplaced, wrong class, or a second one on a found box);
    kept detections on a difficult box count in neither."""
    boxes = found = other = 0
    for c in range(num_classes):
        dets, truths = class_lists(predictions, targets, c)
        tp, fp, npos = match_class([d for d in dets if d[1] >= score_threshold], truths,
                                   iou_threshold)
        boxes, found, other = boxes + npos, found + int(tp.sum()), other + int(fp.sum())
    return {"score_threshold": score_threshold, "iou_threshold": iou_threshold,
            "images": len(targets), "boxes": boxes, "found": found, "other": other}


def trivial_detector(train_targets: Sequence[dict], train_sizes: Sequence[tuple[int, int]],
                     num_classes: int):
    """The trivial detector of a training set: at every image, for each class seen in
    training, that class's mean box (in coordinates relative to the image's width and height)
    scored by the class's share of the training boxes. Returns ``predict(height, width)``."""
    sums, counts = np.zeros((num_classes, 4)), np.zeros(num_classes)
    for t, (h, w) in zip(train_targets, train_sizes, strict=True):
        scale = np.array([w, h, w, h], dtype=float)
        for box, label in zip(np.asarray(t["boxes"], dtype=float).reshape(-1, 4),
                              np.asarray(t["labels"]), strict=True):
            sums[label] += box / scale
            counts[label] += 1
    seen = np.flatnonzero(counts)
    mean = sums[seen] / counts[seen, None]
    prior = counts[seen] / max(counts.sum(), 1)

    def predict(height: int, width: int) -> dict:
        scale = np.array([width, height, width, height], dtype=float)
        return {"boxes": mean * scale, "scores": prior.copy(), "labels": seen.copy()}

    return predict
