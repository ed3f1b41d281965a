"""Training cost of the gaze baseline vs MoEGaze per step, and loader-only throughput.

Measurements are interleaved (baseline, MoEGaze, baseline, ...), timed in CPU seconds of
this process (time.process_time) and summarised by medians, because other processes
share the CPU; the ratio is what matters. Writes gaze_train.json in --out.

    python benchmarks/gaze_train.py --out runs/bench
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from genlab.core.runs import write_json
from genlab.gaze.data.splits import step_batches
from genlab.gaze.models import build_gaze_model
from genlab.gaze.protocol import synthetic_set
from genlab.gaze.train import GazeTrainConfig, GazeTrainer, warmup_cosine


def time_steps(trainer: GazeTrainer, data, batch_size: int, steps: int) -> float:
    """Images per CPU-second over ``steps`` training steps (after one warm-up step)."""
    batches = list(data.load(step_batches(len(data), batch_size, 0, 0, steps + 1)))
    trainer.model.train()
    trainer.step(*batches[0])
    t0 = time.process_time()
    for x, labels in batches[1:]:
        trainer.step(x, labels)
    return steps * batch_size / (time.process_time() - t0)


def time_loader(data, batch_size: int, steps: int = 200) -> float:
    """Images per CPU-second of the in-memory batch iterator alone (no model)."""
    t0, n = time.process_time(), 0
    for x, _ in data.load(step_batches(len(data), batch_size, 0, 0, steps)):
        n += len(x)
        x.sum()  # touch the data
    return n / (time.process_time() - t0)


def make_trainer(cfg: GazeTrainConfig, **overrides) -> GazeTrainer:
    c = GazeTrainConfig(**{**cfg.__dict__, **overrides})
    model = build_gaze_model(c.model, **c.model_hparams(), init_seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=c.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(10**6, 1))
    return GazeTrainer(model, opt, schedule=schedule, progress_bar=False,
                       loss_weights={"balance": c.balance_weight,
                                     "appearance": c.appearance_weight})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--width", type=int, default=8)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = GazeTrainConfig(width=args.width)
    t0 = time.process_time()
    data = synthetic_set("broad-e", 512, 0, cfg.size)
    render_ips = len(data) / (time.process_time() - t0)
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
        "train_images_per_cpu_s": med,
        "train_images_per_cpu_s_samples": samples,
        "cost_ratio_vs_baseline": {k: med["baseline"] / v for k, v in med.items()},
        "loader_images_per_cpu_s": statistics.median(loader),
        "loader_over_training": statistics.median(loader) / max(med.values()),
        "render_images_per_cpu_s": render_ips,
    }
    write_json(args.out / "gaze_train.json", result)
    for k, v in med.items():
        print(f"{k:20s} {v:8.0f} img/cpu-s  cost x{result['cost_ratio_vs_baseline'][k]:.2f}")
    print(
        f"loader-only {result['loader_images_per_cpu_s']:.0f} img/cpu-s "
        f"({result['loader_over_training']:.0f}x the fastest training); "
        f"rendering {render_ips:.0f} img/cpu-s"
    )
    print(f"wrote {args.out / 'gaze_train.json'}")


if __name__ == "__main__":
    main()
