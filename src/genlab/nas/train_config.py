"""The options of `genlab nas train`: one command, two trainers.

``--dataset imagenet`` trains with the ImageNet recipe on image folders
(genlab.nas.transfer.classify.imagenet.ImageNetTrainConfig); any other data set retrains with
the space's recipe (genlab.nas.retrain.RetrainConfig). :class:`NasTrainConfig` is a flat
command config: RetrainConfig's options plus the ImageNet-only ones (declared by
ImageNetTrainConfig, left None here: an ImageNet option given with another data set is
refused), and it builds the config of the trainer its data set selects. The command is built
when it is used (genlab.cli.commands.lazy_app), so this module may import the trainers.

``--from RUN`` takes the architecture and its space from a finished `nas search` run
(:func:`searched_architecture`: its summary.json) instead of ARCH: a search to a retraining
in one step.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from genlab.core.errors import ConfigError
from genlab.core.options import option, option_like, spec_of
from genlab.core.runs import CONFIG, SUMMARY, check_run_folder, read_json
from genlab.nas.inputs import run_kind
from genlab.nas.retrain import RetrainConfig
from genlab.nas.transfer.classify import imagefolder
from genlab.nas.transfer.classify.imagenet import ImageNetTrainConfig

IMAGENET = "imagenet"
# RetrainConfig's options that the ImageNet trainer does not take (its crop: --image-size)
NOT_IMAGENET = ("size", "cutout")
SEARCH_KIND = "nas search"


def train_datasets() -> tuple[str, ...]:
    """The --dataset choices of nas train: the registered data sets, then imagenet."""
    from genlab.nas.data import DATASETS

    return (*DATASETS.choices(), IMAGENET)


def searched_architecture(run: str | Path, space: str | None = None) -> tuple[str, str]:
    """(genotype, space) of the finished `nas search` run in the folder ``run``: its
    summary.json. ``space`` (a --space given with --from) must be the run's. ConfigError
    names what is wrong: no run there, another command's run, an unfinished search."""
    folder = Path(run)
    where = f"--from {folder}"
    if not (folder / CONFIG).is_file():
        raise ConfigError(f"{where}: no genlab run there (no {CONFIG}); give the --out folder "
                          f"of a {SEARCH_KIND}")
    config = check_run_folder(folder)
    kind = run_kind(folder, config) if config is not None else None
    if kind != SEARCH_KIND:
        what = "not a genlab run" if kind is None else f"{'an' if kind[0] in 'aeiou' else 'a'} " \
            f"{kind} run"
        raise ConfigError(f"{where}: {what}, not a {SEARCH_KIND} run; give the --out folder of "
                          f"a {SEARCH_KIND}")
    file = folder / SUMMARY
    if not file.is_file():
        raise ConfigError(f"{where}: the search has not finished (no {SUMMARY}); finish it "
                          f"with: genlab {SEARCH_KIND} --out {folder} --resume")
    try:
        summary = read_json(file)
        genotype, searched = summary["genotype"], summary["space"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{where}: {file} holds no genotype and space ({exc})") from None
    if space is not None and space != searched:
        raise ConfigError(f"{where}: the run searched the {searched} space, not {space}; "
                          f"leave --space out or pass --space {searched}")
    return genotype, searched


def _imagenet(name: str):
    """An ImageNet-only option: ImageNetTrainConfig's declaration, None (not given) here."""
    f = ImageNetTrainConfig.__dataclass_fields__[name]
    default = "" if f.default is None else f" (default {f.default})"
    return option_like(ImageNetTrainConfig, name, default=None,
                       help=f"--dataset {IMAGENET}: {spec_of(f).help.rstrip('.')}{default}.")


@dataclass
class NasTrainConfig(RetrainConfig):
    """Every option of `genlab nas train` (module doc): RetrainConfig's, --from, then the
    ImageNet trainer's own."""

    arch: str = option_like(RetrainConfig, "arch", required=False, help=(
        "Genotype text of the space (NB201 string, DARTS Genotype(...), MobileNet choices); "
        "or leave it out and pass --from RUN."))
    space: str | None = option_like(RetrainConfig, "space", default=None, help=(
        "Search space of ARCH (default nb201; with --from: the run's; docs/nas_spaces.md; "
        "genlab nas spaces)."))

    dataset: str = option_like(RetrainConfig, "dataset", choices=f"{__name__}:train_datasets",
                               help=(
        "Data set: a registered one (those read from disk need --data-root), folder:PATH, your "
        "images (one sub-folder per class; docs/cli.md), or imagenet: image folders trained "
        "with the ImageNet recipe (docs/nas_transfer.md)."))
    data_root: str | None = option_like(RetrainConfig, "data_root", help=(
        f"Folder with the data set's files (not for digits; --dataset imagenet: "
        f"{imagefolder.LAYOUT})."))
    batch_size: int | None = option_like(RetrainConfig, "batch_size", default=None, help=(
        f"Global batch (default {RetrainConfig.batch_size}; --dataset imagenet: the recipe's, "
        "DARTS 1024, MobileNet 256)."))
    from_run: str | None = option(None, flags=("--from",), help=(
        "A finished nas search run folder: retrain its genotype in its space (instead of "
        "ARCH and --space)."))
    image_size: int | None = _imagenet("image_size")
    workers: int | None = _imagenet("workers")
    bn_weight_decay: bool | None = _imagenet("bn_weight_decay")
    schedule: str | None = _imagenet("schedule")
    warmup_epochs: int | None = _imagenet("warmup_epochs")
    label_smoothing: float | None = _imagenet("label_smoothing")
    checkpoint_steps: int | None = _imagenet("checkpoint_steps")
    max_steps: int | None = _imagenet("max_steps")

    def architecture(self) -> NasTrainConfig:
        """A copy whose ARCH and space are set: from --from RUN (module doc), else ARCH and
        --space (default nb201); ConfigError when neither or both are given."""
        if self.from_run:
            if self.arch:
                raise ConfigError("give ARCH or --from RUN, not both")
            arch, space = searched_architecture(self.from_run, self.space)
            return replace(self, arch=arch, space=space, from_run=None)
        if not self.arch:
            raise ConfigError("missing ARCH: give a genotype, or --from RUN (a nas search "
                              "run folder)")
        return replace(self, space=self.space or RetrainConfig.space)

    def retrain_config(self) -> RetrainConfig:
        """The retraining (any data set but imagenet); ImageNet options are refused."""
        if self.from_run or not self.arch or self.space is None:
            return self.architecture().retrain_config()
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
        if self.from_run or not self.arch or self.space is None:
            return self.architecture().imagenet_config()
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
        if self.from_run or not self.arch or self.space is None:
            return self.architecture().resolved()
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
