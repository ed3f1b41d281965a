"""Datasets: embedded scikit-learn digits, CIFAR-10/100 python batches from disk, splits;
the user's own image folders in ``imagefolder`` (this package's one sub-module).

Digits (embedded, no download): 1,797 grey 8x8 images of 10 classes, values 0..16.
genlab scales them to [0, 1], optionally resizes them bilinearly to ``size`` x ``size``
(default 8: the native resolution) and standardises with the training mean/std.
Split (stratified, seeded): 20% test (360 images), the rest 50/50 into the
"train" and "val" halves that bilevel search uses (718 / 719 images); plain
training uses train+val.

CIFAR-10/100 are read from the python-pickle batches in a folder the user gives,
with a restricted unpickler that admits only dicts, lists, bytes, strings, numbers
and numpy arrays: never arbitrary objects.

The readers of other file formats in the same pickle layout use ``batch_arrays``,
``find_folder`` and ``split_arrays``; registries of named data sets live with the commands
that accept them.
"""

from __future__ import annotations

import io
import math
import pickle
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError, DataError, require_choice, require_positive
from genlab.core.seeding import make_generator


@dataclass
class Split:
    """Tensors of one split: images (N, C, H, W) float32, labels (N,) int64."""

    images: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def to(self, device) -> Split:
        return Split(self.images.to(device), self.labels.to(device))

    def take(self, rows) -> Split:
        """The rows ``rows`` (indices) of this split; images read from files stay unread."""
        rows = torch.as_tensor(rows, dtype=torch.long)
        images: Any = self.images  # a tensor, or image files (streamed)
        return Split(images.subset(rows) if streamed(images) else images[rows], self.labels[rows])


def streamed(images) -> bool:
    """Whether ``images`` are image files read batch by batch (core.data.imagefolder's
    FolderImages: indexing decodes the rows asked for) rather than a tensor in memory."""
    return not isinstance(images, torch.Tensor) and hasattr(images, "batches")


def read_rows(images, batches):
    """The images of each batch of row indices, in order: a tensor is indexed; image files
    are decoded by DataLoader workers ahead of use (FolderImages.batches)."""
    if streamed(images):
        return images.batches(batches)
    return (images[rows] for rows in batches)


def announce(data) -> None:
    """The data's description (ImageData or TaskData), one line on stderr (rank 0), once the
    run's folder is open: every refusal comes before it, as one line alone."""
    from genlab.core.parallel.distributed import is_main_process

    text = getattr(data, "description", None)
    if text and is_main_process():
        print(f"genlab: {text}", file=sys.stderr)


def warn_batch(batch_size: int, images: int, split: str) -> None:
    """A warning line (stderr, rank 0) when a batch is larger than the split it is drawn from:
    each batch is then the whole split, ``images`` images."""
    from genlab.core.parallel.distributed import is_main_process

    if batch_size > images and is_main_process():
        print(f"genlab: warning: --batch-size {batch_size} is larger than the {images} {split} "
              f"images: each batch is all {images}", file=sys.stderr)


RESIZE = "bilinear"  # how an image file is brought to a run's side (torchvision's Resize)


def floats(values) -> list[float]:
    """A tensor or sequence of numbers as a list of Python floats."""
    if isinstance(values, torch.Tensor):
        return values.flatten().tolist()
    return [float(v) for v in values]


def inference_record(classes, mode: str, size: int, mean, std) -> dict:
    """What predicting on a new image file needs, as plain values (a checkpoint keeps it):
    the class names (label order), the PIL mode images are read in (``L`` grey, ``RGB``),
    the side of the square input, the resize, and the channels' mean and std."""
    return {"classes": [str(c) for c in classes], "mode": mode, "size": int(size),
            "channels": 3 if mode == "RGB" else 1, "resize": RESIZE,
            "mean": floats(mean), "std": floats(std)}


@dataclass
class ImageData:
    """A classification data set split for bilevel search: train, val (search halves), test;
    ``inference``: what predicting on new image files needs (class names, side, mode, the
    standardisation; imagefolder.inference_record), None where the data are not images read
    from files; ``description``: one line a run prints once its folder is open (announce)."""

    name: str
    train: Split
    val: Split
    test: Split
    num_classes: int
    in_channels: int
    size: int
    inference: dict | None = None
    description: str | None = None  # what a run says of its data (a folder: split, resize)

    def train_full(self) -> Split:
        """train + val: what plain (non-bilevel) training uses."""
        images: Any = self.train.images  # a tensor, or image files (streamed)
        if streamed(images):  # image files read batch by batch stay unread
            joined = images.concat([images, self.val.images])
        else:
            joined = torch.cat([images, self.val.images])
        return Split(joined, torch.cat([self.train.labels, self.val.labels]))


TEST_FRACTION = 0.2  # the held-out test share of a data set that has no test split of its own


