"""The transfer line of `genlab demo`: DARTS_V2's cell as a RetinaNet backbone on the embedded
synthetic shapes, against the trivial detector (genlab.nas.transfer.detection.metrics), with a
picture of its detections. A finished run is reused."""

from __future__ import annotations

from pathlib import Path

from genlab.core.report import Report
from genlab.nas.spaces.darts.genotype import DARTS_V2
from genlab.nas.transfer.detection.detect import DetectConfig, detect


def demo_config(quick: bool) -> DetectConfig:
    """The learning check's budget: the test's (quick, ~1 minute) or the full one of results.md."""
    return DetectConfig(genotype=DARTS_V2, data="synthetic:128" if quick else "synthetic:256",
                        channels=8, cells=5, fpn_channels=32, head_norm="gn", batch_size=4,
                        epochs=5 if quick else 8, lr=0.02, warmup=10,
                        lr_steps=(4,) if quick else None)


def detect_reading(summary: dict) -> str:
    """The line the report reads: the detector against the trivial one, from the numbers."""
    ours, trivial = summary["map50"], summary["trivial_map50"]
    verdict = ("well above" if ours > 2 * trivial and ours > trivial + 0.05 else
               "above" if ours > trivial else "not above")
    return (f"mAP@0.5 {ours:.3f} after {summary['steps']} iterations, {verdict} the trivial "
            f"detector's {trivial:.3f} (each class's mean training box on every image): the "
            "searched cell's backbone learns to find the shapes. A learning check of the path "
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
                f"(squares, disks, triangles on smooth textures), scored on "
                f"{summary['eval_images']} held-out ones with the VOC 2007 11-point AP.")
    report.reading(detect_reading(summary))
    report.image(f"{out_dir.name}/detections.png",
                 "detections scoring >= 0.3 (colour) and the true boxes (white, dashed)")
    return summary
