"""GazeHub label files (MPIIFaceGaze, EyeDiap, Gaze360 as preprocessed by GazeHub).

Format (Cheng et al. 2021, GazeHub): a header line naming the columns, then one line
per sample; fields are separated by single spaces and vectors by commas. Examples of
headers (the reader is driven by column names, so column order may vary)::

    MPIIFaceGaze: Face Left Right Origin WhichEye 3DGaze 3DHead 2DGaze 2DHead Rmat Smat GazeOrigin
    EyeDiap:      Face Left Right Grid Origin 3DGaze 3DHead 2DGaze 2DHead Rmat Smat GazeOrigin
    Gaze360:      Face Left Right Origin WhichEye 3DGaze 2DGaze

``Face`` is the face image path relative to the image root. **``2DGaze`` is
(yaw, pitch)** in radians, the reverse of ETH-XGaze's (pitch, yaw); this reader
swaps it explicitly, so every genlab data set yields (pitch, yaw). ``3DGaze`` (x, y, z),
when present, is kept as ``.gaze_vector``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from genlab.core.errors import DataError

REQUIRED_COLUMNS = ("Face", "2DGaze")


@dataclass
class GazeHubLabels:
    """Parsed label files: image paths, (pitch, yaw) gaze, optional 3D gaze, file index."""

    faces: list[str]
    gaze: np.ndarray  # (N, 2) float32 (pitch, yaw)
    gaze_vector: np.ndarray | None  # (N, 3) float32 or None when no file has 3DGaze
    file_index: np.ndarray  # (N,) which label file each sample came from


def _floats(text: str, n: int, path: Path, line_no: int, column: str) -> list[float]:
    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != n or not np.all(np.isfinite(values)):
        raise DataError(f"{path}:{line_no}: column {column} must hold {n} comma-separated "
                        f"numbers, got {text!r}")
    return values


def _read_one(path: Path):
    if not path.is_file():
        raise DataError(f"{path}: no such GazeHub label file")
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: unreadable label file ({exc})") from exc
    if not lines or not lines[0].strip():
        raise DataError(f"{path}:1: empty file; expected a header line such as "
                        "'Face Left Right Origin WhichEye 3DGaze 3DHead 2DGaze ...'")
    header = lines[0].split()
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise DataError(f"{path}:1: header lacks column(s) {', '.join(missing)}; got "
                        f"{' '.join(header)!r} (GazeHub label files start with a header "
                        "naming Face ... 2DGaze)")
    col = {name: i for i, name in enumerate(header)}
    faces, gaze, vec = [], [], []
    for k, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != len(header):
            raise DataError(f"{path}:{k}: {len(fields)} fields, but the header names "
                            f"{len(header)} columns")
        yaw, pitch = _floats(fields[col["2DGaze"]], 2, path, k, "2DGaze")
        faces.append(fields[col["Face"]])
        gaze.append((pitch, yaw))  # GazeHub's 2DGaze is (yaw, pitch)
        if "3DGaze" in col:
            vec.append(_floats(fields[col["3DGaze"]], 3, path, k, "3DGaze"))
    if not faces:
        raise DataError(f"{path}: header only, no samples")
    return faces, gaze, (vec if "3DGaze" in col else None)


def read_gazehub_labels(label_files: Sequence[str | Path] | str | Path) -> GazeHubLabels:
    """Parse one or more GazeHub label files (DataError names file and line on bad input)."""
    if isinstance(label_files, (str, Path)):
        label_files = [label_files]
    files = [Path(p) for p in label_files]
    if not files:
        raise DataError("GazeHub: no label files given")
    faces, gaze, vecs, index = [], [], [], []
    all_have_vec = True
    for k, path in enumerate(files):
        f, g, v = _read_one(path)
        faces += f
        gaze += g
        index += [k] * len(f)
        if v is None:
            all_have_vec = False
        else:
            vecs += v
    return GazeHubLabels(
        faces=faces,
        gaze=np.asarray(gaze, dtype=np.float32),
        gaze_vector=np.asarray(vecs, dtype=np.float32) if all_have_vec else None,
        file_index=np.asarray(index, dtype=np.int64),
    )


class GazeHub(Dataset):
    """Face images listed in GazeHub label files; one label file per subject is typical.

    ``.subject`` is the index of the label file each sample came from.
    """

    def __init__(self, image_root: str | Path, label_files, size: tuple[int, int] | None = None,
                 fraction: float = 1.0, seed: int = 0):
        from genlab.gaze.datasets import fraction_indices

        self.image_root = Path(image_root)
        if not self.image_root.is_dir():
            raise DataError(f"{self.image_root}: image root folder does not exist")
        labels = read_gazehub_labels(label_files)
        keep = fraction_indices(len(labels.faces), fraction, seed)
        self.faces = [labels.faces[i] for i in keep]
        self.gaze = torch.from_numpy(labels.gaze[keep])
        self.gaze_vector = (None if labels.gaze_vector is None
                            else torch.from_numpy(labels.gaze_vector[keep]))
        self.subject = labels.file_index[keep]
        self.size = tuple(size) if size is not None else None

    def __len__(self) -> int:
        return len(self.faces)

    def __getitem__(self, i):
        path = self.image_root / self.faces[i]
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise DataError(f"{path}: missing or unreadable image (listed in a label file)")
        rgb = np.ascontiguousarray(bgr[..., ::-1])
        if self.size is not None and rgb.shape[:2] != self.size:
            shrink = rgb.shape[0] > self.size[0]
            rgb = cv2.resize(rgb, (self.size[1], self.size[0]),
                             interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
        image = torch.from_numpy(rgb).permute(2, 0, 1).float().div_(255.0)
        return image, self.gaze[i]
