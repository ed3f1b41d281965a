"""`genlab nas train GENOTYPE --space darts|mobilenet --dataset imagenet --data-root ROOT`.

Trains the space's ImageNet network (genlab.nas.transfer.classify.recipes) on streamed image folders
(genlab.nas.transfer.classify.imagefolder) with the one Trainer: torchrun data parallel (each rank
reads its share of every batch), ``amp``, channels-last, per-epoch checkpoints and every
``checkpoint_steps`` steps (a resume continues mid-epoch exactly), ``max_steps`` for smoke
runs (at most that many optimiser steps, and at most that many val batches per evaluation).
Every epoch's record adds val_loss, top1 and top5 (percent; k = min(5, classes)); summary.json
holds them with the parameter counts (trained: with the auxiliary head; ``params``: at
inference, as DARTS reports) and the multiply-adds of one image. Every option is checked,
and the folders scanned, before the run folder is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace

import torch
import torch.nn.functional as F

from genlab.core.data import inference_record
from genlab.core.errors import ConfigError
from genlab.core.options import check_options, option, option_like
from genlab.core.parallel.distributed import global_sum, init_distributed
from genlab.core.registry import path_of
from genlab.core.runs import RunDir
from genlab.core.seeding import fixed_threads, seed_everything
from genlab.core.storage.checkpoints import model_record
from genlab.core.trainer import Trainer, resolve_device
from genlab.nas.inputs import check_input_size, check_limits, check_run_kind, parse_genotype
from genlab.nas.retrain import ClippedSGD, RetrainConfig
from genlab.nas.spaces import build_space_network, get_space
from genlab.nas.supernet.model_cost import count_macs, parameter_counts
from genlab.nas.transfer.classify import imagefolder as folders
from genlab.nas.transfer.classify.measures import topk_correct
from genlab.nas.transfer.classify.recipes import (
    RECIPES,
    SCHEDULES,
    EpochSchedule,
    network_options,
    parameter_groups,
    recipe_family,
)

VAL_BATCH = 256  # evaluation batch (global), as upstream's


def _common(name: str, **changes):
    """The option ``name`` as `nas train` declares it (genlab.nas.retrain.RetrainConfig)."""
    return option_like(RetrainConfig, name, **changes)


@dataclass
class ImageNetTrainConfig:
    """Options of `genlab nas train --dataset imagenet`; None takes the family's recipe. The
    options it shares with every `nas train` are RetrainConfig's."""

    arch: str = _common("arch")
    space: str = _common("space", default="darts")
    data_root: str = ""
    dataset: str = "imagenet"
    eval_on: str = "val"  # the ImageNet val folder scores every epoch (there is no test split)
    image_size: int | None = option(None, help="Crop size (the recipe's: 224); evaluation "
                                    "resizes to 256/224 of it.", gt=0)
    channels: int | None = _common("channels")
    cells: int | None = _common("cells")
    epochs: int | None = _common("epochs")
    batch_size: int | None = _common("batch_size", default=None, help="Global batch (the "
                                     "recipe's: DARTS 1024, MobileNet 256).")
    lr: float | None = _common("lr")
    momentum: float | None = _common("momentum")
    nesterov: bool | None = _common("nesterov")
    weight_decay: float | None = _common("weight_decay")
    bn_weight_decay: bool | None = option(None, help="Decay BatchNorm weights and biases "
                                          "(DARTS on, MobileNet off).")
    schedule: str | None = option(None, help="Learning-rate schedule (DARTS linear, MobileNet "
                                  "cosine).", choices=SCHEDULES)
    warmup_epochs: int | None = option(None, help="Linear warm-up epochs (DARTS 5, MobileNet "
                                       "0).", ge=0)
    label_smoothing: float | None = option(None, help="Label smoothing in training, below 1 "
                                           "(0.1).", ge=0)
    grad_clip: float | None = _common("grad_clip")
    auxiliary_weight: float | None = _common("auxiliary_weight")
    drop_path: float | None = _common("drop_path")
    workers: int = option(8, help="DataLoader workers per process.", ge=0)
    checkpoint_steps: int | None = option(None, help="Also checkpoint every N steps (a resume "
                                          "continues mid-epoch).", gt=0)
    max_steps: int | None = option(None, help="Stop after N optimiser steps, score at most N "
                                   "val batches (smoke runs).", gt=0)
    seed: int = _common("seed")
    device: str = _common("device")
    threads: int = _common("threads")
    amp: str = _common("amp")
    channels_last: bool = _common("channels_last")

    def resolved(self) -> ImageNetTrainConfig:
        recipe = RECIPES[recipe_family(get_space(self.space))]
        keys = [f.name for f in fields(recipe) if f.name != "source"]
        return replace(self, **{k: getattr(recipe, k) for k in keys if getattr(self, k) is None})

    def validate(self) -> None:
        space = get_space(self.space)
        recipe_family(space)
        parse_genotype(space, self.arch)
        space.check_size_options(self.channels, self.cells)
        check_limits(size=self.image_size, channels=self.channels, cells=self.cells,
                     epochs=self.epochs, batch_size=self.batch_size)
        check_options(self)  # types, choices and limits as the fields declare them
        if self.label_smoothing is not None and self.label_smoothing >= 1:
            raise ConfigError(f"label-smoothing must be below 1, got {self.label_smoothing}")
        if self.drop_path is not None and self.drop_path >= 1:
            raise ConfigError(f"drop-path must be below 1, got {self.drop_path}")
        if not self.data_root:
            raise ConfigError(f"--dataset imagenet reads image folders: pass --data-root ROOT "
                              f"({folders.LAYOUT})")


