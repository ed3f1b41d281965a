"""Typed gaze records: per-sample labels (gaze, subject, appearance cluster) and data sets.

Every gaze data set that training and evaluation see offers the same small interface
(:class:`GazeData`): its ``labels`` (all of them, without images), ``load(index_batches)``
yielding ``(images, labels)`` batches with images float32 (B, 3, H, W) RGB in [0, 1],
``subset(indices)`` and ``preview(n)``. :class:`GazeSet` holds its images in memory
(synthetic data); :class:`genlab.gaze.data.streaming.StreamingSet` reads them from disk
through a DataLoader (real data). Gaze is (pitch, yaw) in radians; an unlabelled
sample has NaN gaze. ``cluster`` is the sample's appearance cluster where the data
know it (the synthetic appearance world), else -1.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from genlab.core.errors import DataError

UNKNOWN_CLUSTER = -1


def to_float_image(images: torch.Tensor) -> torch.Tensor:
    """uint8 image tensor(s) (..., 3, H, W) -> float32 in [0, 1].

    torchvision's ``convert_image_dtype`` (the same ``x / 255`` as before, bit for bit),
    imported when first called so that importing the data classes does not import it.
    """
    from torchvision.transforms.functional import convert_image_dtype  # ~3 s: on first use

    return convert_image_dtype(images, torch.float32)


@dataclass
class GazeLabels:
    """Labels of N samples: gaze (N, 2) pitch-yaw radians, subject (N,), cluster (N,)."""

    gaze: torch.Tensor
    subject: torch.Tensor
    cluster: torch.Tensor

    def __post_init__(self):
        n = len(self.gaze)
        if self.gaze.shape != (n, 2):
            raise DataError(f"gaze labels must be (N, 2) pitch-yaw, got {tuple(self.gaze.shape)}")
        if self.subject.shape != (n,) or self.cluster.shape != (n,):
            raise DataError(f"subject and cluster must be ({n},), got "
                            f"{tuple(self.subject.shape)} and {tuple(self.cluster.shape)}")

    @classmethod
    def build(cls, gaze, subject, cluster=None) -> GazeLabels:
        """Labels from arrays or tensors; ``cluster`` None means unknown (-1)."""
        gaze = torch.as_tensor(np.asarray(gaze, dtype=np.float32))
        subject = torch.as_tensor(np.asarray(subject, dtype=np.int64))
        if cluster is None:
            cluster = torch.full((len(gaze),), UNKNOWN_CLUSTER, dtype=torch.long)
        else:
            cluster = torch.as_tensor(np.asarray(cluster, dtype=np.int64))
        return cls(gaze, subject, cluster)

    def __len__(self) -> int:
        return len(self.gaze)

    def __getitem__(self, rows: slice) -> GazeLabels:
        """The labels of a contiguous range of samples (e.g. one process's share of a batch)."""
        return GazeLabels(self.gaze[rows], self.subject[rows], self.cluster[rows])

    def index(self, idx) -> GazeLabels:
        idx = torch.as_tensor(np.asarray(idx, dtype=np.int64))
        return GazeLabels(self.gaze[idx], self.subject[idx], self.cluster[idx])

    def to(self, device) -> GazeLabels:
        return GazeLabels(self.gaze.to(device), self.subject.to(device), self.cluster.to(device))

    @property
    def labelled(self) -> bool:
        """True when every sample has a finite gaze label."""
        return bool(torch.isfinite(self.gaze).all())


class GazeData(Protocol):
    """What training and evaluation need from a gaze data set."""

    name: str
    labels: GazeLabels

    def __len__(self) -> int: ...

    def load(self, index_batches: Iterable) -> Iterator[tuple[torch.Tensor, GazeLabels]]: ...

    def subset(self, indices) -> GazeData: ...

    def preview(self, n: int) -> torch.Tensor: ...


@dataclass
class GazeSet:
    """In-memory gaze images (N, 3, H, W) uint8 RGB with their labels."""

    images: torch.Tensor
    labels: GazeLabels
    name: str = ""

    def __post_init__(self):
        n = len(self.images)
        if n == 0:
            raise DataError(f"data set {self.name or '(unnamed)'} is empty")
        if self.images.ndim != 4 or self.images.shape[1] != 3:
            raise DataError(
                f"{self.name}: images must be (N, 3, H, W), got {tuple(self.images.shape)}"
            )
        if self.images.dtype != torch.uint8:
            raise DataError(f"{self.name}: images must be uint8, got {self.images.dtype}")
        if len(self.labels) != n:
            raise DataError(f"{self.name}: {n} images but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.images)

    @property
    def gaze(self) -> torch.Tensor:
        return self.labels.gaze

    @property
    def subject(self) -> torch.Tensor:
        return self.labels.subject

    @property
    def cluster(self) -> torch.Tensor:
        return self.labels.cluster

    def subset(self, indices) -> GazeSet:
        idx = torch.as_tensor(np.asarray(indices, dtype=np.int64))
        return GazeSet(self.images[idx], self.labels.index(idx), self.name)

    def load(self, index_batches: Iterable) -> Iterator[tuple[torch.Tensor, GazeLabels]]:
        """(images float [0, 1], labels) for each batch of indices."""
        for idx in index_batches:
            idx = torch.as_tensor(np.asarray(idx, dtype=np.int64))
            yield to_float_image(self.images[idx]), self.labels.index(idx)

    def preview(self, n: int) -> torch.Tensor:
        """The first ``n`` images as float [0, 1] (for plots)."""
        return to_float_image(self.images[:n])
