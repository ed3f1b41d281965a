"""The transfer line of `genlab demo`: DARTS_V2's cell as a RetinaNet backbone on the embedded
synthetic shapes, against the trivial detector (genlab.nas.transfer.detection.metrics), with a
picture of its detections. A finished run is reused."""

from __future__ import annotations

from pathlib import Path

from genlab.core.report import Report
from genlab.nas.spaces.darts.genotype import DARTS_V2
from genlab.nas.transfer.detection.detect import DetectConfig, detect


def demo_config(quick: bool) -> DetectConfig:
    """The demo's budget (docs/nas_transfer.md, "The demo's budget"): the 64x64 shapes
    trained and scored at 128 px, where the shapes (44-80 px) meet RetinaNet's 32-101 px
    anchors of P3-P4, 32 epochs at lr 0.01 with lr / 10 for the last 4; quick on 128 images
    (1,024 iterations, about 70 s of one core), full on 256 (2,048)."""
    return DetectConfig(genotype=DARTS_V2, data="synthetic:128" if quick else "synthetic:256",
                        channels=8, cells=5, fpn_channels=32, head_norm="gn", batch_size=4,
                        epochs=32, lr=0.01, warmup=10, lr_steps=(28,), min_size=128,
                        max_size=128)


def found_text(found: dict) -> str:
    """``N of M`` shapes found and the other boxes, from a ``metrics.found_boxes`` record."""
    return (f"{found['found']} of {found['boxes']} shapes found, {found['other']} other "
            f"box(es)")


def detect_reading(summary: dict) -> str:
    """The line the report reads under detections.png: what the picture shows (its counts,
    ``summary["picture"]``), the same count over every held-out image, and mAP@0.5 against
    the trivial detector, every word that judges chosen by those numbers."""
    pic, every = summary["picture"], summary["found"]
    ours, trivial = summary["map50"], summary["trivial_map50"]
    verdict = ("well above" if ours > 2 * trivial and ours > trivial + 0.05 else
               "above" if ours > trivial else "not above")
    share = pic["found"] / pic["boxes"] if pic["boxes"] else 0.0
    finds = ("most of the shapes" if share > 0.5 else "some of the shapes" if pic["found"]
             else "none of the shapes")
    return (f"In the {pic['images']} images drawn the detector finds {finds}: "
            f"{found_text(pic)} (a shape is found by a box of its class scoring >= "
            f"{pic['score_threshold']:g} with IoU > {pic['iou_threshold']:g}; other boxes are "
            f"a wrong class, a second box on a shape, or no shape); over all "
            f"{every['images']} held-out images {found_text(every)}. mAP@0.5 {ours:.3f} after "
            f"{summary['steps']} iterations, {verdict} the trivial detector's {trivial:.3f} "
            "(each class's mean training box on every image). A learning check of the path "
            "search -> backbone -> detector, not a VOC or COCO figure.")


def demo_section(out_dir: Path, report: Report, *, quick: bool = True,
                 progress_bar=None) -> dict:
    """Train and score the synthetic detector; its line and picture in the report."""
    out_dir = Path(out_dir)
    cfg = demo_config(quick)
    summary = detect(cfg, out_dir, resume=(out_dir / "config.json").exists(),
                     progress_bar=progress_bar)
    report.heading("A searched cell as a detection backbone: DARTS_V2 (C=8, 5 cells) under "
                   "torchvision's FPN and RetinaNet on embedded shapes")
    report.text(f"`genlab nas detect` on {summary['train_images']} synthetic 64x64 images "
                f"(squares, disks, triangles on smooth textures; trained and scored at "
                f"{cfg.min_size} px), scored on {summary['eval_images']} held-out ones with "
                "the VOC 2007 11-point AP.")
    threshold = summary["picture"]["score_threshold"]
    report.image(f"{out_dir.name}/detections.png",
                 f"detections scoring >= {threshold:g} (solid, colour by class) and the true "
                 "boxes (dashed white on black)")
    report.reading(detect_reading(summary))
    return summary
