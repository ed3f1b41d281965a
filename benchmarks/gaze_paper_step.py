"""Step time of the paper-protocol models (ResNet-18, 224x224 faces) and the projected cost.

Times optimiser steps of the baseline and MoEGaze at the paper configuration (width 64,
ImageNet stem, 224x224, AdamW) on random images, on any device, and projects the wall
time of `genlab gaze paper` at its defaults (training steps only: data loading and
evaluation come on top). Run it on the machine that will run the protocol:

    python benchmarks/gaze_paper_step.py --out runs/bench --device cuda
    python benchmarks/gaze_paper_step.py --out runs/bench --device cpu --batch-size 8 --steps 3

Writes gaze_paper_step.json in --out.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from genlab.core.runs import write_json
from genlab.core.trainer import resolve_device
from genlab.gaze.data.gazeset import GazeLabels
from genlab.gaze.models import build_gaze_model
from genlab.gaze.studies.paper import PaperConfig
from genlab.gaze.train import GazeTrainer, warmup_cosine


def step_seconds(model_name: str, cfg, device, batch: int, steps: int) -> list[float]:
    """Wall seconds of ``steps`` training steps (after two warm-up steps)."""
    model = build_gaze_model(model_name, **cfg.model_hparams(), init_seed=0).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    trainer = GazeTrainer(model, opt, schedule=torch.optim.lr_scheduler.LambdaLR(
        opt, warmup_cosine(10**6, 1)), loss_weights={"balance": cfg.balance_weight,
                                                     "appearance": cfg.appearance_weight},
        progress_bar=False)
    x = torch.rand(batch, 3, *cfg.size, device=device)
    labels = GazeLabels.build(torch.rand(batch, 2) - 0.5, torch.arange(batch) % 8).to(device)
    times = []
    for i in range(steps + 2):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        trainer.step(x, labels)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    device = resolve_device(args.device)
    paper = PaperConfig()
    cfg = paper.base()
    result = {"device": str(device), "batch_size": args.batch_size, "size": cfg.size,
              "torch_threads": torch.get_num_threads(), "models": {}}
    for name in ("baseline", "moegaze"):
        times = step_seconds(name, cfg, device, args.batch_size, args.steps)
        med = statistics.median(times)
        result["models"][name] = {"median_step_s": med,
                                  "images_per_s": args.batch_size / med}
        print(f"{name:9s} {med * 1000:9.1f} ms/step  {args.batch_size / med:8.1f} images/s")
    per_image = {k: 1 / v["images_per_s"] for k, v in result["models"].items()}
    runs = len(paper.seeds) * len(paper.fractions) * 2  # per model, both sources
    images = paper.steps * paper.batch_size
    hours = sum(per_image.values()) * images * runs / 3600
    hours += per_image["baseline"] * images * 2 * 2 * len(paper.reference_seeds) / 3600
    result["projected_training_hours_paper_defaults"] = hours
    print(f"projected training time of `genlab gaze paper` at its defaults "
          f"({paper.steps} steps of {paper.batch_size}, {len(paper.seeds)} seeds): {hours:.1f} h "
          "plus data loading and evaluation")
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "gaze_paper_step.json", result)
    print(f"wrote {args.out / 'gaze_paper_step.json'}")


if __name__ == "__main__":
    main()
