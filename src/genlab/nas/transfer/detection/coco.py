"""COCO 2017 from its official layout: train2017/, val2017/ and
annotations/instances_{train,val}2017.json; scoring with pycocotools' COCOeval.

The protocol (mmdetection's RetinaNet 1x, Lin et al. 2017): train on train2017, report
val2017's COCO AP (IoU 0.50:0.95), AP50 and AP75. Category ids (1..90 with gaps) map to
contiguous labels in id order and back for the results file. Crowd boxes (``iscrowd``) and
boxes without area are left out of training, as are training images with no box left
(torchvision's references and mmdetection's ``filter_empty_gt``); COCOeval reads the crowds
from the annotation file itself. Every annotation is checked before anything is written: a
file that does not parse, an unknown category, a box outside its image (beyond one pixel of
rounding, which is clipped) or an empty image list stops with one line naming the file.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np

from genlab.core.errors import DataError
from genlab.nas.transfer.detection.records import DetectionImage

TOLERANCE = 1.0  # pixels a COCO box may overhang its image (float rounding in the files)


def annotation_file(root: Path, split: str) -> Path:
    return root / "annotations" / f"instances_{split}2017.json"


def load_json(file: Path) -> dict:
    if not file.is_file():
        raise DataError(f"{file}: missing annotation file (the COCO layout needs it)")
    try:
        data = json.loads(file.read_text())
    except (ValueError, OSError) as exc:
        raise DataError(f"{file}: annotation file does not parse ({exc})") from None
    if not isinstance(data, dict) or not all(k in data for k in ("images", "annotations",
                                                                  "categories")):
        raise DataError(f"{file}: not a COCO instances file (needs images, annotations, "
                        "categories)")
    return data


def _box(ann: dict, image: dict, file: Path) -> list[float]:
    try:
        x, y, w, h = (float(v) for v in ann["bbox"])
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{file}: annotation {ann.get('id')} has no valid bbox") from None
    W, H = float(image["width"]), float(image["height"])
    if (w < 0 or h < 0 or x < -TOLERANCE or y < -TOLERANCE or x + w > W + TOLERANCE
            or y + h > H + TOLERANCE):
        raise DataError(f"{file}: box [{x:g}, {y:g}, {w:g}, {h:g}] of annotation "
                        f"{ann.get('id')} lies outside its {int(W)}x{int(H)} image "
                        f"{image.get('file_name')}")
    return [max(x, 0.0), max(y, 0.0), min(x + w, W), min(y + h, H)]


def read_split(root: Path, split: str, category_ids: list[int] | None = None):
    """(images of SPLIT, sorted category ids, class names); DataError on bad input."""
    folder = root / f"{split}2017"
    if not folder.is_dir():
        raise DataError(f"{folder}: missing folder (the COCO layout needs it)")
    file = annotation_file(root, split)
    data = load_json(file)
    cats = sorted(data["categories"], key=lambda c: c["id"])
    ids = [int(c["id"]) for c in cats] if category_ids is None else category_ids
    label = {cid: i for i, cid in enumerate(ids)}
    if not data["images"]:
        raise DataError(f"{file}: the image list is empty")
    images = {int(im["id"]): im for im in data["images"]}
    per_image: dict[int, list] = {i: [] for i in images}
    for ann in data["annotations"]:
        if int(ann.get("category_id", -1)) not in label:
            raise DataError(f"{file}: annotation {ann.get('id')} has category "
                            f"{ann.get('category_id')}, not one of the file's categories")
        if int(ann.get("image_id", -1)) not in images:
            raise DataError(f"{file}: annotation {ann.get('id')} names image "
                            f"{ann.get('image_id')}, which the file does not list")
        im = images[int(ann["image_id"])]
        per_image[im["id"]].append((_box(ann, im, file), label[int(ann["category_id"])],
                                    bool(ann.get("iscrowd", 0))))
    items = []
    for image_id, im in images.items():
        path = folder / im["file_name"]
        if not path.is_file():
            raise DataError(f"{path}: missing image (listed in {file})")
        rows = per_image[image_id]
        items.append(DetectionImage(
            str(path), int(im["height"]), int(im["width"]),
            np.asarray([r[0] for r in rows], dtype=np.float32).reshape(-1, 4),
            np.asarray([r[1] for r in rows], dtype=np.int64),
            np.asarray([r[2] for r in rows], dtype=bool), image_id=image_id))
    return items, ids, [str(c["name"]) for c in cats]


def read_coco(root: str | Path):
    """(train items with a training box, val items, class names, category ids, val file)."""
    root = Path(root)
    train, ids, names = read_split(root, "train")
    val, _, _ = read_split(root, "val", ids)
    train = [it for it in train if len(it.training_boxes()[0])]
    if not train:
        raise DataError(f"{annotation_file(root, 'train')}: no training image has a box")
    return train, val, names, ids


def results_json(predictions, items, category_ids) -> list[dict]:
    """COCO results: one {image_id, category_id, bbox [x, y, w, h], score} per detection."""
    out = []
    for p, it in zip(predictions, items, strict=True):
        for box, score, label in zip(p["boxes"], p["scores"], p["labels"], strict=True):
            x1, y1, x2, y2 = (float(v) for v in box)
            out.append({"image_id": it.image_id, "category_id": category_ids[int(label)],
                        "bbox": [round(x1, 2), round(y1, 2), round(x2 - x1, 2),
                                 round(y2 - y1, 2)], "score": round(float(score), 5)})
    return out


def coco_eval(annotations: Path, results: list[dict]) -> tuple[dict, str]:
    """({"map", "map50", "map75"} as fractions, COCOeval's printed table) of ``results``;
    zeros when there is no detection (COCO.loadRes refuses an empty list)."""
    if not results:
        return {"map": 0.0, "map50": 0.0, "map75": 0.0}, "no detections\n"
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        gt = COCO(str(annotations))
        ev = COCOeval(gt, gt.loadRes(results), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    stats = [max(float(s), 0.0) for s in ev.stats[:3]]  # -1: no box of that kind
    return {"map": stats[0], "map50": stats[1], "map75": stats[2]}, text.getvalue()
