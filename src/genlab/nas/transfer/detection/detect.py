"""`genlab nas detect`: a searched cell's backbone under torchvision's RetinaNet (or Faster
R-CNN) + FPN, trained with mmdetection's 1x protocol (training module) and scored with VOC
2007's 11-point mAP or COCOeval (evaluation module).

Order, as every genlab command: every option checked, the data read and checked whole, the
model built (backbone weights loaded), then the run folder; training through genlab's one
Trainer, checkpointed every ``checkpoint_steps`` iterations (default: every data epoch);
then the evaluation and summary.json (``map``, ``map50``, COCO's ``map75``, the trivial
detector's ``trivial_map50``, ``params``, what detections.png shows as ``picture`` and the
same count over every evaluation image as ``found``) and detections.png.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch

from genlab.core.errors import ConfigError
from genlab.core.options import check_options, option
from genlab.core.registry import path_of
from genlab.core.runs import RunDir
from genlab.core.seeding import fixed_threads, seed_everything
from genlab.core.storage.checkpoints import model_record
from genlab.core.trainer import resolve_device
from genlab.nas.retrain import ClippedSGD
from genlab.nas.transfer.detection.batches import TrainBatches
from genlab.nas.transfer.detection.evaluation import (
    plot_detections,
    predict,
    score,
    trivial_predictions,
)
from genlab.nas.transfer.detection.metrics import found_boxes
from genlab.nas.transfer.detection.models import DETECTORS, RESNETS, build_detector
from genlab.nas.transfer.detection.sources import DetectionData, parse_data, read_data
from genlab.nas.transfer.detection.training import DetectionTrainer, IterationSchedule

PROTOCOL_EPOCHS, PROTOCOL_STEPS = 12, (8, 11)  # mmdetection schedule_1x
WARMUP_RATIO = 0.001  # the warm-up's first lr, as a fraction of lr (mmdetection's)


DATA_HELP = ("voc:ROOT (VOCdevkit: VOC2007 + VOC2012 trainval -> VOC2007 test, 11-point mAP) | "
             "coco:ROOT (train2017 -> val2017, COCOeval) | synthetic[:N] (embedded shapes).")
PROTOCOL = "mmdetection RetinaNet 1x"


@dataclass
class DetectConfig:
    """Options of `genlab nas detect`; None takes the protocol's value (``resolved``)."""

    genotype: str | None = option(None, help="Genotype text of --space (not for the ResNet "
                                  "rows).", argument=True)
    space: str = option("darts", help="Search space of GENOTYPE: darts (and its family) | "
                        "mobilenet.")
    data: str = option("synthetic", help=DATA_HELP)
    detector: str = option("retinanet", help="Detector (torchvision).", choices=DETECTORS)
    backbone: str = option("searched", help="searched, or a torchvision ResNet (weights=None: "
                           "the reference rows).", choices=("searched", *RESNETS))
    backbone_weights: str | None = option(None, help="A `genlab nas train` run folder or "
                                          "checkpoint for the searched backbone.")
    channels: int | None = option(None, help="Backbone width (DARTS ImageNet: 48).", gt=0,
                                  flags=("-C",))
    cells: int | None = option(None, help="Backbone depth (DARTS: 14).", gt=0, flags=("-N",))
    fpn_channels: int = option(256, help="FPN and head width.", gt=0)
    head_norm: str = option("none", help="RetinaNet head: none (torchvision v1) | gn "
                            "(GroupNorm, torchvision v2; from scratch).", choices=("none", "gn"))
    epochs: int = option(PROTOCOL_EPOCHS, help=f"Epochs ({PROTOCOL}: {PROTOCOL_EPOCHS}).", gt=0)
    batch_size: int = option(16, help="Global batch (over every torchrun process).", gt=0)
    lr: float | None = option(None, help="SGD lr (default 0.01 x batch-size / 16).", gt=0)
    momentum: float = option(0.9, help="SGD momentum.", ge=0, cli=False)
    weight_decay: float = option(1e-4, help="SGD weight decay.", ge=0)
    lr_steps: list[int] | None = option(None, parse="list", help="Epochs after which lr /= 10 "
                                        f"(default {','.join(map(str, PROTOCOL_STEPS))} of "
                                        f"{PROTOCOL_EPOCHS}, scaled with --epochs).")
    warmup: int = option(500, help=f"Linear warm-up iterations (from {WARMUP_RATIO} x lr).",
                         ge=0)
    warmup_ratio: float = option(WARMUP_RATIO, help="The warm-up's first lr, as a fraction of lr.",
                                 gt=0, le=1, cli=False)
    grad_clip: float = option(35.0, help="Gradient-norm clip, 0 = off.", ge=0)
    min_size: int | None = option(None, help="Shorter side after resizing (800; synthetic 64).",
                                  gt=0)
    max_size: int | None = option(None, help="Longest side cap (1333; synthetic 64).", gt=0)
    flip: bool = option(True, help="Random horizontal flips in training.")
    max_steps: int | None = option(None, help="Stop after N iterations (then evaluate).", gt=0)
    checkpoint_steps: int | None = option(None, help="Checkpoint every N iterations (default: "
                                          "every epoch).", gt=0)
    seed: int = option(0, help="The run's seed (data order, init, synthetic data).", ge=0)
    device: str = option("cpu", help="cpu | cuda | cuda:N | auto (cuda when there is one).")
    threads: int = option(1, help="torch CPU threads, recorded in config.json (0: torch's "
                          "default, the machine's cores).", ge=0)
    amp: str = option("off", help="Autocast of forward and loss; fp16 adds a GradScaler.",
                      choices="genlab.core.amp:PRECISIONS")
    channels_last: bool = option(False, help="NHWC layout of model and inputs.")
    workers: int = option(0, help="DataLoader worker processes.", ge=0)
    eval_batch_size: int = option(8, help="Batch of the evaluation.", gt=0, cli=False)

    def validate(self) -> None:
        check_options(self)  # types, choices and limits as the fields declare them
        if self.head_norm == "gn" and self.detector != "retinanet":
            raise ConfigError("--head-norm gn is RetinaNet's (torchvision's v2 head)")
        parse_data(self.data)
        if self.backbone == "searched":
            if not self.genotype:
                raise ConfigError("GENOTYPE is needed for the searched backbone (or pass "
                                  "--backbone resnet18|resnet50)")
            from genlab.nas.inputs import parse_genotype
            from genlab.nas.spaces import get_space

            parse_genotype(get_space(self.space), self.genotype)
        elif self.backbone_weights is not None:
            raise ConfigError("--backbone-weights loads a searched backbone, not "
                              f"{self.backbone} (its reference row trains from scratch)")
        if self.min_size and self.max_size and self.min_size > self.max_size:
            raise ConfigError(f"min-size {self.min_size} exceeds max-size {self.max_size}")
        steps = self.lr_steps or ()
        if any(b <= a for a, b in zip(steps, steps[1:], strict=False)) or any(
                not 0 < s <= self.epochs for s in steps):
            raise ConfigError(f"lr-steps {','.join(map(str, steps))}: increasing epochs in "
                              f"1..{self.epochs}")

    def resolved(self, data: DetectionData | None = None) -> DetectConfig:
        """A copy with every None filled from the protocol and ``data`` (read when not given)."""
        if data is None:
            data = read_data(self.data, self.seed)
        small = data.kind == "synthetic"
        steps = self.lr_steps if self.lr_steps is not None else tuple(
            round(self.epochs * s / PROTOCOL_EPOCHS) for s in PROTOCOL_STEPS)
        batch = min(self.batch_size, len(data.train))
        return replace(self, lr=self.lr if self.lr is not None else 0.01 * self.batch_size / 16,
                       lr_steps=[int(s) for s in steps],
                       min_size=self.min_size or (64 if small else 800),
                       max_size=self.max_size or max(self.min_size or 0, 64 if small else 1333),
                       checkpoint_steps=self.checkpoint_steps or max(1, len(data.train) // batch))


def detect(cfg: DetectConfig, out, *, resume: bool = False, progress_bar=None) -> dict:
    """Train and score ``cfg``'s detector into the run folder ``out`` (module docstring)."""
    cfg.validate()
    data = read_data(cfg.data, cfg.seed)
    cfg = cfg.resolved(data)
    with fixed_threads(cfg.threads):
        return _detect(cfg, data, out, resume=resume, progress_bar=progress_bar)


def _model(cfg: DetectConfig, data: DetectionData):
    args = {"detector": cfg.detector, "num_classes": len(data.classes),
            "backbone": None if cfg.backbone == "searched" else cfg.backbone,
            "space": cfg.space, "genotype": cfg.genotype, "fpn_channels": cfg.fpn_channels,
            "min_size": cfg.min_size, "max_size": cfg.max_size, "channels": cfg.channels,
            "cells": cfg.cells, "head_norm": cfg.head_norm}
    model = build_detector(**args, weights=cfg.backbone_weights)
    return model, model_record("nas detect", path_of(build_detector), args)


def _detect(cfg: DetectConfig, data: DetectionData, out, *, resume: bool, progress_bar) -> dict:
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    model, record = _model(cfg, data)
    batches = TrainBatches(data.train, cfg.batch_size, 1, cfg.checkpoint_steps, seed=cfg.seed,
                           flip=cfg.flip, workers=cfg.workers)
    total = cfg.epochs * batches.steps_per_epoch
    total = min(total, cfg.max_steps) if cfg.max_steps else total
    batches = TrainBatches(data.train, cfg.batch_size, total, cfg.checkpoint_steps,
                           seed=cfg.seed, flip=cfg.flip, workers=cfg.workers)
    run = RunDir(out, {**asdict(cfg), "data_kind": data.kind}, resume=resume)
    if (done := run.finished_summary()) is not None:
        run.close()
        return done
    opt = ClippedSGD([p for p in model.parameters() if p.requires_grad], max_norm=cfg.grad_clip,
                     lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    sched = IterationSchedule(opt, lr=cfg.lr, steps_per_epoch=batches.steps_per_epoch,
                              milestones=cfg.lr_steps, warmup=cfg.warmup,
                              warmup_ratio=cfg.warmup_ratio)
    trainer = DetectionTrainer(model, opt, None, device=device, scheduler=sched, seed=cfg.seed,
                               progress_bar=progress_bar, name=f"detect {cfg.detector}",
                               amp=cfg.amp, channels_last=cfg.channels_last, model_record=record)

    def on_segment(segment, _model):
        return {"iteration": sched.iteration, "data_epoch": (sched.iteration - 1)
                // batches.steps_per_epoch}

    result = trainer.fit(batches.segment, batches.segments, run=run, on_epoch=on_segment,
                         steps_per_epoch=cfg.checkpoint_steps)
    summary = _evaluate(cfg, data, model, trainer, run, device)
    summary.update({"params": sum(p.numel() for p in model.parameters()),
                    "train_seconds": result.seconds, "steps": total,
                    "steps_per_epoch": batches.steps_per_epoch})
    if summary["map50"] <= summary["trivial_map50"]:
        run.sanity_warning(summary, (
            f"mAP@0.5 {summary['map50']:.4f} is not above the trivial detector's "
            f"{summary['trivial_map50']:.4f} (after {total} iterations: train longer or "
            "check the data)"))
    run.write_summary(summary)
    return summary


def _evaluate(cfg, data: DetectionData, model, trainer, run, device) -> dict:
    preds = predict(model, data.test, device, cfg.eval_batch_size, cfg.workers,
                    trainer.autocast)
    figures = score(data.kind, preds, data.test, data.classes, coco_ids=data.coco_ids,
                    annotations=data.annotations, run=run)
    trivial = score(data.kind, trivial_predictions(data.train, data.test, len(data.classes)),
                    data.test, data.classes, coco_ids=data.coco_ids,
                    annotations=data.annotations)
    picture = plot_detections(run, data.test, preds, data.classes)  # drawn on the main rank
    found = found_boxes(preds, [it.target() for it in data.test], len(data.classes),
                        picture["score_threshold"], picture["iou_threshold"])
    return {"genotype": cfg.genotype, "space": cfg.space, "backbone": cfg.backbone,
            "detector": cfg.detector, "data": data.kind, "train_images": len(data.train),
            "eval_images": len(data.test), **figures, "trivial_map": trivial["map"],
            "trivial_map50": trivial["map50"], "picture": picture, "found": found,
            "seed": cfg.seed,
            "torch_threads": torch.get_num_threads()}
