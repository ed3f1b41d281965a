"""Training throughput of the gaze baseline vs MoEGaze, and loader-only throughput.

Measurements are interleaved (baseline, MoEGaze, baseline, ...) and summarised by
medians, because other processes share the CPU; the ratio is what matters.
Writes gaze_train.json in --out.

    python benchmarks/gaze_train.py --out runs/bench
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from genlab.core.runs import write_json
from genlab.gaze.protocol import synthetic_set
from genlab.gaze.train import GazeTrainConfig, GazeTrainer, build_model


def time_steps(trainer: GazeTrainer, data, batch_size: int, steps: int) -> float:
    """Images per second over ``steps`` training steps (after one warm-up step)."""
    batches = list(data.batches(batch_size, 0, 0))
    trainer.model.train()
    trainer.step(*batches[0])
    t0 = time.perf_counter()
    for i in range(steps):
        trainer.step(*batches[i % len(batches)])
    return steps * batch_size / (time.perf_counter() - t0)


def time_loader(data, batch_size: int, rounds: int = 5) -> float:
    """Images per second of the in-memory batch iterator alone (no model)."""
    t0, n = time.perf_counter(), 0
    for r in range(rounds):
        for x, _ in data.batches(batch_size, 0, r):
            n += len(x)
            x.sum()  # touch the data
    return n / (time.perf_counter() - t0)


def make_trainer(cfg: GazeTrainConfig, **overrides) -> GazeTrainer:
    c = GazeTrainConfig(**{**cfg.__dict__, **overrides})
    torch.manual_seed(0)
    model = build_model(c.model, **c.model_hparams())
    opt = torch.optim.Adam(model.parameters(), lr=c.lr)
    return GazeTrainer(
        model,
        opt,
        balance_weight=c.balance_weight,
        appearance_weight=c.appearance_weight,
        progress_bar=False,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--width", type=int, default=16)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = GazeTrainConfig(width=args.width)
    t0 = time.perf_counter()
    data = synthetic_set("broad-e", 512, 0, cfg.size)
    render_ips = len(data) / (time.perf_counter() - t0)
    variants = {
        "baseline": {"model": "baseline"},
        "moegaze_soft": {"model": "moegaze", "routing": "soft"},
        "moegaze_hard_train": {"model": "moegaze", "routing": "hard-train-soft-infer"},
        "moegaze_K8": {"model": "moegaze", "experts": 8},
    }
    trainers = {k: make_trainer(cfg, **v) for k, v in variants.items()}
    samples = {k: [] for k in variants}
    loader = []
    for _ in range(args.rounds):  # interleaved
        for k, tr in trainers.items():
            samples[k].append(time_steps(tr, data, cfg.batch_size, args.steps))
        loader.append(time_loader(data, cfg.batch_size))
    med = {k: statistics.median(v) for k, v in samples.items()}
    result = {
        "config": {
            "size": cfg.size,
            "width": cfg.width,
            "batch_size": cfg.batch_size,
            "experts": cfg.experts,
            "threads": args.threads,
            "rounds": args.rounds,
            "steps": args.steps,
        },
        "train_images_per_s": med,
        "train_images_per_s_samples": samples,
        "cost_ratio_vs_baseline": {k: med["baseline"] / v for k, v in med.items()},
        "loader_images_per_s": statistics.median(loader),
        "loader_over_training": statistics.median(loader) / max(med.values()),
        "render_images_per_s": render_ips,
    }
    write_json(args.out / "gaze_train.json", result)
    for k, v in med.items():
        print(f"{k:20s} {v:8.0f} img/s  cost x{result['cost_ratio_vs_baseline'][k]:.2f}")
    print(
        f"loader-only {result['loader_images_per_s']:.0f} img/s "
        f"({result['loader_over_training']:.0f}x the fastest training); "
        f"rendering {render_ips:.0f} img/s"
    )
    print(f"wrote {args.out / 'gaze_train.json'}")


if __name__ == "__main__":
    main()
