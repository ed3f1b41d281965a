"""A user's own labelled images: the ImageFolder layout, read batch by batch.

``folder:PATH`` (``--dataset folder:PATH``) names ``PATH/CLASS/*.png|jpg|...``: one
sub-folder per class (torchvision's ImageFolder layout and its file suffixes), images grey
or RGB of any size, resized to the run's ``--size``. :func:`scan_folder` checks the layout
before anything is written and stops with one line (ConfigError) for a missing folder, no
class sub-folders, a single class, a class without images, a file that is not an image or
whose header is unreadable, and a folder that mixes grey and colour images (naming one file
of each). Up front only each file's header is read (PIL opens without decoding: mode and
size); an image whose pixels do not decode stops the run when its batch is read, naming it.

:func:`folder_data` splits the images into train / val / test by the run's seed (stratified,
every class in every part) and returns an ImageData whose images are
:class:`FolderImages`: a lazy ``(N, C, S, S)`` float32 array that decodes only the rows it
is indexed with. Nothing holds the whole folder in memory; the channels are standardised
with the mean and std of at most 512 training images, decoded once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from genlab.core.errors import ConfigError, DataError

PREFIX = "folder:"
STATS_IMAGES = 512  # training images whose pixels give the standardisation
SPLIT = (0.5, 0.25, 0.25)  # train / val / test of the images (the search's halves: train, val)


def folder_path(name: str) -> Path | None:
    """``folder:PATH`` -> PATH; any other data set name -> None."""
    return Path(name[len(PREFIX):]).expanduser() if name.startswith(PREFIX) else None


@dataclass(frozen=True)
class FolderScan:
    """The checked layout: class names (sorted), every image file and its label, channels."""

    root: Path
    classes: tuple[str, ...]
    files: tuple[str, ...]
    labels: np.ndarray
    channels: int


def scan_folder(root: str | Path) -> FolderScan:
    """The layout of ``root`` after every check that needs no pixel (see the module doc)."""
    from PIL import Image, UnidentifiedImageError
    from torchvision.datasets.folder import IMG_EXTENSIONS

    root = Path(root)
    where = f"--dataset {PREFIX}{root}"
    if not root.is_dir():
        raise ConfigError(f"{where}: no such folder")
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise ConfigError(f"{where}: no class sub-folders; expected one sub-folder of images "
                          "per class (PATH/CLASS/*.png)")
    if len(classes) < 2:
        raise ConfigError(f"{where}: one class ({classes[0]}); a classifier needs at least two "
                          "class sub-folders")
    files: list[str] = []
    labels: list[int] = []
    modes: dict[int, str] = {}
    for label, name in enumerate(classes):
        found = sorted(p for p in (root / name).rglob("*")
                       if p.is_file() and p.suffix.lower() in IMG_EXTENSIONS)
        if not found:
            raise ConfigError(f"{where}: class folder {name} holds no image "
                              f"({', '.join(IMG_EXTENSIONS[:4])}, ...)")
        for path in found:
            try:
                with Image.open(path) as im:
                    channels = 1 if im.mode in ("1", "L", "LA", "I", "I;16", "F") else 3
            except (UnidentifiedImageError, OSError) as exc:
                raise ConfigError(f"{where}: {path} is not a readable image ({exc})") from exc
            modes.setdefault(channels, str(path))
            if len(modes) > 1:
                raise ConfigError(f"{where}: grey and colour images mixed ({modes[1]} is grey, "
                                  f"{modes[3]} colour); convert them to one kind")
            files.append(str(path))
            labels.append(label)
    return FolderScan(root, tuple(classes), tuple(files), np.asarray(labels, dtype=np.int64),
                      next(iter(modes)))


def decode(path: str, channels: int, size: int) -> torch.Tensor:
    """One image as a (C, size, size) float32 tensor in [0, 1] (bilinear resize)."""
    from PIL import Image

    try:
        with Image.open(path) as opened:
            image = opened.convert("L" if channels == 1 else "RGB").resize(
                (size, size), Image.Resampling.BILINEAR)
            array = np.asarray(image, dtype=np.float32) / 255.0
    except OSError as exc:
        raise DataError(f"{path}: the image does not decode ({exc})") from exc
    if channels == 1:
        array = array[None]
    else:
        array = array.transpose(2, 0, 1)
    return torch.from_numpy(np.ascontiguousarray(array))


class FolderImages:
    """A lazy (N, C, S, S) float32 array of image files: indexing decodes only those rows."""

    def __init__(self, files: tuple[str, ...], channels: int, size: int,
                 mean: torch.Tensor | None = None, std: torch.Tensor | None = None,
                 device: torch.device | str = "cpu"):
        self.files, self.channels, self.size = tuple(files), channels, size
        self.mean, self.std, self.device = mean, std, torch.device(device)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (len(self.files), self.channels, self.size, self.size)

    def __len__(self) -> int:
        return len(self.files)

    def _rows(self, index) -> list[int]:
        if isinstance(index, slice):
            return list(range(len(self.files)))[index]
        if isinstance(index, int):
            return [index]
        if isinstance(index, torch.Tensor):
            index = index.tolist()
        return [int(i) for i in np.asarray(index).reshape(-1)]

    def __getitem__(self, index) -> torch.Tensor:
        rows = self._rows(index)
        x = torch.stack([decode(self.files[i], self.channels, self.size) for i in rows]) \
            if rows else torch.empty(0, self.channels, self.size, self.size)
        if self.mean is not None and self.std is not None:
            x = (x - self.mean) / self.std
        x = x.to(self.device)
        return x[0] if isinstance(index, int) else x

    def to(self, device) -> FolderImages:
        return FolderImages(self.files, self.channels, self.size, self.mean, self.std, device)

    def subset(self, rows) -> FolderImages:
        return FolderImages(tuple(self.files[i] for i in self._rows(rows)), self.channels,
                            self.size, self.mean, self.std, self.device)

    @staticmethod
    def concat(parts: list[FolderImages]) -> FolderImages:
        first = parts[0]
        return FolderImages(tuple(f for p in parts for f in p.files), first.channels,
                            first.size, first.mean, first.std, first.device)


def folder_data(root: str | Path, size: int, seed: int):
    """ImageData of a folder: a stratified train / val / test split by ``seed`` (module doc)."""
    from genlab.core.data import ImageData, Split, stratified_split

    scan = scan_folder(root)
    parts = stratified_split(scan.labels, SPLIT, seed)
    if any(len(p) == 0 for p in parts):
        raise ConfigError(f"--dataset {PREFIX}{scan.root}: {len(scan.files)} images are too few "
                          "for a train / val / test split; give at least 4 per class")
    images = FolderImages(scan.files, scan.channels, size)
    train = images.subset(parts[0])
    sample = train[list(range(min(STATS_IMAGES, len(train))))]
    mean = sample.mean(dim=(0, 2, 3), keepdim=True)[0]
    std = sample.std(dim=(0, 2, 3), keepdim=True)[0].clamp_min(1e-6)
    splits = []
    for rows in parts:
        lazy = images.subset(rows)
        lazy.mean, lazy.std = mean, std
        splits.append(Split(lazy, torch.from_numpy(scan.labels[rows])))  # type: ignore[arg-type]
    train_split, val_split, test_split = splits
    return ImageData(f"{PREFIX}{scan.root}", train_split, val_split, test_split,
                     len(scan.classes), scan.channels, size)
