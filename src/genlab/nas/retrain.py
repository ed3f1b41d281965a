"""Retraining a searched architecture from scratch with its space's recipe; test accuracy.

Every space declares its recipe (``space.retrain``); each entry can be overridden (flags of
`genlab nas train`) to scale it for CPU proxies:

- NB201 (ours, digits): C=16, N=1, SGD lr 0.05 Nesterov, weight decay 5e-4, 30 epochs;
- DARTS-family spaces (quark0/darts train.py): SGD lr 0.025 cosine, momentum 0.9, weight
  decay 3e-4, gradient clipping 5, auxiliary head weighted 0.4, cutout (half the image side:
  16 px at 32x32), drop-path rising linearly from 0 to 0.2 over the epochs; at a CPU size
  (C=16, 8 cells, 30 epochs on digits) instead of C=36, 20 cells, 600 epochs;
- MobileNet-like (ours, digits): first width 16, CIFAR stem, SGD lr 0.05 Nesterov, weight
  decay 4e-5.

Data: the union of the search halves (train + val), test accuracy on the held-out test split;
augmented batches (digits: shifts, rotations, noise, erasing) when ``augment``. The reported
parameter count excludes the auxiliary head, as DARTS reports model sizes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.data import Batches, announce, augment_images, majority_accuracy, warn_batch
from genlab.core.errors import ConfigError
from genlab.core.options import check_options, option, option_like
from genlab.core.registry import path_of
from genlab.core.report import figure
from genlab.core.runs import RunDir
from genlab.core.seeding import fixed_threads, seed_everything
from genlab.core.storage.checkpoints import model_record
from genlab.core.trainer import Trainer, accuracy, evaluate, resolve_device
from genlab.nas.data import check_dataset, default_size, load_image_data
from genlab.nas.inputs import check_input_size, check_limits, check_run_kind, parse_genotype
from genlab.nas.search import SPACES, SearchConfig
from genlab.nas.spaces import build_space_network, get_space
from genlab.nas.spaces.nb201.network import count_parameters

RECIPE_KEYS = ("channels", "cells", "epochs", "lr", "momentum", "nesterov", "weight_decay",
               "grad_clip", "auxiliary_weight", "drop_path", "cutout")


RECIPE = "default: the space's recipe"
PRECISION_NAMES = "genlab.core.amp:PRECISIONS"


@dataclass
class RetrainConfig:
    """Options of `genlab nas train` (genlab.nas.train_options adds the ImageNet ones); None
    takes the space's recipe (or proxy) value."""

    arch: str = option("", help="Genotype text of the space (NB201 string, DARTS "
                       "Genotype(...), MobileNet choices).", argument=True, required=True)
    space: str = option("nb201", help="Search space of ARCH (docs/nas_spaces.md; genlab nas "
                        "spaces).", choices=SPACES)
    dataset: str = option_like(SearchConfig, "dataset")
    data_root: str | None = option_like(SearchConfig, "data_root")
    size: int | None = option(None, help="Input side: the networks take squares, N or NxN "
                              "(default: the data set's own side, else the search proxy's; "
                              "folder:PATH: the images' median shorter side, down to a "
                              "multiple of 8, 8 to 32).", gt=0, parse="square")
    channels: int | None = option(None, help=f"Width ({RECIPE}).", gt=0, flags=("-C",))
    cells: int | None = option(None, help=f"Depth ({RECIPE}).", gt=0, flags=("-N",))
    epochs: int | None = option(None, help=f"Epochs ({RECIPE}).", gt=0)
    batch_size: int = option(64, help="Batch of each training step.", gt=0)
    lr: float | None = option(None, help=f"SGD lr, cosine to 0 ({RECIPE}; DARTS 0.025; "
                              "ImageNet: DARTS 0.5, MobileNet 0.05).", gt=0)
    momentum: float | None = option(None, help=f"SGD momentum ({RECIPE}: 0.9).", ge=0)
    nesterov: bool | None = option(None, help=f"Nesterov momentum ({RECIPE}; DARTS off, "
                                   "NB201 and MobileNet on).")
    weight_decay: float | None = option(None, help=f"SGD weight decay ({RECIPE}; DARTS 3e-4; "
                                        "ImageNet: DARTS 3e-5, MobileNet 4e-5).", ge=0)
    grad_clip: float | None = option(None, help="Gradient-norm clip, 0 = off (DARTS: 5).",
                                     ge=0)
    auxiliary_weight: float | None = option(None, help="Auxiliary-head loss weight, 0 = no "
                                            "head (DARTS: 0.4).", ge=0, flags=("--aux-weight",))
    drop_path: float | None = option(None, help="Final drop-path probability, ramped from 0, "
                                     "below 1 (DARTS: 0.2; ImageNet: 0).", ge=0)
    cutout: bool | None = option(None, help="Cutout of half the image side (DARTS: on).")
    augment: bool = option(True, help="Augment training batches (digits).")
    seed: int = option(0, help="The training's seed (data split, init, batches).", ge=0)
    device: str = option("cpu", help="cpu | cuda | cuda:N | auto (cuda when there is one).")
    eval_on: str = option("test", help="test: train on train + val, score the test split; "
                          "val: train on train, score val (tuning, never the test split).",
                          choices=("test", "val"), cli=False)
    threads: int = option(1, help="torch CPU threads, recorded in config.json (0: torch's "
                          "default, the machine's cores; summary.json records the count used "
                          "as torch_threads).", ge=0)
    amp: str = option("off", help="Autocast of forward and loss; fp16 adds a GradScaler (its "
                      "state in the checkpoint).", choices=PRECISION_NAMES)
    channels_last: bool = option(False, help="NHWC layout of model and inputs.")

    def resolved(self) -> RetrainConfig:
        """A copy with every None filled from the space's recipe (size: the search proxy's)."""
        space = get_space(self.space)
        fill = {k: getattr(space.retrain, k) for k in RECIPE_KEYS if getattr(self, k) is None}
        if self.size is None:
            fill["size"] = default_size(self.dataset) or space.proxy.size
        return replace(self, **fill)

    def validate(self) -> None:
        space = get_space(self.space)
        parse_genotype(space, self.arch)
        check_limits(size=self.size, channels=self.channels, cells=self.cells,
                     epochs=self.epochs, batch_size=self.batch_size)
        check_dataset(self.dataset, self.data_root)
        check_options(self)  # types, choices and limits as the fields declare them
        space.check_size_options(self.channels, self.cells)
        if self.drop_path is not None and self.drop_path >= 1:
            raise ConfigError(f"drop-path must be below 1, got {self.drop_path}")


