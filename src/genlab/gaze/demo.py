"""The MoEGaze section of `genlab demo`: baseline vs MoEGaze on one cross-domain task."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from genlab.core.report import Report
from genlab.core.runs import SUMMARY, read_json
from genlab.gaze.protocol import TASKS, synthetic_task
from genlab.gaze.train import GazeTrainConfig, train_gaze


def demo_section(out_dir: Path, report: Report, *, quick: bool = True) -> dict:
    """Train baseline and MoEGaze on E->M (small), add table and plots to ``report``.

    ``quick`` (about a minute on 2 CPU cores): 480 training images at 32x48, width 8,
    3 epochs. Otherwise the bench's per-run size. Finished runs are reused.
    """
    out_dir = Path(out_dir)
    task = "E->M"
    source, target = TASKS[task]
    base = GazeTrainConfig(
        source=source,
        target=target,
        size=[32, 48],
        width=8,
        epochs=3 if quick else 6,
        train_count=600 if quick else 1250,
        test_count=300 if quick else 500,
    )
    data = None
    rows, summaries = [], {}
    for model in ("baseline", "moegaze"):
        cfg = replace(base, model=model)
        folder = out_dir / model
        if (folder / SUMMARY).exists():
            summary = read_json(folder / SUMMARY)
        else:
            if data is None:
                data = synthetic_task(
                    source,
                    target,
                    train_count=base.train_count,
                    test_count=base.test_count,
                    size=base.size,
                )
            _, summary = train_gaze(cfg, data, folder, resume=folder.exists())
        summaries[model] = summary
        rows.append(
            {
                "model": model,
                "target error (deg)": summary["target_mean_deg"],
                "target median (deg)": summary["target_median_deg"],
                "source-val error (deg)": summary["val_mean_deg"],
                "train images": summary["train_images"],
                "train s": summary.get("train_seconds"),
            }
        )
    rel = lambda p: os.path.relpath(p, out_dir.parent)  # noqa: E731
    report.heading("MoEGaze: appearance-routed gaze experts (cross-domain, synthetic eyes)")
    report.text(
        f"Task {task}: train on the synthetic domain {source} (held-out subjects for "
        f"validation), test on the unseen domain {target}. Mean angular error in degrees. "
        "MoEGaze's router, experts and losses are our reconstruction of the AAAI-26 "
        "abstract. Full table: `genlab gaze bench --out runs/gaze_bench`."
    )
    report.table(rows, digits=2)
    moe = out_dir / "moegaze"
    report.image(
        rel(moe / "gaze_arrows.png"), "MoEGaze on the target domain: labels green, predictions red"
    )
    report.image(rel(moe / "router_assignment.png"), "share of images per expert, by domain")
    report.image(rel(moe / "loss_curves.png"), "training losses and angular error per epoch")
    return {
        "task": task,
        "rows": rows,
        "baseline_target_deg": summaries["baseline"]["target_mean_deg"],
        "moegaze_target_deg": summaries["moegaze"]["target_mean_deg"],
    }
