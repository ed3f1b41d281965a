"""Evaluate a trained gaze run on a synthetic domain or on real data from disk."""

from __future__ import annotations

from pathlib import Path

from genlab.core.runs import RunDir
from genlab.core.trainer import resolve_device
from genlab.gaze.plots import gaze_arrow_grid, save_image_or_figure
from genlab.gaze.predict import load_run, resolve_run
from genlab.gaze.protocol import real_set, synthetic_set
from genlab.gaze.train import config_from_dict, error_stats, predict_set, router_stats


def evaluate_run(
    checkpoint: str | Path,
    out: str | Path,
    *,
    domain: str = "narrow-m",
    count: int = 1000,
    data_seed: int = 1,
    data_format: str = "synthetic",
    test_path: list[str] | None = None,
    image_root: str | None = None,
    device: str = "cpu",
) -> dict:
    """Mean/median angular error and router statistics of a run on new data; writes a folder."""
    dev = resolve_device(device)
    model, cfg_dict = load_run(checkpoint, dev)
    cfg = config_from_dict(cfg_dict)
    if data_format == "synthetic":
        data = synthetic_set(domain, count, data_seed, cfg.size)
        name = f"synthetic {domain} (seed {data_seed})"
    else:
        data = real_set(data_format, test_path or [], cfg.size, image_root=image_root)
        name = data.name
    run = RunDir(
        out,
        {
            "checkpoint": str(resolve_run(checkpoint)),
            "data": name,
            "count": len(data),
            "data_seed": data_seed,
            "device": device,
        },
    )
    pred = predict_set(model, data, dev)
    summary = {
        "data": name,
        "images": len(data),
        **error_stats(pred["pred"], data.gaze),
        "router": router_stats(pred["weights"], data.subject),
    }
    save_image_or_figure(
        run, gaze_arrow_grid(data.images, data.gaze, pred["pred"]), "gaze_arrows.png"
    )
    run.write_summary(summary)
    return summary
