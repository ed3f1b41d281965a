"""The registry of the NAS commands' data sets (``--dataset``): entries, look-up and the check
before a run folder is made (``check_dataset``), the loader (``load_image_data``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from genlab.core.data import ImageData, imagefolder
from genlab.core.errors import ConfigError
from genlab.core.registry import Registry


@dataclass(frozen=True)
class DatasetEntry:
    """A registered data set: ``builder(root=..., size=..., seed=...)`` returns its ImageData."""

    builder: Callable[..., ImageData]
    needs_root: bool
    description: str
    size: int | None = None  # the side its images are made at: the default --size


DATASETS: Registry[DatasetEntry] = Registry("dataset")


def register_dataset(name: str, description: str, *, needs_root: bool = False,
                     size: int | None = None):
    """Decorator: register ``builder(root, size, seed) -> ImageData`` under ``name``
    (``size``: the side its images are made at, the commands' default ``--size``)."""
    def add(builder: Callable[..., ImageData]) -> Callable[..., ImageData]:
        DATASETS.register(name, DatasetEntry(builder, needs_root, description, size))
        return builder
    return add


def default_size(name: str) -> int | None:
    """The default ``--size`` of data set ``name``: the side a registered one is made at, a
    folder's own (genlab.core.data.imagefolder.folder_size); None when it has none (the
    space's proxy size applies)."""
    if (side := imagefolder.folder_size(name)) is not None:
        return side
    return DATASETS.get(name).size if name in DATASETS else None


def load_image_data(name: str, root: str | Path | None = None, *, size: int = 8,
                    seed: int = 0, checked: bool = False) -> ImageData:
    """The registered data set ``name``; those read from disk need ``root``;
    ``folder:PATH`` reads PATH (genlab.core.data.imagefolder). ``checked``: the caller has
    run :func:`check_dataset` on these (a validated config), so it is not run again."""
    path = imagefolder.folder_path(name)
    if not checked:
        entry = check_dataset(name, root)
    else:
        entry = DATASETS.get(imagefolder.NAME if path is not None else name)
    if path is not None:
        root = path
    return entry.builder(root=root, size=size, seed=seed)


def check_dataset(name: str, root: str | Path | None = None) -> DatasetEntry:
    """The entry of ``name``, or ConfigError for an unknown name or a missing ``--data-root``
    (options checked before a run folder is made); ``folder:PATH``: the folder's layout and
    every image's header are checked (genlab.core.data.imagefolder.scan_folder)."""
    if (path := imagefolder.folder_path(name)) is not None:
        if root is not None:
            raise ConfigError(f"--data-root is not read with --dataset {name}: the folder is "
                              "the path after 'folder:'")
        imagefolder.scan_folder(path)
        return DATASETS.get(imagefolder.NAME)
    if name not in DATASETS:
        raise ConfigError(f"unknown --dataset {name!r}; expected one of: "
                          f"{', '.join(DATASETS.choices())}")
    entry = DATASETS.get(name)
    if entry.needs_root and root is None:
        embedded = ", ".join(n for n, e in DATASETS.items() if not e.needs_root)
        raise ConfigError(f"--dataset {name} reads files: pass --data-root pointing at its "
                          f"{entry.description}, or use an embedded one ({embedded})")
    return entry


