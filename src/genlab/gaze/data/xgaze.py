"""ETH-XGaze h5 files: writer (for synthetic data) and a lazy, validating reader.

Layout of the normalised ETH-XGaze release (Zhang et al. 2020, one file per subject,
``subject0000.h5`` ...): ``face_patch`` (N, 224, 224, 3) uint8 **BGR**, ``face_gaze``
(N, 2) float (pitch, yaw) radians, ``face_head_pose`` (N, 2), plus ``frame_index``,
``cam_index`` and ``face_mat_norm``. The reader needs only ``face_patch`` and
``face_gaze``. The release's test split has no ``face_gaze`` (its labels are held by the
benchmark server): such files are read only with ``labels="optional"`` and then carry
NaN gaze, so they can be predicted but never evaluated or trained on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import h5py
import numpy as np
import torch
from torch.utils.data import Dataset

from genlab.core.errors import DataError, require_choice
from genlab.gaze.data.images import resize_rgb, rgb_to_tensor
from genlab.gaze.data.realdata import register_reader
from genlab.gaze.data.splits import fraction_indices

LABEL_MODES = ("required", "optional")


def write_xgaze_h5(folder: str | Path, batch) -> list[Path]:
    """Write a rendered batch as ETH-XGaze h5 files, one per subject; return their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for sid in np.unique(batch.subject):
        rows = np.flatnonzero(batch.subject == sid)
        path = folder / f"subject{int(sid):04d}.h5"
        tmp = path.with_name(f".{path.name}.tmp")
        with h5py.File(tmp, "w") as f:
            f.create_dataset("face_patch", data=batch.images[rows][..., ::-1],
                             chunks=(1, *batch.images.shape[1:]))
            f.create_dataset("face_gaze", data=batch.gaze[rows].astype(np.float32))
            f.create_dataset("face_head_pose", data=batch.head_pose[rows].astype(np.float32))
            f.create_dataset("frame_index", data=rows.reshape(-1, 1).astype(np.int64))
            f.create_dataset("cam_index", data=np.zeros((len(rows), 1), np.int64))
            f.create_dataset("face_mat_norm", data=np.tile(np.eye(3, dtype=np.float32),
                                                           (len(rows), 1, 1)))
            f.create_dataset("appearance", data=batch.appearance[rows].astype(np.float32))
            f.attrs["domain"] = str(getattr(batch, "domain", ""))
            f.attrs["subject_id"] = int(sid)
        os.replace(tmp, path)
        paths.append(path)
    return paths


