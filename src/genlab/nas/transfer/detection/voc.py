"""PASCAL VOC from its official layout: VOCdevkit/VOC2007/{JPEGImages, Annotations,
ImageSets/Main/{trainval,test}.txt} (and VOC2012's trainval when present).

The protocol (mmdetection's VOC 07+12, Ren et al. 2015): train on VOC2007 trainval +
VOC2012 trainval, evaluate on VOC2007 test with the 11-point mAP at IoU 0.5. Every XML file
of the lists is parsed before anything is written, so a malformed file, a class outside the
20, a box outside its image or an empty list stops the command with one line naming the
file. Boxes become continuous coordinates ``(xmin - 1, ymin - 1, xmax, ymax)`` (VOC's
1-based inclusive pixels; metrics module docstring); ``difficult`` boxes are kept for the
evaluation (ignored there) and left out of training.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from genlab.core.errors import DataError
from genlab.nas.transfer.detection.records import DetectionImage

VOC_CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair",
               "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
               "sheep", "sofa", "train", "tvmonitor")


def devkit(root: Path) -> Path:
    """The VOCdevkit folder: ROOT/VOCdevkit, or ROOT itself when it holds VOC2007."""
    if (root / "VOCdevkit").is_dir():
        return root / "VOCdevkit"
    if (root / "VOC2007").is_dir():
        return root
    raise DataError(f"{root}: no VOCdevkit/VOC2007 folder (the VOC layout: "
                    "ROOT/VOCdevkit/VOC2007/{JPEGImages,Annotations,ImageSets/Main})")


def _require_dir(path: Path) -> Path:
    if not path.is_dir():
        raise DataError(f"{path}: missing folder (the VOC layout needs it)")
    return path


def image_list(year_dir: Path, split: str) -> list[str]:
    """The ids of ImageSets/Main/SPLIT.txt (DataError when missing or empty)."""
    file = _require_dir(year_dir / "ImageSets" / "Main") / f"{split}.txt"
    if not file.is_file():
        raise DataError(f"{file}: missing image list")
    ids = [line.split()[0] for line in file.read_text().splitlines() if line.strip()]
    if not ids:
        raise DataError(f"{file}: the image list is empty")
    return ids


def _number(node, tag: str, file: Path) -> float:
    found = node.find(tag)
    try:
        return float(found.text)
    except (AttributeError, TypeError, ValueError):
        raise DataError(f"{file}: <{tag}> missing or not a number") from None


def parse_annotation(file: Path, image: Path) -> DetectionImage:
    """One VOC XML file as a DetectionImage (module docstring)."""
    try:
        root = ET.parse(file).getroot()
    except (ET.ParseError, OSError) as exc:
        raise DataError(f"{file}: annotation does not parse ({exc})") from None
    size = root.find("size")
    if size is None:
        raise DataError(f"{file}: no <size> element")
    width, height = int(_number(size, "width", file)), int(_number(size, "height", file))
    boxes, labels, difficult = [], [], []
    for obj in root.findall("object"):
        name = (obj.findtext("name") or "").strip()
        if name not in VOC_CLASSES:
            raise DataError(f"{file}: class {name!r} is not one of the 20 VOC classes")
        bb = obj.find("bndbox")
        if bb is None:
            raise DataError(f"{file}: object {name!r} has no <bndbox>")
        x1, y1, x2, y2 = (_number(bb, t, file) for t in ("xmin", "ymin", "xmax", "ymax"))
        if not (1 <= x1 <= x2 <= width and 1 <= y1 <= y2 <= height):
            raise DataError(f"{file}: box ({x1:g}, {y1:g}, {x2:g}, {y2:g}) of {name!r} lies "
                            f"outside its {width}x{height} image")
        boxes.append([x1 - 1, y1 - 1, x2, y2])
        labels.append(VOC_CLASSES.index(name))
        difficult.append((obj.findtext("difficult") or "0").strip() == "1")
    if not image.is_file():
        raise DataError(f"{image}: missing image (listed, annotated in {file.name})")
    return DetectionImage(str(image), height, width,
                          np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
                          np.asarray(labels, dtype=np.int64),
                          np.asarray(difficult, dtype=bool))


def read_split(year_dir: Path, split: str) -> list[DetectionImage]:
    """Every image of ``year_dir``'s SPLIT list, parsed."""
    ann = _require_dir(year_dir / "Annotations")
    jpg = _require_dir(year_dir / "JPEGImages")
    return [parse_annotation(ann / f"{i}.xml", jpg / f"{i}.jpg")
            for i in image_list(year_dir, split)]


def read_voc(root: str | Path) -> tuple[list[DetectionImage], list[DetectionImage], list[str]]:
    """(train: 2007 trainval + 2012 trainval if present, test: 2007 test, class names)."""
    kit = devkit(Path(root))
    train = read_split(kit / "VOC2007", "trainval")
    if (kit / "VOC2012").is_dir():
        train += read_split(kit / "VOC2012", "trainval")
    test = read_split(kit / "VOC2007", "test")
    return train, test, list(VOC_CLASSES)