def network_options(space, cfg: RetrainConfig) -> dict:
    """The network options the recipe needs: an auxiliary head, drop-path, the space's extras."""
    opts = dict(space.retrain.extra)
    if cfg.auxiliary_weight:
        opts["auxiliary"] = True
    if cfg.drop_path:
        opts["drop_path"] = 0.0  # the schedule ramps it from 0
    return opts


class ClippedSGD(torch.optim.SGD):
    """SGD whose ``step(closure)`` clips the gradient norm to ``max_norm`` before stepping."""

    def __init__(self, params, max_norm: float = 0.0, **kwargs):
        super().__init__(params, **kwargs)
        self.max_norm = max_norm

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.max_norm > 0:
            torch.nn.utils.clip_grad_norm_(
                [p for group in self.param_groups for p in group["params"]], self.max_norm)
        super().step()
        return loss


class DropPathRamp:
    """Cosine learning rate per epoch and drop-path probability ``p * epoch / epochs``.

    Stands in for the LR scheduler of the trainer: ``step()`` after each epoch, with the
    scheduler's state, so a resumed run continues the ramp where it stopped.
    """

    def __init__(self, optimizer, model: nn.Module, epochs: int, drop_path: float):
        self.cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
        self.model, self.epochs, self.drop_path = model, epochs, drop_path
        self._apply()

    def _apply(self) -> None:
        if self.drop_path:
            self.model.set_drop_path(self.drop_path * self.cosine.last_epoch / self.epochs)

    def step(self) -> None:
        self.cosine.step()
        self._apply()

    def state_dict(self) -> dict:
        return self.cosine.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.cosine.load_state_dict(state)
        self._apply()


def recipe_loss(aux_weight: float):
    """Cross-entropy, plus ``aux_weight`` times the auxiliary head's in training."""

    def loss(out, y):
        if isinstance(out, tuple):
            main, aux = out
            return F.cross_entropy(main, y) + aux_weight * F.cross_entropy(aux, y)
        return F.cross_entropy(out, y)

    return loss


def cutout(x: torch.Tensor, generator: torch.Generator, side: int) -> torch.Tensor:
    """Zero one ``side`` x ``side`` square per image, centre uniform, clipped at the borders
    (DeVries & Taylor 2017, as in quark0/darts utils.Cutout)."""
    n, _, h, w = x.shape
    cy = torch.randint(0, h, (n,), generator=generator).view(n, 1, 1)
    cx = torch.randint(0, w, (n,), generator=generator).view(n, 1, 1)
    rows = torch.arange(h).view(1, h, 1)
    cols = torch.arange(w).view(1, 1, w)
    half = side // 2
    box = ((rows >= cy - half) & (rows < cy + side - half)
           & (cols >= cx - half) & (cols < cx + side - half))
    return x * (~box).unsqueeze(1).to(x.device, x.dtype)