@dataclass
class _Setup:
    """What a run needs, built and checked before its folder is made."""

    model: torch.nn.Module
    record: dict
    layout: folders.ImageFolders
    train: folders.FolderBatches
    val: folders.FolderBatches
    params: tuple[int, int]
    macs: int


def _setup(cfg: ImageNetTrainConfig, device) -> _Setup:
    family = recipe_family(get_space(cfg.space))
    layout = folders.scan_image_folders(cfg.data_root)
    builder_args = {"space": cfg.space, "genotype": cfg.arch, "num_classes": len(layout.classes),
                    "in_channels": 3, "channels": cfg.channels, "cells": cfg.cells,
                    "options": network_options(family, cfg.auxiliary_weight, cfg.drop_path)}
    model = build_space_network(**builder_args).to(device)
    check_input_size(model, 3, cfg.image_size, f"the {cfg.space} ImageNet network",
                     cfg.channels, cfg.cells)
    pin = torch.device(device).type == "cuda"
    limit = cfg.max_steps
    train = folders.FolderBatches(layout.train, folders.train_transform(cfg.image_size),
                                  cfg.batch_size, seed=cfg.seed, shuffle=True,
                                  workers=cfg.workers, pin_memory=pin)
    val = folders.FolderBatches(layout.val, folders.eval_transform(cfg.image_size),
                                max(VAL_BATCH, 1), seed=cfg.seed, shuffle=False,
                                workers=cfg.workers, pin_memory=pin, limit=limit)
    facts = inference_record(layout.classes, "RGB", cfg.image_size, folders.MEAN, folders.STD,
                             crop_from=folders.resize_size(cfg.image_size))
    return _Setup(model, model_record("nas train", path_of(build_space_network), builder_args,
                                      inference=facts),
                  layout, train, val, parameter_counts(model), count_macs(model, cfg.image_size))


def smoothed_loss(label_smoothing: float, aux_weight: float):
    """Label-smoothed cross-entropy, plus ``aux_weight`` times the auxiliary head's."""

    def loss(out, y):
        if isinstance(out, tuple):
            main, aux = out
            return (F.cross_entropy(main, y, label_smoothing=label_smoothing)
                    + aux_weight * F.cross_entropy(aux, y, label_smoothing=label_smoothing))
        return F.cross_entropy(out, y, label_smoothing=label_smoothing)

    return loss


