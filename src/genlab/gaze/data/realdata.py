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
from genlab.core.registry import Registry, import_submodules
from genlab.gaze.data.gazeset import GazeLabels
from genlab.gaze.data.streaming import StreamingSet

#: what a reader's data set must offer (checked when it is opened)
READER_INTERFACE = ("gaze", "subject", "__len__", "__getitem__")


@dataclass(frozen=True)
class RealDataset:
    """A real data set: how to open it from its root folder.

    ``open(root, size, labels)`` returns a torch Dataset with ``gaze`` (N x 2 pitch/yaw,
    radians; NaN rows where ``labels="optional"`` and the split has none), ``subject`` (N
    subject ids), ``__len__`` and ``__getitem__`` (index -> (image tensor 3 x H x W in [0, 1]
    at ``size``, gaze)); ``open_real`` wraps it in a StreamingSet. A reader registers its
    data sets in its own module (``register_reader``)."""

    description: str
    open: Callable[[Path, tuple[int, int], str], object]  # (root, size, labels) -> Dataset


REAL_DATASETS: Registry[RealDataset] = Registry("real data set")


def register_reader(name: str, description: str, opener: Callable) -> RealDataset:
    """Register ``opener(root, size, labels)`` as the real data set ``name``."""
    if not callable(opener):
        raise ConfigError(f"real data set {name!r}: its opener is not callable")
    return REAL_DATASETS.register(name, RealDataset(description, opener))


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
    missing = [a for a in READER_INTERFACE if not hasattr(dataset, a)]
    if missing:
        raise DataError(f"the {name} reader returned a data set without {', '.join(missing)} "
                        f"(a reader gives {', '.join(READER_INTERFACE)})")
    return StreamingSet(dataset, GazeLabels.build(dataset.gaze, dataset.subject), ref,
                        workers=workers)


# every reader module registers its data sets (xgaze, gazehub, and any new one)
import_submodules("genlab.gaze.data", [str(Path(__file__).parent)],
                  skip=("gazeset", "streaming", "splits", "images", "realdata"))