def search_fractions(test_fraction: float = TEST_FRACTION) -> tuple[float, float, float]:
    """train / val / test shares: ``test_fraction`` held out, the rest halved into the two
    halves a bilevel search uses."""
    rest = (1 - test_fraction) / 2
    return (rest, rest, test_fraction)


def stratified_split(labels: np.ndarray, fractions: tuple[float, ...], seed: int):
    """Indices of a seeded stratified split into len(fractions) parts (fractions sum to 1)."""
    if abs(sum(fractions) - 1) > 1e-9:
        raise ConfigError(f"split fractions must sum to 1, got {fractions}")
    rng = np.random.default_rng(seed)
    parts: list[list[int]] = [[] for _ in fractions]
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        rng.shuffle(idx)
        bounds = split_bounds(len(idx), fractions)
        for p in range(len(fractions)):
            parts[p].extend(idx[bounds[p] : bounds[p + 1]].tolist())
    return [np.array(sorted(p), dtype=np.int64) for p in parts]


def split_bounds(n: int, fractions: tuple[float, ...]) -> np.ndarray:
    """Where the parts of ``n`` items of one class begin and end in :func:`stratified_split`
    (len(fractions) + 1 bounds, rounded)."""
    return np.round(np.cumsum((0,) + tuple(fractions)) * n).astype(int)


def standardise(splits: list[torch.Tensor]) -> list[torch.Tensor]:
    ref = splits[0]
    mean = ref.mean(dim=(0, 2, 3), keepdim=True)
    std = ref.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)
    return [(s - mean) / std for s in splits]


def digit_splits(size: int, seed: int, test_fraction: float = TEST_FRACTION
                 ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Digits in [0, 1] at ``size`` and labels, split train / val / test (not standardised)."""
    from sklearn.datasets import load_digits

    require_positive("size", size)
    if not 0 < test_fraction < 1:
        raise ConfigError(f"test_fraction must be in (0, 1), got {test_fraction}")
    bunch = load_digits()
    x = torch.from_numpy(bunch.images.astype(np.float32) / 16.0).unsqueeze(1)
    if size != 8:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    y = bunch.target.astype(np.int64)
    parts = stratified_split(y, search_fractions(test_fraction), seed)
    yt = torch.from_numpy(y)
    return [x[p] for p in parts], [yt[p] for p in parts]


def load_digits_data(size: int = 8, seed: int = 0, test_fraction: float = TEST_FRACTION
                     ) -> ImageData:
    """scikit-learn digits, resized to ``size`` and split train/val/test (see module doc)."""
    xs, ys = digit_splits(size, seed, test_fraction)
    mean = xs[0].mean(dim=(0, 2, 3))
    std = xs[0].std(dim=(0, 2, 3)).clamp_min(1e-6)
    xs = standardise(xs)
    # an image file of a digit: light ink on a dark ground, its pixels / 255 as the digits'
    # values / 16
    inference = inference_record([str(d) for d in range(10)], "L", size, mean, std)
    return ImageData(
        "digits", Split(xs[0], ys[0]), Split(xs[1], ys[1]), Split(xs[2], ys[2]), 10, 1, size,
        inference)


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler admitting only numpy array reconstruction besides builtin containers."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"forbidden object {module}.{name}")


def majority_accuracy(fit_labels: torch.Tensor, score_labels: torch.Tensor) -> float:
    """The constant predictor's accuracy (%): the majority class of ``fit_labels`` (the
    smallest label on a tie) answered for every item of ``score_labels``."""
    majority = torch.bincount(fit_labels).argmax()
    return 100 * float((score_labels == majority).float().mean())


def safe_unpickle(path: Path) -> dict:
    """Read a pickled dict of arrays/lists/bytes/numbers; anything else is a DataError."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        with warnings.catch_warnings():  # a damaged batch that numpy only warns about is damaged
            warnings.simplefilter("error")
            data = _RestrictedUnpickler(io.BytesIO(path.read_bytes()), encoding="latin1").load()
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"{path}: not a readable CIFAR-style pickle batch ({exc})") from exc
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a dict batch, got {type(data).__name__}")
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in data.items()}