def make_augment(cfg: RetrainConfig, size: int):
    """The training-batch transform: digits augmentation, then cutout (size // 2)."""
    steps = []
    if cfg.augment:
        steps.append(augment_images)
    if cfg.cutout:
        steps.append(lambda x, g: cutout(x, g, max(1, size // 2)))
    if not steps:
        return None

    def augment(x, generator):
        for fn in steps:
            x = fn(x, generator)
        return x

    return augment


def fit_and_score_splits(data, eval_on: str):
    """The split a retraining fits and the one it is scored on: ``eval_on`` "val" the train
    half and the validation half (tuning), "test" train + val and the test split."""
    return (data.train, data.val) if eval_on == "val" else (data.train_full(), data.test)


def retrain(cfg: RetrainConfig, out, *, resume: bool = False, progress_bar=None) -> dict:
    """Train ``cfg.arch`` from scratch and write test_acc and params to summary.json.

    ``eval_on="val"`` trains on the train half only and scores the val half: the
    selection criterion used when tuning the search (never the test split).
    """
    cfg.validate()
    check_run_kind(out, "nas train")
    cfg = cfg.resolved()
    with fixed_threads(cfg.threads):
        return _retrain(cfg, out, resume=resume, progress_bar=progress_bar)


def _retrain(cfg: RetrainConfig, out, *, resume: bool, progress_bar) -> dict:
    space = get_space(cfg.space)
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    data = load_image_data(cfg.dataset, cfg.data_root, size=cfg.size, seed=cfg.seed,
                           checked=True)  # retrain validated cfg
    fit_split, score_split = fit_and_score_splits(data, cfg.eval_on)
    builder_args = {"space": space.name, "genotype": cfg.arch, "num_classes": data.num_classes,
                    "in_channels": data.in_channels, "channels": cfg.channels,
                    "cells": cfg.cells, "options": network_options(space, cfg)}
    model = build_space_network(**builder_args).to(device)
    check_input_size(model, data.in_channels, cfg.size, f"the {space.name} network",
                     cfg.channels, cfg.cells)
    record = model_record("nas train", path_of(build_space_network), builder_args,
                          inference=data.inference)
    run = RunDir(out, asdict(cfg), resume=resume, kind="nas train")  # after every check
    if (done := run.finished_summary()) is not None:  # resumed a finished run: a no-op
        run.close()
        return done
    announce(data)
    opt = ClippedSGD(model.parameters(), max_norm=cfg.grad_clip, lr=cfg.lr,
                     momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                     nesterov=cfg.nesterov)
    sched = DropPathRamp(opt, model, cfg.epochs, cfg.drop_path)
    trainer = Trainer(model, opt, recipe_loss(cfg.auxiliary_weight), device=device,
                      scheduler=sched, augment=make_augment(cfg, data.size), seed=cfg.seed,
                      progress_bar=progress_bar, name=f"train {cfg.space} {cfg.arch[:24]}...",
                      amp=cfg.amp, channels_last=cfg.channels_last, model_record=record)
    warn_batch(cfg.batch_size, len(fit_split), "training")
    batches = Batches(fit_split, cfg.batch_size, seed=cfg.seed)
    score = Batches(score_split, 256, shuffle=False)

    def on_epoch(epoch, model):
        res = evaluate(model, score.epoch(0), F.cross_entropy, device, accuracy)
        return {f"{cfg.eval_on}_loss": res["loss"], f"{cfg.eval_on}_acc": 100 * res["metric"]}

    result = trainer.fit(batches.epoch, cfg.epochs, run=run, on_epoch=on_epoch)
    final = run.metrics()[-1]
    constant = majority_accuracy(fit_split.labels, score_split.labels)
    summary = {
        "arch": cfg.arch,
        "space": cfg.space,
        f"{cfg.eval_on}_acc": final[f"{cfg.eval_on}_acc"],
        f"constant_{cfg.eval_on}_acc": constant,
        "params": count_parameters(model),
        "train_seconds": result.seconds,
        "seed": cfg.seed,
        "torch_threads": torch.get_num_threads(),  # inside fixed_threads: the count used
    }
    if summary[f"{cfg.eval_on}_acc"] <= constant + 1e-4:  # float32 ties count as not above
        run.sanity_warning(summary, (
            f"{cfg.eval_on} accuracy {summary[f'{cfg.eval_on}_acc']:.2f}% is not above the "
            f"constant predictor's {constant:.2f}% (the majority class): the network has not "
            f"learnt (after {cfg.epochs} epochs; train longer or check the data)"))
    _plot_curves(run)
    run.write_summary(summary)
    return summary


def _plot_curves(run: RunDir) -> None:
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


