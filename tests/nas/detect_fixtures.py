"""Small detection sets in the official layouts, written into a test's tmp_path: VOC
(VOCdevkit/VOC2007 with JPEGs, XML annotations, ImageSets/Main lists) and COCO (train2017/,
val2017/, annotations/instances_*.json). Boxes are drawn as filled rectangles in the JPEGs."""

import json
from pathlib import Path

import numpy as np
from PIL import Image

# per image: (width, height, [(class, xmin, ymin, xmax, ymax, difficult)])  (VOC: 1-based)
VOC_TRAIN = {
    "000001": (64, 48, [("dog", 5, 6, 30, 40, 0), ("person", 35, 2, 60, 45, 0)]),
    "000002": (64, 48, [("cat", 10, 10, 50, 40, 0)]),
    "000003": (48, 64, [("dog", 1, 1, 48, 30, 0), ("cat", 8, 35, 40, 64, 1)]),
    "000004": (64, 48, [("person", 20, 5, 44, 47, 0)]),
}
VOC_TEST = {
    "000005": (64, 48, [("dog", 4, 4, 28, 36, 0), ("cat", 34, 10, 62, 44, 1)]),
    "000006": (48, 64, [("person", 10, 3, 38, 60, 0)]),
}
COLOURS = {"dog": (200, 40, 40), "cat": (40, 200, 40), "person": (40, 40, 200)}


def write_jpeg(path: Path, width: int, height: int, boxes) -> None:
    rng = np.random.default_rng(len(str(path)))
    img = rng.integers(90, 140, (height, width, 3)).astype(np.uint8)
    for name, x1, y1, x2, y2, *_ in boxes:
        img[int(y1) - 1:int(y2), int(x1) - 1:int(x2)] = COLOURS.get(name, (255, 255, 0))
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img).save(path, quality=95)


def voc_xml(width: int, height: int, objects) -> str:
    parts = [f"<annotation><folder>VOC2007</folder><size><width>{width}</width>"
             f"<height>{height}</height><depth>3</depth></size>"]
    for name, x1, y1, x2, y2, diff in objects:
        parts.append(f"<object><name>{name}</name><pose>Unspecified</pose><truncated>0"
                     f"</truncated><difficult>{diff}</difficult><bndbox><xmin>{x1}</xmin>"
                     f"<ymin>{y1}</ymin><xmax>{x2}</xmax><ymax>{y2}</ymax></bndbox></object>")
    return "".join(parts) + "</annotation>"


def make_voc(root: Path, train=VOC_TRAIN, test=VOC_TEST, year="VOC2007") -> Path:
    base = root / "VOCdevkit" / year
    (base / "Annotations").mkdir(parents=True, exist_ok=True)
    (base / "ImageSets" / "Main").mkdir(parents=True, exist_ok=True)
    for split, images in (("trainval", train), ("test", test)):
        (base / "ImageSets" / "Main" / f"{split}.txt").write_text(
            "".join(f"{i}\n" for i in images))
        for i, (w, h, objs) in images.items():
            (base / "Annotations" / f"{i}.xml").write_text(voc_xml(w, h, objs))
            write_jpeg(base / "JPEGImages" / f"{i}.jpg", w, h, objs)
    return root


# COCO: category ids with gaps; per image (id, width, height, [(cat, x, y, w, h, crowd)])
COCO_CATS = [{"id": 3, "name": "car"}, {"id": 18, "name": "dog"}]
COCO_TRAIN = [(11, 64, 48, [(3, 4, 5, 20, 30, 0), (18, 30, 8, 30, 36, 0)]),
              (12, 64, 48, [(18, 10, 6, 40, 34, 0), (3, 0, 0, 64, 48, 1)]),
              (13, 48, 64, [(3, 6, 10, 30, 40, 0)]),
              (14, 64, 48, [])]
COCO_VAL = [(21, 64, 48, [(3, 5, 5, 25, 30, 0), (18, 34, 10, 26, 34, 0)]),
            (22, 48, 64, [(18, 8, 12, 30, 44, 0)])]
COCO_NAMES = {3: "car", 18: "dog"}


def coco_json(images) -> dict:
    out = {"images": [], "annotations": [], "categories": COCO_CATS}
    for image_id, w, h, anns in images:
        out["images"].append({"id": image_id, "width": w, "height": h,
                              "file_name": f"{image_id:012d}.jpg"})
        for cat, x, y, bw, bh, crowd in anns:
            out["annotations"].append({"id": len(out["annotations"]) + 1, "image_id": image_id,
                                       "category_id": cat, "bbox": [x, y, bw, bh],
                                       "area": bw * bh, "iscrowd": crowd})
    return out


def make_coco(root: Path) -> Path:
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    for split, images in (("train", COCO_TRAIN), ("val", COCO_VAL)):
        (root / "annotations" / f"instances_{split}2017.json").write_text(
            json.dumps(coco_json(images)))
        for image_id, w, h, anns in images:
            boxes = [(COCO_NAMES[c], x + 1, y + 1, x + bw, y + bh) for c, x, y, bw, bh, cr in anns
                     if not cr]
            write_jpeg(root / f"{split}2017" / f"{image_id:012d}.jpg", w, h, boxes)
    return root