def batch_arrays(path: Path, label_key: str, side: int) -> tuple[np.ndarray, np.ndarray]:
    batch = safe_unpickle(path)
    for key in ("data", label_key):
        if key not in batch:
            raise DataError(f"{path}: missing key {key!r} (found {sorted(batch)})")
    data = np.asarray(batch["data"], dtype=np.uint8)
    labels = np.asarray(batch[label_key], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3 * side * side or len(data) != len(labels):
        raise DataError(
            f"{path}: expected data of shape (N, {3 * side * side}) and N labels, "
            f"got {data.shape} and {labels.shape}"
        )
    return data.reshape(-1, 3, side, side), labels


CIFAR_FILES = {
    "cifar10": (["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"],
                ["test_batch"], "labels", 10),
    "cifar100": (["train"], ["test"], "fine_labels", 100),
}


def find_folder(root: Path, files: list[str]) -> Path:
    """The folder under ``root`` (itself or one level down) holding ``files``."""
    for cand in [root, *sorted(p for p in root.iterdir() if p.is_dir())] if root.is_dir() else []:
        if all((cand / f).is_file() for f in files):
            return cand
    raise DataError(f"{root}: no folder with {', '.join(files)} found (CIFAR python batches)")


def load_cifar(name: str, root: str | Path, seed: int = 0, val_fraction: float = 0.5) -> ImageData:
    """CIFAR-10/100 python batches from ``root``; the training set is split train/val."""
    require_choice("dataset", name, tuple(CIFAR_FILES))
    train_files, test_files, label_key, classes = CIFAR_FILES[name]
    folder = find_folder(Path(root), train_files + test_files)
    xtr, ytr = zip(*(batch_arrays(folder / f, label_key, 32) for f in train_files), strict=True)
    xte, yte = zip(*(batch_arrays(folder / f, label_key, 32) for f in test_files), strict=True)
    return split_arrays(name, np.concatenate(xtr), np.concatenate(ytr), np.concatenate(xte),
                   np.concatenate(yte), classes, seed, val_fraction)


def split_arrays(name, xtr, ytr, xte, yte, classes, seed, val_fraction) -> ImageData:
    if not 0 < val_fraction < 1:
        raise ConfigError(f"val_fraction must be in (0, 1), got {val_fraction}")
    tr, va = stratified_split(ytr, (1 - val_fraction, val_fraction), seed)
    to_t = lambda a: torch.from_numpy(a.astype(np.float32) / 255.0)  # noqa: E731
    xs = standardise([to_t(xtr[tr]), to_t(xtr[va]), to_t(xte)])
    side = xtr.shape[-1]
    return ImageData(
        name,
        Split(xs[0], torch.from_numpy(ytr[tr])),
        Split(xs[1], torch.from_numpy(ytr[va])),
        Split(xs[2], torch.from_numpy(yte)),
        classes, 3, side,
    )


class Batches:
    """Seeded mini-batches over a Split; epoch ``e`` is shuffled by its own stream (a split of
    image files is decoded batch by batch by DataLoader workers: :func:`read_rows`).

    Iterating is deterministic given (seed, epoch): a resumed run sees the same batches.
    """

    def __init__(self, split: Split, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False):
        require_positive("batch_size", batch_size)
        if len(split) == 0:
            raise DataError("cannot make batches from an empty split")
        self.split, self.batch_size, self.shuffle = split, batch_size, shuffle
        self.seed, self.drop_last = seed, drop_last

    def __len__(self) -> int:
        n = len(self.split)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def epoch_indices(self, epoch: int):
        """The rows of each batch of ``epoch``, in order."""
        n = len(self.split)
        if self.shuffle:
            order = torch.randperm(n, generator=make_generator(self.seed, epoch))
        else:
            order = torch.arange(n)
        for b in range(len(self)):
            yield order[b * self.batch_size : (b + 1) * self.batch_size]

    def epoch(self, epoch: int):
        rows = list(self.epoch_indices(epoch))
        for idx, x in zip(rows, read_rows(self.split.images, rows), strict=True):
            yield x, self.split.labels[idx]

    def __iter__(self):
        return self.epoch(0)


def augment_images(x: torch.Tensor, generator: torch.Generator, *, shift: float = 1.5,
                   rotate_deg: float = 15.0, noise: float = 0.2,
                   erase: float = 0.5) -> torch.Tensor:
    """Batched random shift (pixels), rotation, Gaussian noise and random erasing.

    One affine grid_sample for the whole batch; erasing blanks a random square of a
    quarter of the side in a fraction ``erase`` of the images. Draws come only from
    ``generator`` so a run is reproducible.
    """
    n, _, h, w = x.shape
    dev = x.device
    u = lambda *s: torch.rand(*s, generator=generator).to(dev)  # noqa: E731
    if shift > 0 or rotate_deg > 0:
        ang = (u(n) * 2 - 1) * math.radians(rotate_deg)
        tx = (u(n) * 2 - 1) * shift * 2 / w
        ty = (u(n) * 2 - 1) * shift * 2 / h
        cos, sin = torch.cos(ang), torch.sin(ang)
        theta = torch.stack([torch.stack([cos, -sin, tx], 1), torch.stack([sin, cos, ty], 1)], 1)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        x = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    if noise > 0:
        x = x + noise * torch.randn(x.shape, generator=generator).to(dev)
    if erase > 0:
        side = max(1, h // 4)
        hit = (u(n) < erase).view(n, 1, 1, 1)
        top = (u(n) * (h - side + 1)).long().view(n, 1, 1)
        left = (u(n) * (w - side + 1)).long().view(n, 1, 1)
        rows = torch.arange(h, device=dev).view(1, h, 1)
        cols = torch.arange(w, device=dev).view(1, 1, w)
        box = ((rows >= top) & (rows < top + side) & (cols >= left) & (cols < left + side))
        x = torch.where(hit & box.unsqueeze(1), torch.zeros((), device=dev), x)
    return x
