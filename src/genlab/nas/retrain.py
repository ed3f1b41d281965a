"""Retraining a searched cell from scratch: the discrete NB201 network, plain SGD, test accuracy.

Defaults (digits, our choice): C=16, N=1 (one cell per stage), SGD lr 0.05 with
cosine decay, momentum 0.9, weight decay 5e-4, batch 64, augmented batches, on the
union of the search halves (train + val); test accuracy on the held-out test split.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from genlab.core.data import Batches, augment_images, load_image_data
from genlab.core.errors import require_choice, require_positive
from genlab.core.runs import RunDir
from genlab.core.seeding import fixed_threads, seed_everything
from genlab.core.trainer import Trainer, accuracy, evaluate, resolve_device
from genlab.nas.genotype import Genotype
from genlab.nas.networks import build_network


@dataclass
class RetrainConfig:
    """Options of `genlab nas train`."""

    arch: str = ""
    dataset: str = "digits"
    data_root: str | None = None
    size: int = 8
    channels: int = 16
    cells: int = 1
    epochs: int = 30
    batch_size: int = 64
    lr: float = 0.05
    weight_decay: float = 5e-4
    augment: bool = True
    seed: int = 0
    device: str = "cpu"
    eval_on: str = "test"
    threads: int = 1  # torch intra-op threads, fixed so that a rerun gives the same figures

    def validate(self) -> None:
        Genotype.from_string(self.arch)
        require_choice("eval_on", self.eval_on, ("test", "val"))
        for name in ("size", "channels", "cells", "epochs", "batch_size", "lr", "threads"):
            require_positive(name.replace("_", "-"), getattr(self, name))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def retrain(cfg: RetrainConfig, out, *, resume: bool = False, progress_bar=None) -> dict:
    """Train ``cfg.arch`` from scratch and write test_acc and params to summary.json.

    ``eval_on="val"`` trains on the train half only and scores the val half: the
    selection criterion used when tuning the search (never the test split).
    """
    cfg.validate()
    with fixed_threads(cfg.threads):
        return _retrain(cfg, out, resume=resume, progress_bar=progress_bar)


def _retrain(cfg: RetrainConfig, out, *, resume: bool, progress_bar) -> dict:
    device = resolve_device(cfg.device)
    run = RunDir(out, asdict(cfg), resume=resume)
    seed_everything(cfg.seed)
    data = load_image_data(cfg.dataset, cfg.data_root, size=cfg.size, seed=cfg.seed)
    fit_split, score_split = (data.train, data.val) if cfg.eval_on == "val" else \
        (data.train_full(), data.test)
    model = build_network(cfg.arch, data.num_classes, C=cfg.channels, N=cfg.cells,
                          in_channels=data.in_channels).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9,
                          weight_decay=cfg.weight_decay, nesterov=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.epochs)
    augment = augment_images if cfg.augment else None
    trainer = Trainer(model, opt, nn.CrossEntropyLoss(), device=device, scheduler=sched,
                      augment=augment, seed=cfg.seed, progress_bar=progress_bar,
                      name=f"train {cfg.arch[:24]}...")
    batches = Batches(fit_split, cfg.batch_size, seed=cfg.seed)
    score = Batches(score_split, 256, shuffle=False)

    def on_epoch(epoch, model):
        res = evaluate(model, score.epoch(0), nn.functional.cross_entropy, device, accuracy)
        return {f"{cfg.eval_on}_loss": res["loss"], f"{cfg.eval_on}_acc": 100 * res["metric"]}

    result = trainer.fit(batches.epoch, cfg.epochs, run=run, on_epoch=on_epoch)
    final = run.metrics()[-1]
    summary = {
        "arch": cfg.arch,
        f"{cfg.eval_on}_acc": final[f"{cfg.eval_on}_acc"],
        "params": count_parameters(model),
        "train_seconds": result.seconds,
        "seed": cfg.seed,
    }
    _plot_curves(run)
    run.write_summary(summary)
    return summary


def _plot_curves(run: RunDir) -> None:
    from genlab.core.report import figure

    hist = run.metrics()
    fig, axes = figure(ncols=2, width=4.0, height=3.0)
    ep = [h["epoch"] for h in hist]
    axes[0, 0].plot(ep, [h["train_loss"] for h in hist])
    axes[0, 0].set_title("training loss")
    key = next(k for k in hist[-1] if k.endswith("_acc"))
    axes[0, 1].plot(ep, [h[key] for h in hist])
    axes[0, 1].set_title(key.replace("_", " ") + " (%)")
    for ax in axes.flat:
        ax.set_xlabel("epoch")
    fig.tight_layout()
    run.save_figure(fig, "curves.png")