def _resolve(paths) -> list[Path]:
    """h5 files named by a path or a list of paths; folders expand to their sorted *.h5."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.h5"))
            if not found:
                raise DataError(f"{p}: folder holds no .h5 files (expected subject0000.h5 ...)")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise DataError(f"{p}: no such ETH-XGaze h5 file or folder")
    if not files:
        raise DataError("ETHXGaze: no h5 files given")
    return files


def _validate(path: Path, labels: str) -> tuple[np.ndarray, int | None]:
    """Check one file's keys and shapes; return (gaze labels (N, 2), subject id or None).

    A file without ``face_gaze`` (the test split) is refused unless ``labels`` is
    "optional"; its gaze is then NaN.
    """
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({exc})") from exc
    with f:
        if "face_patch" not in f:
            raise DataError(f"{path}: missing dataset 'face_patch' (ETH-XGaze files hold "
                            f"face_patch (N,H,W,3) uint8 BGR and face_gaze (N,2))")
        patch = f["face_patch"]
        if patch.ndim != 4 or patch.shape[-1] != 3:
            raise DataError(f"{path}: face_patch must be (N, H, W, 3) BGR, got {patch.shape}")
        n = patch.shape[0]
        if "face_gaze" not in f:
            if labels == "required":
                raise DataError(f"{path}: missing dataset 'face_gaze': an unlabelled file (the "
                                "ETH-XGaze test split has no labels); train and evaluate on "
                                "the train split, whose subjects genlab holds out for "
                                "validation, and use unlabelled files for prediction only")
            gaze = np.full((n, 2), np.nan, np.float32)
        else:
            g = f["face_gaze"]
            if g.ndim != 2 or g.shape[1] != 2:
                raise DataError(f"{path}: face_gaze must be (N, 2) (pitch, yaw), got {g.shape}")
            if g.shape[0] != n:
                raise DataError(f"{path}: face_patch has {n} samples but face_gaze "
                                f"has {g.shape[0]}")
            gaze = np.asarray(g[:], dtype=np.float32)
        if "face_head_pose" in f and f["face_head_pose"].shape != (n, 2):
            raise DataError(f"{path}: face_head_pose must be ({n}, 2), got "
                            f"{f['face_head_pose'].shape}")
        sid = f.attrs.get("subject_id")
        return gaze, (int(sid) if sid is not None else None)


class ETHXGaze(Dataset):
    """ETH-XGaze-style h5 files (a folder or a list), read lazily.

    Only the labels (``.gaze`` (N, 2), ``.subject``) are read up front; images are read
    per item. h5 handles are opened on first access in each process (keyed by pid) and
    dropped when the data set is pickled for DataLoader workers. ``size`` = (H, W)
    resizes. ``labels="optional"`` admits unlabelled files (NaN gaze).
    """

    def __init__(self, paths, size: tuple[int, int] | None = None, fraction: float = 1.0,
                 seed: int = 0, labels: str = "required"):
        require_choice("labels", labels, LABEL_MODES)
        self.files = _resolve(paths)
        self.size = tuple(size) if size is not None else None
        file_idx, row_idx, subject, gaze = [], [], [], []
        for k, path in enumerate(self.files):
            g, sid = _validate(path, labels)
            if sid is None:
                m = re.search(r"(\d+)", path.stem)
                sid = int(m.group(1)) if m else k
            file_idx.append(np.full(len(g), k))
            row_idx.append(np.arange(len(g)))
            subject.append(np.full(len(g), sid))
            gaze.append(g)
        keep = fraction_indices(sum(len(a) for a in file_idx), fraction, seed)
        self._file = np.concatenate(file_idx)[keep]
        self._row = np.concatenate(row_idx)[keep]
        self.subject = np.concatenate(subject)[keep].astype(np.int64)
        self.gaze = torch.from_numpy(np.concatenate(gaze)[keep])
        self._handles: dict[int, dict[int, h5py.File]] = {}

    def __len__(self) -> int:
        return len(self._row)

    def _handle(self, k: int) -> h5py.File:
        per_pid = self._handles.setdefault(os.getpid(), {})
        if k not in per_pid:
            try:
                per_pid[k] = h5py.File(self.files[k], "r")
            except OSError as exc:
                raise DataError(f"{self.files[k]}: not a readable HDF5 file ({exc})") from exc
        return per_pid[k]

    def __getitem__(self, i):
        k, row = int(self._file[i]), int(self._row[i])
        f = self._handle(k)
        try:
            patch = np.asarray(f["face_patch"][row])
        except (OSError, KeyError) as exc:
            raise DataError(f"{self.files[k]}: cannot read sample {row} ({exc})") from exc
        image = rgb_to_tensor(resize_rgb(np.ascontiguousarray(patch[..., ::-1]), self.size))
        return image, self.gaze[i]

    @staticmethod
    def worker_init_fn(worker_id: int) -> None:
        """DataLoader ``worker_init_fn``: forget h5 handles inherited from the parent (fork)."""
        info = torch.utils.data.get_worker_info()
        dataset = getattr(info, "dataset", None)
        while hasattr(dataset, "dataset") and not isinstance(dataset, ETHXGaze):
            dataset = dataset.dataset  # unwrap Subset
        if isinstance(dataset, ETHXGaze):
            pid = os.getpid()
            dataset._handles = {k: v for k, v in dataset._handles.items() if k == pid}

    def close(self) -> None:
        """Close this process's open h5 handles."""
        for f in self._handles.pop(os.getpid(), {}).values():
            f.close()

    def __enter__(self) -> ETHXGaze:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_handles"] = {}  # h5py handles must not cross process boundaries
        return state

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def xgaze_files(paths: Sequence[str | Path] | str | Path) -> list[Path]:
    """The h5 files a path (folder) or list of paths names, checked to exist."""
    return _resolve(paths)


def _open_xgaze(root: Path, size, labels: str):
    folder = root / "train" if (root / "train").is_dir() else root
    return ETHXGaze(folder, size=size, labels=labels)


register_reader("xgaze", "ETH-XGaze h5 files (train split)", _open_xgaze)
