"""The data sets of the NAS commands (``--dataset``): a core.registry Registry of builders.

Every entry is a :class:`DatasetEntry` (``builder(root=..., size=..., seed=...)`` returns an
ImageData, whether it reads files from ``root``, a description); ``load_image_data`` looks
names up in ``DATASETS``. The generic readers (digits, CIFAR python batches) are in
genlab.core.data; this module adds the NAS proxies and NB201's ImageNet16 subset:

- ``digits``, ``cifar10``, ``cifar100``: genlab.core.data's readers;
- ``imagenet16``: NAS-Bench-201's ImageNet16-120 (train_data_batch_1..10, val_data; 1-based
  labels), the first 120 classes;
- ``digits-noisy``: contrast lowered by a factor in [0.5, 1], Gaussian noise (std 0.25 of the
  [0, 1] range) and an occluding square of a quarter of the side, in every split;
- ``digits-clutter``: the digits as coloured figures of random polarity on coloured 1/f
  clutter (natural-image spectrum), 3 channels, three composites per image of the train and
  val halves and one per test image. Use ``size`` 16 or more;
- ``shapes``: genlab.core.data.shapes, objects made of parts on textured clutter, 10 balanced
  classes of 500 images rendered at ``size`` (its default side: 32), split in the digits'
  shares by the seed (stratified);
- ``folder:PATH``: one entry for every folder of the user's images (genlab.core.data.imagefolder:
  the ImageFolder layout, checked by ``check_dataset`` before a run folder is made, decoded
  batch by batch by DataLoader workers); the path is in the name, not in ``root``.

:class:`StepBatches` gives the search its batch of each step; for image files it streams:
one DataLoader reads the rows of step t, t+1, ... (across epochs) as its workers ask for
them, so batches are decoded ahead of the step that needs them, and a jump to another step
(a resumed run, a selection rule's fixed batches) starts the stream there.

The proxies keep the digits' stratified split; their corruption (genlab.nas.data.clutter) is drawn
once per image from the seed, so every split is fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from genlab.core.data import (
    Batches,
    ImageData,
    Split,
    batch_arrays,
    digit_splits,
    find_folder,
    imagefolder,
    load_cifar,
    load_digits_data,
    read_rows,
    split_arrays,
    standardise,
    streamed,
)
from genlab.core.data.shapes import NATIVE_SIZE, load_shapes_data
from genlab.core.errors import ConfigError
from genlab.core.registry import Registry
from genlab.core.seeding import make_generator
from genlab.nas.data.clutter import corrupt, on_clutter


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
                    seed: int = 0) -> ImageData:
    """The registered data set ``name``; those read from disk need ``root``;
    ``folder:PATH`` reads PATH (genlab.core.data.imagefolder)."""
    entry = check_dataset(name, root)
    if (path := imagefolder.folder_path(name)) is not None:
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


def load_imagenet16(root: str | Path, seed: int = 0, val_fraction: float = 0.5,
                    num_classes: int = 120) -> ImageData:
    """ImageNet16 batches (train_data_batch_1..10, val_data; labels 1-based), first classes."""
    train_files = [f"train_data_batch_{i}" for i in range(1, 11)]
    folder = find_folder(Path(root), train_files + ["val_data"])
    xtr, ytr = zip(*(batch_arrays(folder / f, "labels", 16) for f in train_files), strict=True)
    xte, yte = batch_arrays(folder / "val_data", "labels", 16)
    xtr, ytr = np.concatenate(xtr), np.concatenate(ytr) - 1
    yte = yte - 1
    keep_tr, keep_te = ytr < num_classes, yte < num_classes
    return split_arrays("imagenet16", xtr[keep_tr], ytr[keep_tr], xte[keep_te], yte[keep_te],
                        num_classes, seed, val_fraction)


@register_dataset("digits", "scikit-learn digits (embedded), 1,797 grey 8x8 images")
def _digits(root, size: int, seed: int) -> ImageData:
    return load_digits_data(size=size, seed=seed)


@register_dataset("cifar10", "CIFAR-10 python batches", needs_root=True)
def _cifar10(root, size: int, seed: int) -> ImageData:
    return load_cifar("cifar10", root, seed=seed)


@register_dataset("cifar100", "CIFAR-100 python batches", needs_root=True)
def _cifar100(root, size: int, seed: int) -> ImageData:
    return load_cifar("cifar100", root, seed=seed)


@register_dataset("imagenet16", "ImageNet16-120 batches", needs_root=True)
def _imagenet16(root, size: int, seed: int) -> ImageData:
    return load_imagenet16(root, seed=seed)


@register_dataset("digits-noisy", "digits with lowered contrast, strong noise and occlusion")
def _digits_noisy(root, size: int, seed: int) -> ImageData:
    xs, ys = digit_splits(size, seed)
    xs = standardise([corrupt(x, make_generator(seed, 101, k)) for k, x in enumerate(xs)])
    return ImageData("digits-noisy", Split(xs[0], ys[0]), Split(xs[1], ys[1]),
                     Split(xs[2], ys[2]), 10, 1, size)


CLUTTER_COPIES = (3, 3, 1)  # composites per source image in train, val, test


@register_dataset("digits-clutter", "digits as coloured figures on 1/f clutter, 3 channels")
def _digits_clutter(root, size: int, seed: int) -> ImageData:
    xs, ys = digit_splits(8, seed)
    out_x, out_y = [], []
    for k, (x, y, copies) in enumerate(zip(xs, ys, CLUTTER_COPIES, strict=True)):
        gen = make_generator(seed, 202, k)
        out_x.append(torch.cat([on_clutter(x, gen, size=size) for _ in range(copies)]))
        out_y.append(y.repeat(copies))
    out_x = standardise(out_x)
    return ImageData("digits-clutter", Split(out_x[0], out_y[0]), Split(out_x[1], out_y[1]),
                     Split(out_x[2], out_y[2]), 10, 3, size)


@register_dataset("shapes", "synthetic shapes (embedded): 10 classes of objects made of "
                  "parts on textured clutter, 5,000 colour images, 32x32 by default",
                  size=NATIVE_SIZE)
def _shapes(root, size: int, seed: int) -> ImageData:
    return load_shapes_data(size, seed)


@register_dataset(imagefolder.NAME, "your images: PATH/CLASS/*.png or .jpg, one sub-folder "
                  "per class, grey or colour, any size, resized to --size (docs/cli.md)")
def _folder(root, size: int, seed: int) -> ImageData:
    return imagefolder.folder_data(root, size, seed)


class StepBatches:
    """Step-indexed batches of one split (a search's stream): step t is batch t mod L of
    epoch t div L, each epoch a fresh shuffle of the seeded ``Batches``. Image files are
    streamed (module doc): steps asked for in order come from one DataLoader's workers."""

    def __init__(self, split, batch_size: int, seed: int):
        self.split = split
        self.batches = Batches(split, batch_size, seed=seed, drop_last=len(split) >= batch_size)
        self._orders: dict[int, list[torch.Tensor]] = {}  # epoch -> its batches' rows
        self._stream: Iterator | None = None  # image files: the stream, and the step it is at
        self._next = -1
        self._last: tuple[int, tuple] | None = None

    def __len__(self):
        return len(self.batches)

    def rows(self, step: int) -> torch.Tensor:
        """The rows of the split that make the batch of ``step``."""
        epoch, idx = divmod(step, len(self.batches))
        if epoch not in self._orders:
            if len(self._orders) >= 2:  # the stream reads ahead; an epoch's order is fixed by
                self._orders.pop(min(self._orders))  # the seed, made again if asked again
            self._orders[epoch] = list(self.batches.epoch_indices(epoch))
        return self._orders[epoch][idx]

    def _from(self, step: int):
        while True:
            yield self.rows(step)
            step += 1

    def at(self, step: int):
        """The (images, labels) batch of ``step``."""
        if self._last is not None and self._last[0] == step:
            return self._last[1]
        rows = self.rows(step)
        if not streamed(self.split.images):
            return self.split.images[rows], self.split.labels[rows]
        stream = self._stream
        if stream is None or step != self._next:
            stream = self._stream = read_rows(self.split.images, self._from(step))
        x = next(stream)
        self._next = step + 1
        self._last = (step, (x, self.split.labels[rows]))
        return self._last[1]
