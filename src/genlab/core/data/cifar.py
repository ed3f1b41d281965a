"""CIFAR-10/100 python-pickle batches read with a restricted unpickler (only dicts, lists,
bytes, strings, numbers and numpy arrays), and the helpers other readers of that layout use
(``batch_arrays``, ``find_folder``, ``split_arrays``)."""

from __future__ import annotations

import io
import pickle
import warnings
from pathlib import Path

import numpy as np
import torch

from genlab.core.data.images import ImageData, inference_record
from genlab.core.data.splits import Split, standardise, stratified_split
from genlab.core.errors import ConfigError, DataError, require_choice


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
# the file and key of the class names in the same folder (read when present)
CIFAR_META = {"cifar10": ("batches.meta", "label_names"), "cifar100": ("meta", "fine_label_names")}


def class_names(folder: Path, name: str, classes: int) -> list[str]:
    """The class names of a CIFAR folder (its meta file, when present and complete), else
    the labels' numbers."""
    file, key = CIFAR_META[name]
    if (folder / file).is_file():
        names = safe_unpickle(folder / file).get(key)
        if isinstance(names, list) and len(names) == classes:
            return [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    return [str(i) for i in range(classes)]


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
                        np.concatenate(yte), classes, seed, val_fraction,
                        class_names(folder, name, classes))


def split_arrays(name, xtr, ytr, xte, yte, classes, seed, val_fraction,
                 names: list[str] | None = None) -> ImageData:
    """uint8 (N, 3, s, s) arrays as an ImageData: the training arrays split train / val by the
    seed (stratified), every split standardised with the train split's channel statistics;
    its inference facts name the classes (``names``, else the labels' numbers) and read RGB
    files as the arrays were read (pixels / 255)."""
    if not 0 < val_fraction < 1:
        raise ConfigError(f"val_fraction must be in (0, 1), got {val_fraction}")
    tr, va = stratified_split(ytr, (1 - val_fraction, val_fraction), seed)
    to_t = lambda a: torch.from_numpy(a.astype(np.float32) / 255.0)  # noqa: E731
    raw = [to_t(xtr[tr]), to_t(xtr[va]), to_t(xte)]
    mean, std = raw[0].mean(dim=(0, 2, 3)), raw[0].std(dim=(0, 2, 3)).clamp_min(1e-6)
    xs = standardise(raw)
    side = xtr.shape[-1]
    return ImageData(
        name,
        Split(xs[0], torch.from_numpy(ytr[tr])),
        Split(xs[1], torch.from_numpy(ytr[va])),
        Split(xs[2], torch.from_numpy(yte)),
        classes, 3, side,
        inference_record(names or [str(i) for i in range(classes)], "RGB", side, mean, std),
    )


