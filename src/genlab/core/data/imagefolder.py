"""A user's own labelled images (``--dataset folder:PATH``): the ImageFolder layout, checked
before anything is written, split by the run's seed, decoded batch by batch by DataLoader
workers; and the pieces every streamed image folder shares (:func:`read_image`,
:func:`stream_batches`).

Layout: ``PATH/CLASS/*.png`` (torchvision's ImageFolder layout, its file suffixes and its
``make_dataset``, which also reads images in folders below a class folder): one sub-folder
per class, the sorted names giving the labels 0..k-1; names that begin with a dot (hidden
folders and files) are skipped. Images are grey or colour, of any size, resized to the run's
``--size`` (bilinear, torchvision's Resize); without ``--size`` a run takes the median of the
images' shorter sides rounded down to a multiple of 8, at least 8 and at most
:data:`DEFAULT_SIZE_CAP` (32) pixels (``FolderScan.default_size``). A run says what it sees of the
folder (ImageData.description: classes, the split's sizes, the resize) once its folder is
open. Grey: PIL modes 1,
L, LA, I;16 (16-bit, scaled by its full range) and palette images whose palette is grey;
colour: RGB, RGBA, CMYK, YCbCr and colour palettes (read as RGB, alpha dropped). 32-bit
integer and float images (modes I and F: no fixed range) are refused.

:func:`scan_folder` stops with one line (ConfigError), before a run folder exists: a missing
folder, no class sub-folders, a single class, a class with fewer images than the split needs
(:data:`MIN_PER_CLASS`: one in each of train, val and test), a file that is not an image (its
header does not open) or of a refused mode, and grey and colour images in one folder (one
file of each is named). Up front only each file's header is read (PIL opens a file without
decoding its pixels: the mode); an image whose pixels do not decode stops the run when its
batch is read, with one line naming the file (DataError). A scan is remembered in the process
while no image file of the folder is added, removed or rewritten (names, sizes and times).

:func:`folder_data` splits the images train / val / test by the seed, stratified, in the
digits' shares (genlab.core.data.search_fractions: 20% test, the rest halved) and returns an
ImageData whose images are :class:`FolderImages`: nothing is decoded until rows are asked for;
``images[rows]`` decodes those rows, ``images.batches(row_lists)`` streams batches decoded by
DataLoader workers ahead of use (genlab.core.data.read_rows: what Batches and the search's
step-indexed batches read). The channels are standardised with the mean and std of at most
:data:`STATS_IMAGES` training images spread evenly over the split.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from genlab.core.data import (
    ImageData,
    Split,
    floats,
    inference_record,
    search_fractions,
    split_bounds,
    stratified_split,
)
from genlab.core.errors import ConfigError, DataError

PREFIX = "folder:"
NAME = f"{PREFIX}PATH"  # how help texts and registries spell every folder
STATS_IMAGES = 512  # training images whose pixels give the standardisation
DEFAULT_SIZE_CAP = 32  # the largest side a run takes by default (FolderScan.default_size)
SIZE_STEP = 8  # a default side is a multiple of this
MAX_WORKERS = 4  # DataLoader workers at most (default_workers)
CHUNK = 64  # rows per worker task when many rows are indexed at once
GREY_MODES = ("1", "L", "LA", "La")
REFUSED_MODES = ("I", "F")  # 32-bit integer and float: no fixed range to scale by


def folder_path(name: str) -> Path | None:
    """``folder:PATH`` -> PATH (``~`` expanded); any other data set name -> None."""
    return Path(name[len(PREFIX):]).expanduser() if name.startswith(PREFIX) else None


def folder_size(name: str) -> int | None:
    """The default side of the data set ``name``: a folder's (FolderScan.default_size); None
    for any other data set (its command's own default holds)."""
    path = folder_path(name)
    return None if path is None else scan_folder(path).default_size


def _smallest_class(fractions: tuple[float, ...]) -> int:
    """The fewest images of one class that give every part of the split at least one."""
    n = 1
    while np.diff(split_bounds(n, fractions)).min() < 1:
        n += 1
    return n


SPLIT = search_fractions()  # train / val / test
MIN_PER_CLASS = _smallest_class(SPLIT)


@dataclass(frozen=True)
class FolderScan:
    """The checked layout: class names (sorted), every image file, its label, the mode the
    images are read in (``L`` grey, ``RGB`` colour)."""

    root: Path
    classes: tuple[str, ...]
    files: tuple[str, ...]
    labels: np.ndarray
    mode: str
    sides: tuple[int, ...] = ()  # each image's shorter side (pixels), from its header

    @property
    def default_size(self) -> int:
        """The side a run resizes these images to when --size is not given: the median of
        their shorter sides rounded down to a multiple of :data:`SIZE_STEP` (the sides every
        space's reductions take), at least SIZE_STEP, at most :data:`DEFAULT_SIZE_CAP`."""
        side = int(np.median(self.sides)) // SIZE_STEP * SIZE_STEP
        return min(DEFAULT_SIZE_CAP, max(SIZE_STEP, side))

    @property
    def channels(self) -> int:
        return 3 if self.mode == "RGB" else 1


def _visible(root: Path, path: str) -> bool:
    """An image suffix torchvision's ImageFolder reads, no part of the name hidden."""
    from torchvision.datasets.folder import IMG_EXTENSIONS, has_file_allowed_extension

    parts = Path(path).relative_to(root).parts
    return has_file_allowed_extension(path, IMG_EXTENSIONS) and \
        not any(p.startswith(".") for p in parts)


def _read_mode(path: str, where: str, sides: list[int] | None = None) -> str:
    """The mode the image at ``path`` is read in, from its header alone (module doc); its
    shorter side is appended to ``sides``."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            mode = im.mode
            if sides is not None:
                sides.append(min(im.size))
            palette = im.palette.palette if mode in ("P", "PA") and im.palette else None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ConfigError(f"{where}: {path} is not a readable image ({exc})") from None
    if mode in REFUSED_MODES:
        kind = "float" if mode == "F" else "integer"
        raise ConfigError(f"{where}: {path} is a 32-bit {kind} image (PIL mode {mode}); save "
                          "it as 8- or 16-bit")
    if mode in GREY_MODES or mode.startswith("I;16"):
        return "L"
    if palette is not None:
        rgb = np.frombuffer(bytes(palette), np.uint8)
        rgb = rgb[: len(rgb) // 3 * 3].reshape(-1, 3)
        return "L" if (rgb == rgb[:, :1]).all() else "RGB"
    return "RGB"


def _fingerprint(files: list[str]) -> str:
    """Names, sizes and modification times of ``files``: a scan holds while they hold."""
    digest = hashlib.sha1()
    for path in files:
        st = os.stat(path)
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


_SCANS: dict[Path, tuple[str, FolderScan]] = {}  # root -> (fingerprint, scan), a few at most


def scan_folder(root: str | Path) -> FolderScan:
    """The layout of ``root`` after every check that reads no pixel (module doc)."""
    from torchvision.datasets.folder import IMG_EXTENSIONS, make_dataset

    root = Path(root).expanduser()
    where = f"--dataset {PREFIX}{root}"
    if not root.is_dir():
        raise ConfigError(f"{where}: no such folder")
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    if not classes:
        raise ConfigError(f"{where}: no class sub-folders; expected one sub-folder of images "
                          f"per class ({PREFIX}PATH with PATH/CLASS/*.png)")
    if len(classes) < 2:
        raise ConfigError(f"{where}: one class ({classes[0]}); a classifier needs at least two "
                          "class sub-folders")
    samples = make_dataset(str(root), {c: i for i, c in enumerate(classes)},
                           is_valid_file=lambda p: _visible(root, p), allow_empty=True)
    labels = np.fromiter((label for _, label in samples), np.int64, len(samples))
    counts = np.bincount(labels, minlength=len(classes))
    if (counts == 0).any():
        empty = classes[int(np.argmax(counts == 0))]
        raise ConfigError(f"{where}: class folder {empty} holds no image (suffixes "
                          f"{', '.join(IMG_EXTENSIONS)})")
    if (counts < MIN_PER_CLASS).any():
        few = int(np.argmin(counts))
        raise ConfigError(f"{where}: class {classes[few]} has {counts[few]} image"
                          f"{'s' if counts[few] != 1 else ''}; every class needs at least "
                          f"{MIN_PER_CLASS} (one each for train, val and test)")
    files = [path for path, _ in samples]
    key = root.resolve()
    fingerprint = _fingerprint(files)
    if key in _SCANS and _SCANS[key][0] == fingerprint:
        return _SCANS[key][1]
    first: dict[str, str] = {}  # mode -> its first file
    sides: list[int] = []
    for path in files:
        first.setdefault(_read_mode(path, where, sides), path)
        if len(first) > 1:
            raise ConfigError(f"{where}: grey and colour images mixed ({first['L']} is grey, "
                              f"{first['RGB']} colour); convert them to one kind")
    scan = FolderScan(root, tuple(classes), tuple(files), labels, next(iter(first)),
                      tuple(sides))
    if len(_SCANS) >= 4:
        _SCANS.pop(next(iter(_SCANS)))
    _SCANS[key] = (fingerprint, scan)
    return scan


def read_image(path: str, mode: str = "RGB"):
    """The PIL image at ``path`` in ``mode`` (``RGB`` or ``L``; 16-bit grey asked for as ``L``
    comes as a float image in [0, 1], its full range); DataError naming the file when it does
    not decode."""
    from PIL import Image

    try:
        with open(path, "rb") as f:
            image = Image.open(f)
            if image.mode.startswith("I;16") and mode == "L":
                pixels = np.asarray(image, dtype=np.float32) / 65535.0
                return Image.fromarray(pixels)  # mode F
            return image.convert(mode)
    except (OSError, ValueError, SyntaxError) as exc:
        raise DataError(f"{path}: cannot decode the image ({type(exc).__name__}: {exc})"
                        ) from None


def _one_line(exc: DataError) -> str:
    """The DataError line inside a DataLoader worker's re-raised copy (its last such line)."""
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    for line in reversed(lines):
        if "DataError: " in line:
            return line.split("DataError: ", 1)[1]
    return lines[-1] if lines else "a DataLoader worker failed"


def stream_batches(loader: Iterable) -> Iterator:
    """The batches of a DataLoader; the DataError a worker re-raises (several lines, with the
    worker's traceback) is turned back into its one line."""
    iterator = iter(loader)
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            return
        except DataError as exc:
            raise DataError(_one_line(exc)) from None
        yield batch


def default_workers() -> int:
    """DataLoader workers: up to MAX_WORKERS, one CPU left to the training process."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(0, min(MAX_WORKERS, cpus - 1))


def image_transform(size: int, mean=None, std=None, crop_from: int | None = None):
    """PIL image -> (C, size, size) float tensor: resized to a square (bilinear; with
    ``crop_from``, its shorter side to ``crop_from`` then the centre square, as the ImageNet
    evaluation reads), scaled to [0, 1], standardised with ``mean`` and ``std`` (per
    channel) when given."""
    from torchvision import transforms as T

    resize = [T.Resize((size, size), interpolation=T.InterpolationMode.BILINEAR)] \
        if crop_from is None else [T.Resize(crop_from), T.CenterCrop(size)]
    steps = [*resize, T.ToTensor()]
    if mean is not None and std is not None:
        steps.append(T.Normalize(floats(mean), floats(std)))
    return T.Compose(steps)


class _Decoded(torch.utils.data.Dataset):
    """Image ``i``: read, resized to a square of ``size``, standardised (a worker's task)."""

    def __init__(self, files: tuple[str, ...], mode: str, size: int,
                 mean: torch.Tensor | None, std: torch.Tensor | None):
        self.files, self.mode = files, mode
        self.transform = image_transform(size, mean, std)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.transform(read_image(self.files[i], self.mode))


class FolderImages:
    """A lazy (N, C, S, S) float32 array of image files (module doc): ``images[rows]`` decodes
    those rows; :meth:`batches` streams batches of rows decoded by DataLoader workers."""

    def __init__(self, files: tuple[str, ...], mode: str, size: int,
                 mean: torch.Tensor | None = None, std: torch.Tensor | None = None, *,
                 device: torch.device | str = "cpu", workers: int | None = None):
        self.files, self.mode, self.size = tuple(files), mode, size
        self.mean, self.std, self.device = mean, std, torch.device(device)
        self.workers = default_workers() if workers is None else workers
        self.dataset = _Decoded(self.files, mode, size, mean, std)

    @property
    def channels(self) -> int:
        return 3 if self.mode == "RGB" else 1

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (len(self.files), self.channels, self.size, self.size)

    def __len__(self) -> int:
        return len(self.files)

    def _rows(self, index) -> list[int]:
        """Row numbers of a slice, a sequence or tensor of rows, or a boolean mask."""
        if isinstance(index, slice):
            return list(range(len(self.files)))[index]
        rows = np.asarray(index.cpu() if isinstance(index, torch.Tensor) else index).reshape(-1)
        if rows.dtype == bool:
            if len(rows) != len(self.files):
                raise IndexError(f"a mask of {len(rows)} rows for {len(self.files)} images")
            rows = np.flatnonzero(rows)
        return [int(i) for i in rows]

    def batches(self, row_lists: Iterable) -> Iterator[torch.Tensor]:
        """The images of each list of rows, in order, on this array's device: decoded by
        ``workers`` DataLoader workers ahead of use (``row_lists`` may be endless: it is
        read as the workers need more)."""
        # a generator of its own: the workers' base seed is not drawn from torch's global one,
        # so a stream started anew (a resumed search) leaves the run's random draws as they were
        loader = torch.utils.data.DataLoader(
            self.dataset, batch_sampler=_RowLists(row_lists), num_workers=self.workers,
            generator=torch.Generator())
        for x in stream_batches(loader):
            yield x.to(self.device)

    def __getitem__(self, index) -> torch.Tensor:
        if isinstance(index, int | np.integer) or (isinstance(index, torch.Tensor)
                                                   and index.dim() == 0):
            return self.dataset[int(index)].to(self.device)
        rows = self._rows(index)
        if not rows:
            return torch.empty(0, *self.shape[1:], device=self.device)
        chunks = [rows[i:i + CHUNK] for i in range(0, len(rows), CHUNK)]
        if len(chunks) == 1:  # one worker's task: read here, no worker started
            return torch.stack([self.dataset[i] for i in rows]).to(self.device)
        return torch.cat(list(self.batches(chunks)))

    def _like(self, files, mean=None, std=None, device=None) -> FolderImages:
        return FolderImages(tuple(files), self.mode, self.size,
                            self.mean if mean is None else mean,
                            self.std if std is None else std,
                            device=self.device if device is None else device,
                            workers=self.workers)

    def to(self, device) -> FolderImages:
        return self._like(self.files, device=device)

    def subset(self, rows) -> FolderImages:
        return self._like(self.files[i] for i in self._rows(rows))

    def standardised(self, mean: torch.Tensor, std: torch.Tensor) -> FolderImages:
        return self._like(self.files, mean, std)

    @staticmethod
    def concat(parts: list[FolderImages]) -> FolderImages:
        return parts[0]._like(f for p in parts for f in p.files)


class _RowLists:
    """A DataLoader batch sampler over given lists of rows (iterated once, lazily)."""

    def __init__(self, row_lists: Iterable):
        self.row_lists = row_lists

    def __iter__(self) -> Iterator[list[int]]:
        for rows in self.row_lists:
            yield rows.tolist() if isinstance(rows, torch.Tensor) else [int(r) for r in rows]


def folder_data(root: str | Path, size: int, seed: int, *,
                workers: int | None = None) -> ImageData:
    """ImageData of a folder: the stratified train / val / test split of ``seed`` (module
    doc); ``workers`` DataLoader workers decode its batches (default: default_workers())."""
    scan = scan_folder(root)
    parts = stratified_split(scan.labels, SPLIT, seed)
    images = FolderImages(scan.files, scan.mode, size, workers=workers)
    train = images.subset(parts[0])
    spread = np.unique(np.linspace(0, len(train) - 1, min(STATS_IMAGES, len(train)))
                       .round().astype(np.int64))
    sample = train[spread]
    mean = sample.mean(dim=(0, 2, 3))
    std = sample.std(dim=(0, 2, 3)).clamp_min(1e-6)
    labels = torch.from_numpy(scan.labels)
    smallest, largest = min(scan.sides), max(scan.sides)
    span = f"{smallest}" if smallest == largest else f"{smallest} to {largest}"
    described = (f"{PREFIX}{scan.root}: {len(scan.classes)} classes; "
                 f"{'/'.join(str(len(p)) for p in parts)} train/val/test images; resized to "
                 f"{size}x{size} (shorter sides {span} px)")
    train_split, val_split, test_split = (
        Split(images.subset(rows).standardised(mean, std), labels[rows])  # type: ignore[arg-type]
        for rows in parts)
    return ImageData(f"{PREFIX}{scan.root}", train_split, val_split, test_split,
                     len(scan.classes), scan.channels, size,
                     inference_record(scan.classes, scan.mode, size, mean, std), described)
