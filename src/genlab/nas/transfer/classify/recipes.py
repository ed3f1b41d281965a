"""The ImageNet recipes of `genlab nas train --dataset imagenet`, one per space family.

DARTS family (PC-DARTS / SDARTS / beta-DARTS ``train_imagenet.py``): the ImageNet layout of
the evaluation network (C=48, 14 cells, auxiliary head after cell 9), 250 epochs, SGD
momentum 0.9, weight decay 3e-5 on every parameter, batch 1024 at lr 0.5, 5 warm-up epochs
then linear decay, label smoothing 0.1 in training, auxiliary weight 0.4, gradient clip 5,
no drop-path. MobileNet-like (ProxylessNAS' ImageNet training): the ImageNet stem at first
width 32, 300 epochs, cosine, lr 0.05 at batch 256, Nesterov momentum 0.9, weight decay 4e-5
without decay on BatchNorm and biases, label smoothing 0.1. Both: RandomResizedCrop 224,
flip, ColorJitter(0.4, 0.4, 0.4, 0.2); evaluation resize 256, centre crop 224.

Learning rate per epoch e of E (set before the epoch runs): ``linear`` is PC-DARTS'
``adjust_lr``, lr (E - 5 - e) / (E - 5) until the last 5 epochs and lr (E - e) / (5 (E - 5))
in them (lr (E - e) / E when E <= 5), the first ``warmup`` epochs replaced by
lr (e + 1) / warmup; ``cosine`` is lr (1 + cos(pi e / E)) / 2 after the same warm-up (0 in
the MobileNet recipe). ProxylessNAS anneals its cosine per step; here it moves per epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from genlab.core.errors import ConfigError
from genlab.core.trainer import cosine_lr


@dataclass(frozen=True)
class ImageNetRecipe:
    """One family's ImageNet recipe; every entry is a flag of `genlab nas train`."""

    channels: int
    cells: int | None
    epochs: int
    batch_size: int
    lr: float
    momentum: float
    nesterov: bool
    weight_decay: float
    bn_weight_decay: bool  # False: no decay on BatchNorm weights and on biases
    schedule: str  # linear | cosine
    warmup_epochs: int
    label_smoothing: float
    grad_clip: float
    auxiliary_weight: float
    drop_path: float
    image_size: int = 224
    source: str = ""


RECIPES = {
    "darts": ImageNetRecipe(channels=48, cells=14, epochs=250, batch_size=1024, lr=0.5,
                            momentum=0.9, nesterov=False, weight_decay=3e-5,
                            bn_weight_decay=True, schedule="linear", warmup_epochs=5,
                            label_smoothing=0.1, grad_clip=5.0, auxiliary_weight=0.4,
                            drop_path=0.0,
                            source="PC-DARTS / SDARTS / beta-DARTS train_imagenet.py"),
    "mobilenet": ImageNetRecipe(channels=32, cells=None, epochs=300, batch_size=256, lr=0.05,
                                momentum=0.9, nesterov=True, weight_decay=4e-5,
                                bn_weight_decay=False, schedule="cosine", warmup_epochs=0,
                                label_smoothing=0.1, grad_clip=0.0, auxiliary_weight=0.0,
                                drop_path=0.0, source="ProxylessNAS (mit-han-lab) ImageNet"),
}
SCHEDULES = ("linear", "cosine")


def recipe_family(space) -> str:
    """'darts' for the DARTS-family spaces, 'mobilenet' for the MobileNet-like one."""
    from genlab.nas.spaces.darts.space import DartsFamilySpace

    if isinstance(space, DartsFamilySpace):
        return "darts"
    if space.name == "mobilenet":
        return "mobilenet"
    raise ConfigError(f"space {space.name} has no ImageNet network; --dataset imagenet trains "
                      "the DARTS-family spaces and mobilenet")


def network_options(family: str, auxiliary_weight: float, drop_path: float) -> dict:
    """The builder options of the family's ImageNet network."""
    if family == "darts":
        return {"layout": "imagenet", "auxiliary": auxiliary_weight > 0, "drop_path": 0.0}
    if auxiliary_weight or drop_path:
        raise ConfigError("the MobileNet-like network has no auxiliary head and no drop-path: "
                          "pass --aux-weight 0 --drop-path 0")
    return {"stem": "imagenet"}


def lr_at(schedule: str, lr: float, epoch: int, epochs: int, warmup: int) -> float:
    """The learning rate of ``epoch`` (module docstring)."""
    if epoch < warmup:
        return lr * (epoch + 1) / warmup
    if schedule == "cosine":
        return cosine_lr(epoch, epochs, lr)
    if epochs <= 5:
        return lr * (epochs - epoch) / epochs
    if epochs - epoch > 5:
        return lr * (epochs - 5 - epoch) / (epochs - 5)
    return lr * (epochs - epoch) / ((epochs - 5) * 5)


class EpochSchedule:
    """The Trainer's scheduler: ``lr_at`` set before each epoch, drop-path ramped from 0 to
    ``drop_path`` over the epochs on networks that have it; its state is the next epoch."""

    def __init__(self, optimizer, model: nn.Module, *, schedule: str, lr: float, epochs: int,
                 warmup: int, drop_path: float = 0.0):
        self.optimizer, self.model = optimizer, model
        self.schedule, self.lr, self.epochs, self.warmup = schedule, lr, epochs, warmup
        self.drop_path, self.epoch = drop_path, 0
        self._apply()

    def _apply(self) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(self.schedule, self.lr, self.epoch, self.epochs, self.warmup)
        if self.drop_path:
            self.model.set_drop_path(self.drop_path * self.epoch / self.epochs)

    def step(self) -> None:
        self.epoch += 1
        self._apply()

    def state_dict(self) -> dict:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        self.epoch = int(state["epoch"])
        self._apply()


def parameter_groups(model: nn.Module, weight_decay: float, bn_weight_decay: bool) -> list:
    """One group with ``weight_decay``, or (``bn_weight_decay=False``) a second without it
    for BatchNorm weights and biases (every parameter of one dimension)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if bn_weight_decay:
        return [{"params": params, "weight_decay": weight_decay}]
    decay = [p for p in params if p.dim() > 1]
    flat = [p for p in params if p.dim() <= 1]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": flat, "weight_decay": 0.0}]
