"""``--data`` of `genlab nas detect`: ``voc:ROOT`` | ``coco:ROOT`` | ``synthetic[:N]``, read
and checked whole (every annotation) before the run folder is made."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from genlab.core.errors import ConfigError
from genlab.nas.transfer.detection.records import DetectionImage

KINDS = ("voc", "coco", "synthetic")


@dataclass
class DetectionData:
    kind: str
    train: list[DetectionImage]
    test: list[DetectionImage]
    classes: list[str]
    coco_ids: list[int] = field(default_factory=list)
    annotations: Path | None = None  # COCO: the val annotation file COCOeval reads


def parse_data(spec: str) -> tuple[str, str | None]:
    """(kind, ROOT or N) of a ``--data`` value; ConfigError naming the option."""
    kind, _, rest = str(spec).partition(":")
    if kind not in KINDS:
        raise ConfigError(f"--data {spec!r}: expected voc:ROOT, coco:ROOT or synthetic[:N]")
    if kind == "synthetic":
        if rest and (not rest.isdigit() or int(rest) < 2):
            raise ConfigError(f"--data {spec!r}: synthetic:N needs a whole number N >= 2")
        return kind, rest or None
    if not rest:
        raise ConfigError(f"--data {spec!r}: {kind}:ROOT needs the data set's folder")
    return kind, rest


def read_data(spec: str, seed: int = 0) -> DetectionData:
    kind, rest = parse_data(spec)
    if kind == "synthetic":
        from genlab.nas.transfer.detection.synthetic import DEFAULT_IMAGES, read_synthetic

        return DetectionData(kind, *read_synthetic(int(rest or DEFAULT_IMAGES), seed))
    if kind == "voc":
        from genlab.nas.transfer.detection.voc import read_voc

        return DetectionData(kind, *read_voc(rest))
    from genlab.nas.transfer.detection.coco import annotation_file, read_coco

    train, val, names, ids = read_coco(rest)
    return DetectionData(kind, train, val, names, ids, annotation_file(Path(rest), "val"))
