"""The real gaze data sets by name, opened from the user's disk as streaming data sets.

A data reference is ``NAME:ROOT`` (e.g. ``mpii:/data/MPIIFaceGaze``); a plain name is a
synthetic domain. Expected layouts (nothing is downloaded):

    xgaze     ETH-XGaze release root with train/subject0000.h5 ... (or a folder of h5 files);
              the test/ split has no labels and is for prediction only
    gaze360   GazeHub layout: ROOT/Label/train.label, ROOT/Image/...; subject ids from the
              original image paths (rec_XXX: one recording)
    mpii      GazeHub layout: ROOT/Label/p00.label ... p14.label, ROOT/Image/...
    eyediap   GazeHub layout: ROOT/Label/*.label (one per person), ROOT/Image/...

Faces are resized to the model's input size (224x224 in the paper protocol); the
ImageNet standardisation happens inside the model (``input_norm="imagenet"``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from genlab.core.errors import ConfigError, DataError
from genlab.core.registry import Registry
from genlab.gaze.data.gazehub import GAZE360_SUBJECT_PATTERN, GazeHub
from genlab.gaze.data.gazeset import GazeLabels
from genlab.gaze.data.streaming import StreamingSet
from genlab.gaze.data.xgaze import ETHXGaze


@dataclass(frozen=True)
class RealDataset:
    """A real data set: how to open it from its root folder."""

    description: str
    open: Callable[[Path, tuple[int, int], str], object]  # (root, size, labels) -> Dataset


def _xgaze(root: Path, size, labels: str):
    folder = root / "train" if (root / "train").is_dir() else root
    return ETHXGaze(folder, size=size, labels=labels)


def _label_files(root: Path, pattern: str) -> list[Path]:
    files = sorted((root / "Label").glob(pattern))
    if not (root / "Image").is_dir() or not files:
        raise DataError(f"{root}: expected the GazeHub layout, {root}/Label/{pattern} label "
                        f"files and a {root}/Image folder")
    return files


def _gazehub(pattern: str, subject_pattern: str | None = None):
    def open_(root: Path, size, labels: str):
        return GazeHub(root / "Image", _label_files(root, pattern), size=size,
                       subject_pattern=subject_pattern)
    return open_


REAL_DATASETS: Registry[RealDataset] = Registry("real data set")
REAL_DATASETS.register("xgaze", RealDataset("ETH-XGaze h5 files (train split)", _xgaze))
REAL_DATASETS.register("gaze360", RealDataset("Gaze360 in GazeHub format (train.label)",
                                              _gazehub("train.label", GAZE360_SUBJECT_PATTERN)))
REAL_DATASETS.register("mpii", RealDataset("MPIIFaceGaze in GazeHub format (p00-p14)",
                                           _gazehub("p*.label")))
REAL_DATASETS.register("eyediap", RealDataset("EyeDiap in GazeHub format (all label files)",
                                              _gazehub("*.label")))


def split_ref(ref: str) -> tuple[str, Path] | None:
    """(name, root) of a ``NAME:ROOT`` real-data reference; None for a synthetic domain."""
    if ":" not in ref:
        return None
    name, root = ref.split(":", 1)
    REAL_DATASETS.canonical(name)
    if not root:
        raise ConfigError(f"data reference {ref!r} names no folder (expected {name}:ROOT)")
    return name, Path(root)


def open_real(ref: str, size, *, workers: int = 0, labels: str = "required") -> StreamingSet:
    """A streaming data set for a ``NAME:ROOT`` reference (see the module docstring)."""
    parsed = split_ref(ref)
    if parsed is None:
        raise ConfigError(f"{ref!r} is not a real-data reference (expected NAME:ROOT with NAME "
                          f"one of {', '.join(REAL_DATASETS)})")
    name, root = parsed
    entry = REAL_DATASETS.get(name)
    if not root.is_dir():
        raise DataError(f"{root}: no such folder ({name}: {entry.description})")
    dataset = entry.open(root, tuple(size), labels)
    return StreamingSet(dataset, GazeLabels.build(dataset.gaze, dataset.subject), ref,
                        workers=workers)
