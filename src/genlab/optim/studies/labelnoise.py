"""Label-noise robustness on digits: clean test accuracy of each optimiser at each noise rate.

The protocol mirrors the CIFAR-10 label-noise experiments of the SAM literature (Foret et al.
2021, section 3.3): a fraction of the training labels is flipped (symmetric noise by default,
see :mod:`genlab.optim.studies.noise`), the model trains on the noisy labels, and the
accuracy on the clean test set is reported (final epoch, no early stopping), as mean and
standard deviation over seeds. Model size and epochs are ours (digits, CPU).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from genlab.core.errors import ConfigError
from genlab.core.report import figure
from genlab.core.runs import RunDir
from genlab.optim.studies.grid import expand, run_grid
from genlab.optim.studies.train import TrainConfig


@dataclass
class LabelNoiseConfig:
    rates: list[float] = field(default_factory=lambda: [0.2, 0.4, 0.6])
    optimizers: list[str] = field(default_factory=lambda: ["sgd", "sam", "csam_identity",
                                                           "acsam_identity"])
    seeds: int = 3
    noise_kind: str = "symmetric"
    arch: str = "mlp"
    width: int = 128
    depth: int = 2
    lr: float = 0.05
    momentum: float = 0.9
    batch_size: int = 32
    epochs: int = 30
    rho: float = 0.1
    seed: int = 0

    def base(self) -> TrainConfig:
        return TrainConfig(arch=self.arch, width=self.width, depth=self.depth, lr=self.lr,
                           momentum=self.momentum, batch_size=self.batch_size,
                           epochs=self.epochs, rho=self.rho, noise_kind=self.noise_kind,
                           measure=False)

    def axes(self) -> dict[str, list]:
        return {"label_noise": self.rates, "optimizer": self.optimizers,
                "seed": [self.seed + s for s in range(self.seeds)]}

    def validate(self) -> None:
        if not self.rates or not self.optimizers or self.seeds <= 0:
            raise ConfigError("labelnoise needs rates, optimizers and seeds > 0")
        for _, cfg in expand(self.base(), self.axes()):
            cfg.validate()


def table(records: list[dict], rates: list[float], optimizers: list[str]) -> list[dict]:
    """Rows per optimiser: mean (std) clean test accuracy in % at each rate."""
    rows = []
    for o in optimizers:
        row = {"optimizer": o}
        for r in rates:
            accs = np.array([x["test_acc"] for x in records if x["optimizer"] == o
                             and x["label_noise"] == r and not x.get("diverged")]) * 100
            pct = round(r * 100)
            row[f"{pct}%"] = f"{accs.mean():.1f} ± {accs.std():.1f}" if len(accs) else None
            row[f"mean_{pct}"] = float(accs.mean()) if len(accs) else None
        rows.append(row)
    return rows


def run_labelnoise(cfg: LabelNoiseConfig, out: str | Path, *, resume: bool = False,
                   progress_bar: bool | None = None) -> dict:
    """Every (rate, optimiser, seed) training (resumable), the accuracy table and a plot."""
    cfg.validate()
    run = RunDir(out, {"command": "optim labelnoise", **asdict(cfg)}, resume=resume)
    records = run_grid(run, expand(cfg.base(), cfg.axes()), progress_bar=progress_bar,
                       name="label noise")
    rows = table(records, cfg.rates, cfg.optimizers)
    fig, axes = figure(width=4.5)
    ax = axes[0][0]
    for row in rows:
        ax.plot([r * 100 for r in cfg.rates], [row[f"mean_{round(r * 100)}"] for r in cfg.rates],
                marker="o", label=row["optimizer"])
    ax.set(xlabel=f"{cfg.noise_kind} label noise (%)", ylabel="clean test accuracy (%)")
    ax.legend()
    run.save_figure(fig, "labelnoise.png")
    summary = {"table": rows, "noise_kind": cfg.noise_kind, "seeds": cfg.seeds,
               "records": records}
    run.write_summary(summary)
    return summary
