"""`genlab nas predict RUN IMG...` and `genlab optim predict RUN IMG...`: a trained
classifier run's predictions on image files (genlab.inference reads the images as the run's
training read its own), one line per image.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from genlab.core.errors import CheckpointError, DataError
from genlab.core.options import check_options, option
from genlab.inference import Prediction
from genlab.loading import load

PREDICTED_KINDS = ("nas train", "nas search", "optim train")


@dataclass
class PredictConfig:
    """The options of `genlab nas predict` and `genlab optim predict`."""

    kinds: ClassVar[tuple[str, ...]] = PREDICTED_KINDS
    command: ClassVar[str] = "predict"

    run: str = option(None, argument=True, required=True,
                      help="Run folder (or its checkpoint.pt) of a classifier's training.")
    images: list[str] = option(factory=list, argument=True, required=True, parse="list",
                               help="Image files (any size; grey or colour), read as the "
                                    "run's training read its images.")
    batch_size: int = option(64, help="Images per forward pass.", gt=0)
    device: str = option("cpu", help="cpu | cuda | cuda:N | auto (cuda when there is one).")

    def predictions(self) -> list[Prediction]:
        check_options(self)
        return predict_run(self.run, self.images, batch_size=self.batch_size,
                           device=self.device, kinds=self.kinds, command=self.command)


@dataclass
class NasPredictConfig(PredictConfig):
    """The options of `genlab nas predict`: a nas train (or nas search) run."""

    kinds: ClassVar[tuple[str, ...]] = ("nas train", "nas search")
    command: ClassVar[str] = "nas predict"


@dataclass
class OptimPredictConfig(PredictConfig):
    """The options of `genlab optim predict`: an optim train run."""

    kinds: ClassVar[tuple[str, ...]] = ("optim train",)
    command: ClassVar[str] = "optim predict"


def _a(kind: str) -> str:
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def predict_run(run: str | Path, images, *, batch_size: int = 64, device: str = "cpu",
                kinds: tuple[str, ...] = PREDICTED_KINDS,
                command: str = "predict") -> list[Prediction]:
    """The predictions of the classifier in ``run`` (a run of one of ``kinds``) on
    ``images``; every image is checked before any is predicted."""
    from genlab.core.devices import resolve_device

    loaded = load(run, map_location="cpu")
    if loaded.kind not in kinds:
        raise CheckpointError(f"{run} is {_a(loaded.kind)} run; {command} needs "
                              f"{' or '.join(_a(k) for k in kinds)} run")
    predictor = loaded.predictor(resolve_device(device))
    items = list(predictor._items(images))
    for _, image in items:  # a missing or undecodable file: refused before any forward pass
        if isinstance(image, (str, Path)) and not Path(image).is_file():
            raise DataError(f"{image}: no such image file")
    return predictor.predict(images, batch_size)
