"""The options of `genlab nas train`: one command, two trainers.

``--dataset imagenet`` trains with the ImageNet recipe on image folders
(genlab.nas.transfer.classify.imagenet.ImageNetTrainConfig); any other data set retrains with
the space's recipe (genlab.nas.retrain.RetrainConfig). :class:`NasTrainConfig` is a flat
command config: RetrainConfig's options plus the ImageNet-only ones (declared by
ImageNetTrainConfig, left None here: an ImageNet option given with another data set is
refused), and it builds the config of the trainer its data set selects. The command is built
when it is used (genlab.cli.commands.lazy_app), so this module may import the trainers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from genlab.core.errors import ConfigError
from genlab.core.options import option_like, spec_of
from genlab.nas.retrain import RetrainConfig
from genlab.nas.transfer.classify import imagefolder
from genlab.nas.transfer.classify.imagenet import ImageNetTrainConfig

IMAGENET = "imagenet"
# RetrainConfig's options that the ImageNet trainer does not take (its crop: --image-size)
NOT_IMAGENET = ("size", "cutout")


def _imagenet(name: str):
    """An ImageNet-only option: ImageNetTrainConfig's declaration, None (not given) here."""
    f = ImageNetTrainConfig.__dataclass_fields__[name]
    default = "" if f.default is None else f" (default {f.default})"
    return option_like(ImageNetTrainConfig, name, default=None,
                       help=f"--dataset {IMAGENET}: {spec_of(f).help.rstrip('.')}{default}.")


@dataclass
class NasTrainConfig(RetrainConfig):
    """Every option of `genlab nas train` (module doc): RetrainConfig's, then the ImageNet
    trainer's own."""

    dataset: str = option_like(RetrainConfig, "dataset", help=(
        "Data set: a registered one (those read from disk need --data-root), folder:PATH, your "
        "images (one sub-folder per class; docs/cli.md), or imagenet: image folders trained "
        "with the ImageNet recipe (docs/nas_transfer.md)."))
    data_root: str | None = option_like(RetrainConfig, "data_root", help=(
        f"Folder with the data set's files (not for digits; --dataset imagenet: "
        f"{imagefolder.LAYOUT})."))
    batch_size: int | None = option_like(RetrainConfig, "batch_size", default=None, help=(
        f"Global batch (default {RetrainConfig.batch_size}; --dataset imagenet: the recipe's, "
        "DARTS 1024, MobileNet 256)."))
    image_size: int | None = _imagenet("image_size")
    workers: int | None = _imagenet("workers")
    bn_weight_decay: bool | None = _imagenet("bn_weight_decay")
    schedule: str | None = _imagenet("schedule")
    warmup_epochs: int | None = _imagenet("warmup_epochs")
    label_smoothing: float | None = _imagenet("label_smoothing")
    checkpoint_steps: int | None = _imagenet("checkpoint_steps")
    max_steps: int | None = _imagenet("max_steps")

    def retrain_config(self) -> RetrainConfig:
        """The retraining (any data set but imagenet); ImageNet options are refused."""
        given = [f.name for f in fields(self) if f.name not in _RETRAIN
                 and getattr(self, f.name) is not None]
        if given:
            raise ConfigError(f"--{given[0].replace('_', '-')} is an option of --dataset "
                              f"{IMAGENET}")
        values = {name: getattr(self, name) for name in _RETRAIN}
        if values["batch_size"] is None:  # RetrainConfig's own default
            del values["batch_size"]
        return RetrainConfig(**values)

    def imagenet_config(self) -> ImageNetTrainConfig:
        """The ImageNet training; the options it does not take are refused."""
        for name in NOT_IMAGENET:
            if getattr(self, name) is not None:
                raise ConfigError(f"--{name} is not an option of --dataset {IMAGENET} (crop "
                                  "size: --image-size)")
        values = {name: getattr(self, name) for name in _IMAGENET
                  if getattr(self, name) is not None}
        values["data_root"] = values.get("data_root") or ""
        return ImageNetTrainConfig(**values)

    def resolved(self) -> NasTrainConfig:
        """A copy with every None the selected trainer fills (its recipe) filled."""
        if self.dataset == IMAGENET:
            done = self.imagenet_config().resolved()
            return replace(self, **{k: getattr(done, k) for k in _IMAGENET
                                    if getattr(self, k) is None and k != "data_root"})
        done = self.retrain_config().resolved()
        return replace(self, **{k: getattr(done, k) for k in _RETRAIN})


_RETRAIN = tuple(f.name for f in fields(RetrainConfig))
# the fields both configs have, and the ImageNet ones (not its fixed dataset and eval_on)
_IMAGENET = tuple(f.name for f in fields(ImageNetTrainConfig)
                  if f.name in NasTrainConfig.__dataclass_fields__
                  and f.name not in ("dataset", "eval_on"))
