"""Streamed image folders: ``ROOT/train/CLASS/*.JPEG`` and ``ROOT/val/CLASS/*.JPEG``.

How this meets the Trainer: ``train_batches(epoch[, step])`` returns a DataLoader over this
rank's share of every global batch, already decoded and augmented (by torchvision transforms
in the workers), so the Trainer runs with ``sharded_batches=True`` and no in-memory
``augment``; every existing caller keeps the Trainer's default behaviour. Images are decoded
where they are read, once per rank, never on every rank.

- Order: epoch e's global batches are a permutation of the training images drawn from
  ``make_generator(seed, 61, e)``; a global batch of B splits across the ranks as
  ``torch.tensor_split`` does (genlab.core.parallel.distributed.shard_slice), so P processes
  see the images one process sees. Training drops the last incomplete batch (when there is a
  full one); evaluation keeps the folder order and every image.
- Augmentation: each sample's transforms draw from the torch RNG seeded with
  ``stream_seed(seed, 62, epoch, index)`` inside ``fork_rng``: the same crop and jitter
  whatever the worker count, rank count or resume point.
- Resume: ``batches(epoch, start)`` begins at global batch ``start`` (the sampler skips the
  consumed batches without reading them).
- Errors: a missing train/ or val/ folder, no class folders, a val class that train/ lacks, a
  class folder without images: DataError naming the folder, before any run folder is made. An
  image that does not decode raises DataError naming the file when it is read; the copy a
  DataLoader worker re-raises (several lines, with the worker's traceback) is turned back
  into that one line (genlab.core.data.imagefolder's read_image and stream_batches, which the
  user's own folders, ``--dataset folder:PATH``, read through too).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from genlab.core.data.imagefolder import read_image, stream_batches
from genlab.core.errors import ConfigError, DataError
from genlab.core.parallel.distributed import shard_slice, world_size
from genlab.core.seeding import make_generator, stream_seed

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet, as torchvision's models
LAYOUT = "ROOT/train/CLASS/*.JPEG and ROOT/val/CLASS/*.JPEG"
ORDER_STREAM, AUGMENT_STREAM = 61, 62


@dataclass(frozen=True)
class ImageFolders:
    """The scanned layout: class names (train/'s folders, sorted) and (path, label) lists."""

    root: Path
    classes: tuple[str, ...]
    train: list[tuple[str, int]]
    val: list[tuple[str, int]]


def _class_folders(folder: Path) -> list[str]:
    return sorted(d.name for d in folder.iterdir() if d.is_dir())


def _samples(folder: Path, mapping: dict[str, int], allow_empty: bool) -> list[tuple[str, int]]:
    from torchvision.datasets.folder import IMG_EXTENSIONS, make_dataset

    try:
        return make_dataset(str(folder), mapping, IMG_EXTENSIONS, allow_empty=allow_empty)
    except FileNotFoundError:
        empty = next(c for c in mapping if not any(
            p.is_file() and p.name.lower().endswith(IMG_EXTENSIONS)
            for p in (folder / c).iterdir()))
        raise DataError(f"{folder / empty}: a class folder with no image (extensions "
                        f"{', '.join(IMG_EXTENSIONS)})") from None


def scan_image_folders(root: str | Path) -> ImageFolders:
    """The layout under ``root``, or DataError naming the folder that breaks it."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root}: no such folder (--data-root; expected {LAYOUT})")
    for split in ("train", "val"):
        if not (root / split).is_dir():
            raise DataError(f"{root / split}: missing folder (expected {LAYOUT})")
    classes = _class_folders(root / "train")
    if not classes:
        raise DataError(f"{root / 'train'}: no class folders (expected {LAYOUT})")
    val_classes = _class_folders(root / "val")
    if not val_classes:
        raise DataError(f"{root / 'val'}: no class folders (expected {LAYOUT})")
    extra = sorted(set(val_classes) - set(classes))
    if extra:
        raise DataError(f"{root / 'val' / extra[0]}: class {extra[0]!r} is not in "
                        f"{root / 'train'}" + (f" (nor are {len(extra) - 1} more)"
                                               if len(extra) > 1 else ""))
    mapping = {c: i for i, c in enumerate(classes)}
    train = _samples(root / "train", mapping, allow_empty=False)
    val = _samples(root / "val", {c: mapping[c] for c in val_classes}, allow_empty=False)
    return ImageFolders(root, tuple(classes), train, val)


def resize_size(image_size: int) -> int:
    """The evaluation resize of a crop size: 256 for 224, the same ratio otherwise."""
    return round(image_size * 256 / 224)


def train_transform(image_size: int):
    """RandomResizedCrop, horizontal flip, ColorJitter(0.4, 0.4, 0.4, 0.2), normalised."""
    from torchvision import transforms as T

    return T.Compose([T.RandomResizedCrop(image_size), T.RandomHorizontalFlip(),
                      T.ColorJitter(0.4, 0.4, 0.4, 0.2), T.ToTensor(), T.Normalize(MEAN, STD)])


def eval_transform(image_size: int):
    """Resize to 256/224 of the crop, centre crop, normalised."""
    from torchvision import transforms as T

    return T.Compose([T.Resize(resize_size(image_size)), T.CenterCrop(image_size),
                      T.ToTensor(), T.Normalize(MEAN, STD)])


class SeededImages(torch.utils.data.Dataset):
    """Samples addressed by (epoch, index): the image, transformed with draws seeded by both."""

    def __init__(self, samples: list[tuple[str, int]], transform, seed: int):
        self.samples, self.transform, self.seed = samples, transform, seed

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, key: tuple[int, int]):
        epoch, index = key
        path, label = self.samples[index]
        image = read_image(path)
        with torch.random.fork_rng(devices=[]):
            # the CPU generator only (torch.manual_seed would also reseed CUDA's)
            torch.random.default_generator.manual_seed(
                stream_seed(self.seed, AUGMENT_STREAM, epoch, index))
            return self.transform(image), label


class ShardedBatchSampler:
    """This rank's (epoch, index) keys of every global batch of one epoch, from ``start``
    (``rank``/``world``: the process group's by default)."""

    def __init__(self, n: int, batch_size: int, *, epoch: int, seed: int, shuffle: bool,
                 start: int = 0, limit: int | None = None, rank: int | None = None,
                 world: int | None = None):
        if shuffle:
            order = torch.randperm(n, generator=make_generator(seed, ORDER_STREAM, epoch))
        else:
            order = torch.arange(n)
        full = n // batch_size
        count = full if shuffle and full > 0 else -(-n // batch_size)  # drop_last in training
        if limit is not None:
            count = min(count, limit)
        self.order, self.batch_size, self.epoch = order, batch_size, epoch
        self.start, self.count, self.rank, self.world = start, count, rank, world
        self.shuffle = shuffle

    def __len__(self) -> int:
        return max(self.count - self.start, 0)

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        for b in range(self.start, self.count):
            batch = self.order[b * self.batch_size:(b + 1) * self.batch_size]
            mine = batch[shard_slice(len(batch), self.rank, self.world)]
            if len(mine) or self.shuffle:  # an evaluation's short last batch: ranks may skip
                yield [(self.epoch, int(i)) for i in mine]


class FolderBatches:
    """Epochs of one split as DataLoader batches (module docstring)."""

    def __init__(self, samples: list[tuple[str, int]], transform, batch_size: int, *,
                 seed: int, shuffle: bool, workers: int = 0, pin_memory: bool = False,
                 limit: int | None = None):
        if batch_size < world_size():
            raise ConfigError(f"batch-size {batch_size} is below the {world_size()} processes: "
                              "every rank needs at least one image per batch")
        self.dataset = SeededImages(samples, transform, seed)
        self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle
        self.workers, self.pin_memory, self.limit = workers, pin_memory, limit

    def steps(self, epoch: int = 0) -> int:
        return len(self.sampler(epoch))

    def sampler(self, epoch: int, start: int = 0) -> ShardedBatchSampler:
        return ShardedBatchSampler(len(self.dataset), self.batch_size, epoch=epoch,
                                   seed=self.seed, shuffle=self.shuffle, start=start,
                                   limit=self.limit)

    def __call__(self, epoch: int, start: int = 0) -> Iterator:
        """The batches of ``epoch`` from global batch ``start`` on (the Trainer's source)."""
        loader = torch.utils.data.DataLoader(
            self.dataset, batch_sampler=self.sampler(epoch, start), num_workers=self.workers,
            pin_memory=self.pin_memory)
        yield from stream_batches(loader)