@torch.no_grad()
def score(trainer: Trainer, batches, k: int) -> dict:
    """val_loss (plain cross-entropy), top1 and top-k (percent) over this rank's batches,
    all-reduced over the ranks."""
    model = trainer.model
    model.eval()
    loss, hits1, hitsk, n = 0.0, 0, 0, 0
    for x, y in batches:
        x, y = x.to(trainer.device, non_blocking=True), y.to(trainer.device)
        if trainer.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with trainer.autocast():
            out = model(x)
        out = out.float()
        loss += float(F.cross_entropy(out, y, reduction="sum"))
        c1, ck = topk_correct(out, y, (1, k))
        hits1, hitsk, n = hits1 + c1, hitsk + ck, n + len(y)
    model.train()
    loss, hits1, hitsk, n = global_sum([loss, hits1, hitsk, n]).tolist()
    n = max(n, 1)
    return {"val_loss": loss / n, "top1": 100 * hits1 / n, "top5": 100 * hitsk / n}


def train_imagenet(cfg: ImageNetTrainConfig, out, *, resume: bool = False,
                   progress_bar=None, report: Callable[[str], None] | None = None) -> dict:
    """Train ``cfg.arch``'s ImageNet network; summary.json with top1, top5, params, macs.
    ``report`` receives the network's sizes before training starts."""
    cfg.validate()
    check_run_kind(out, "nas train")
    cfg = cfg.resolved()
    cfg.validate()
    with fixed_threads(cfg.threads):
        return _train(cfg, out, resume=resume, progress_bar=progress_bar, report=report)


def _train(cfg: ImageNetTrainConfig, out, *, resume: bool, progress_bar, report) -> dict:
    device = resolve_device(cfg.device)
    init_distributed()  # the batch sizes are checked against the process count
    seed_everything(cfg.seed)
    s = _setup(cfg, device)
    classes = len(s.layout.classes)
    k = min(5, classes)
    if report is not None:
        report(f"parameters {s.params[0]:,} trained (with the auxiliary head), "
               f"{s.params[1]:,} at inference; {s.macs / 1e6:,.1f}M multiply-adds per "
               f"{cfg.image_size}x{cfg.image_size} image (FLOPs about twice that)")
    run = RunDir(out, asdict(cfg), resume=resume, resume_free=("workers",))
    if (done := run.finished_summary()) is not None:
        run.close()
        return done
    opt = ClippedSGD(parameter_groups(s.model, cfg.weight_decay, cfg.bn_weight_decay),
                     max_norm=cfg.grad_clip, lr=cfg.lr, momentum=cfg.momentum,
                     nesterov=cfg.nesterov)
    sched = EpochSchedule(opt, s.model, schedule=cfg.schedule, lr=cfg.lr, epochs=cfg.epochs,
                          warmup=cfg.warmup_epochs, drop_path=cfg.drop_path)
    trainer = Trainer(s.model, opt, smoothed_loss(cfg.label_smoothing, cfg.auxiliary_weight),
                      device=device, scheduler=sched, seed=cfg.seed, progress_bar=progress_bar,
                      name=f"imagenet {cfg.space} {cfg.arch[:24]}...", amp=cfg.amp,
                      channels_last=cfg.channels_last, model_record=s.record,
                      sharded_batches=True)
    result = trainer.fit(s.train, cfg.epochs, run=run,
                         on_epoch=lambda epoch, model: score(trainer, s.val(0), k),
                         checkpoint_steps=cfg.checkpoint_steps, max_steps=cfg.max_steps)
    final = run.metrics()[-1]
    summary = {
        "arch": cfg.arch, "space": cfg.space, "dataset": "imagenet",
        "top1": final["top1"], "top5": final["top5"], "top5_k": k,
        "val_loss": final["val_loss"], "classes": classes,
        "train_images": len(s.layout.train), "val_images": len(s.layout.val),
        "params": s.params[1], "params_trained": s.params[0], "macs": s.macs,
        "epochs_run": final["epoch"] + 1, "steps": trainer.global_step,
        "train_seconds": result.seconds, "seed": cfg.seed,
        "torch_threads": torch.get_num_threads(),
    }
    if k < 5:
        summary["top5_note"] = f"top5 is top-{k}: k = min(5, classes) with {classes} classes"
    run.write_summary(summary)
    return summary
