"""`genlab nas detect`: a searched cell as a detection backbone (genlab.nas.transfer)."""

from __future__ import annotations

from pathlib import Path

import typer

from genlab.cli import options


def detect(cfg, out: Path, resume: bool) -> None:
    """Train and score a detector on a searched backbone + FPN: map, map50 in summary.json."""
    from genlab.nas.transfer.detection.detect import detect as run_detect

    s = run_detect(cfg, out, resume=resume)
    extra = f"   AP75 {s['map75']:.4f}" if "map75" in s else ""
    typer.echo(f"mAP {s['map']:.4f}   mAP@0.5 {s['map50']:.4f}{extra}   trivial mAP@0.5 "
               f"{s['trivial_map50']:.4f}   parameters {s['params']:,}")
    options.closing(out)
