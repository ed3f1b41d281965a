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

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from genlab.core.errors import ConfigError, DataError
from genlab.gaze.data.images import resize_rgb, rgb_to_tensor
from genlab.gaze.data.realdata import register_reader
from genlab.gaze.data.splits import fraction_indices

REQUIRED_COLUMNS = ("Face", "2DGaze")
# Gaze360 ships one label file for everyone; its original image paths name the recording
# and the person's track: rec_022/head/000000/000131.jpg. genlab groups by recording.
GAZE360_SUBJECT_PATTERN = r"rec_(\d+)"


@dataclass
class GazeHubLabels:
    """Parsed label files: image paths, (pitch, yaw) gaze, optional 3D gaze, file index."""

    faces: list[str]
    gaze: np.ndarray  # (N, 2) float32 (pitch, yaw)
    gaze_vector: np.ndarray | None  # (N, 3) float32 or None when no file has 3DGaze
    file_index: np.ndarray  # (N,) which label file each sample came from
    origins: list[str]  # the Origin column (original image path), else the Face path
    where: list[str]  # "file:line" of each sample, for error messages


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
    faces, gaze, vec, origins, where = [], [], [], [], []
    for k, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != len(header):
            raise DataError(f"{path}:{k}: {len(fields)} fields, but the header names "
                            f"{len(header)} columns")
        yaw, pitch = _floats(fields[col["2DGaze"]], 2, path, k, "2DGaze")
        faces.append(fields[col["Face"]])
        origins.append(fields[col.get("Origin", col["Face"])])
        where.append(f"{path}:{k}")
        gaze.append((pitch, yaw))  # GazeHub's 2DGaze is (yaw, pitch)
        if "3DGaze" in col:
            vec.append(_floats(fields[col["3DGaze"]], 3, path, k, "3DGaze"))
    if not faces:
        raise DataError(f"{path}: header only, no samples")
    return faces, gaze, (vec if "3DGaze" in col else None), origins, where


def read_gazehub_labels(label_files: Sequence[str | Path] | str | Path) -> GazeHubLabels:
    """Parse one or more GazeHub label files (DataError names file and line on bad input)."""
    if isinstance(label_files, (str, Path)):
        label_files = [label_files]
    files = [Path(p) for p in label_files]
    if not files:
        raise DataError("GazeHub: no label files given")
    faces, gaze, vecs, index, origins, where = [], [], [], [], [], []
    all_have_vec = True
    for k, path in enumerate(files):
        f, g, v, o, w = _read_one(path)
        faces += f
        gaze += g
        origins += o
        where += w
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
        origins=origins,
        where=where,
    )


def subjects_from_paths(labels: GazeHubLabels, pattern: str) -> np.ndarray:
    """Subject ids parsed from each sample's original image path by a regex.

    The digits of the pattern's groups are joined into one integer (``rec_(\\d+)`` on
    ``rec_022/head/...`` gives 22). A sample whose path does not match raises DataError
    naming its file and line.
    """
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"subject pattern {pattern!r} is not a regular expression ({exc})") from exc
    if rx.groups < 1:
        raise ConfigError(f"subject pattern {pattern!r} needs a group such as (\\d+)")
    ids = np.empty(len(labels.origins), dtype=np.int64)
    for i, (path, where) in enumerate(zip(labels.origins, labels.where, strict=True)):
        m = rx.search(path)
        digits = "".join(g or "" for g in m.groups()) if m else ""
        if not digits.isdigit():
            raise DataError(f"{where}: image path {path!r} does not match the subject "
                            f"pattern {pattern!r} (digits in the group expected)")
        ids[i] = int(digits)
    return ids


class GazeHub(Dataset):
    """Face images listed in GazeHub label files.

    ``.subject`` is the index of the label file each sample came from (MPIIFaceGaze and
    EyeDiap ship one label file per person), or, with ``subject_pattern``, an id parsed
    from each sample's original image path (Gaze360 ships one file for everyone; see
    :data:`GAZE360_SUBJECT_PATTERN`).
    """

    def __init__(self, image_root: str | Path, label_files, size: tuple[int, int] | None = None,
                 fraction: float = 1.0, seed: int = 0, subject_pattern: str | None = None):
        self.image_root = Path(image_root)
        if not self.image_root.is_dir():
            raise DataError(f"{self.image_root}: image root folder does not exist")
        labels = read_gazehub_labels(label_files)
        subject = (labels.file_index if subject_pattern is None
                   else subjects_from_paths(labels, subject_pattern))
        keep = fraction_indices(len(labels.faces), fraction, seed)
        self.faces = [labels.faces[i] for i in keep]
        self.gaze = torch.from_numpy(labels.gaze[keep])
        self.gaze_vector = (None if labels.gaze_vector is None
                            else torch.from_numpy(labels.gaze_vector[keep]))
        self.subject = subject[keep]
        self.size = tuple(size) if size is not None else None

    def __len__(self) -> int:
        return len(self.faces)

    def __getitem__(self, i):
        path = self.image_root / self.faces[i]
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise DataError(f"{path}: missing or unreadable image (listed in a label file)")
        image = rgb_to_tensor(resize_rgb(np.ascontiguousarray(bgr[..., ::-1]), self.size))
        return image, self.gaze[i]


def _label_files(root: Path, pattern: str) -> list[Path]:
    files = sorted((root / "Label").glob(pattern))
    if not (root / "Image").is_dir() or not files:
        raise DataError(f"{root}: expected the GazeHub layout, {root}/Label/{pattern} label "
                        f"files and a {root}/Image folder")
    return files


def _opener(pattern: str, subject_pattern: str | None = None):
    def open_(root: Path, size, labels: str):
        return GazeHub(root / "Image", _label_files(root, pattern), size=size,
                       subject_pattern=subject_pattern)
    return open_


register_reader("gaze360", "Gaze360 in GazeHub format (train.label)",
                _opener("train.label", GAZE360_SUBJECT_PATTERN))
register_reader("mpii", "MPIIFaceGaze in GazeHub format (p00-p14)", _opener("p*.label"))
register_reader("eyediap", "EyeDiap in GazeHub format (all label files)", _opener("*.label"))
