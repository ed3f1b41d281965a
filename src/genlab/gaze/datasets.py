"""Gaze data sets as torch Datasets: synthetic, ETH-XGaze h5 files, GazeHub label files.

Every data set yields ``(image, gaze)``: image a float32 tensor (3, H, W) in [0, 1],
RGB; gaze a float32 tensor (2,) = (pitch, yaw) in radians (ETH-XGaze convention, see
:mod:`genlab.gaze.geometry`). Each also exposes ``.subject`` (one id per sample) so that
splits can be made by subject (:func:`subject_split`, from :mod:`genlab.gaze.splits`).
Readers of real data live in :mod:`genlab.gaze.xgaze` and :mod:`genlab.gaze.gazehub`
and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from genlab.core.errors import ConfigError
from genlab.gaze.gazehub import GazeHub, read_gazehub_labels
from genlab.gaze.splits import fraction_indices, subject_split
from genlab.gaze.synth import SynthBatch, render_domain
from genlab.gaze.xgaze import ETHXGaze, write_xgaze_h5

__all__ = [
    "ETHXGaze", "GazeHub", "GazeSubset", "SyntheticGaze", "fraction_indices",
    "read_gazehub_labels", "subject_split", "take_fraction", "write_xgaze_h5",
]


class SyntheticGaze(Dataset):
    """Rendered eye images of one domain, rendered once at construction and kept in memory.

    ``subjects`` keeps only images of those subject ids (after rendering ``count``
    images); ``fraction`` then keeps a seeded random share of them.
    """

    def __init__(self, domain: str, count: int, seed: int, size: tuple[int, int] = (64, 96),
                 subjects: Sequence[int] | None = None, fraction: float = 1.0,
                 n_subjects: int | None = None):
        batch = render_domain(domain, count, seed, size=size, n_subjects=n_subjects)
        keep = np.arange(len(batch))
        if subjects is not None:
            wanted = np.asarray(list(subjects), dtype=np.int64)
            keep = keep[np.isin(batch.subject, wanted)]
            if len(keep) == 0:
                raise ConfigError(f"none of the subjects {wanted.tolist()[:8]} occur in domain "
                                  f"{domain!r} (ids {batch.subject.min()}..{batch.subject.max()})")
        keep = keep[fraction_indices(len(keep), fraction, seed)]
        self.domain = batch.domain
        self.size = tuple(size)
        self.images = torch.from_numpy(np.ascontiguousarray(
            batch.images[keep].transpose(0, 3, 1, 2)))  # uint8 (N, 3, H, W)
        self.gaze = torch.from_numpy(batch.gaze[keep].astype(np.float32))
        self.head_pose = torch.from_numpy(batch.head_pose[keep].astype(np.float32))
        self.subject = batch.subject[keep]
        self.cluster = batch.cluster[keep]
        self.appearance = batch.appearance[keep]

    @classmethod
    def from_batch(cls, batch: SynthBatch) -> SyntheticGaze:
        """Wrap an already rendered batch without rendering again."""
        self = cls.__new__(cls)
        self.domain = batch.domain
        self.size = batch.images.shape[1:3]
        self.images = torch.from_numpy(np.ascontiguousarray(batch.images.transpose(0, 3, 1, 2)))
        self.gaze = torch.from_numpy(batch.gaze.astype(np.float32))
        self.head_pose = torch.from_numpy(batch.head_pose.astype(np.float32))
        self.subject = batch.subject.copy()
        self.cluster = batch.cluster.copy()
        self.appearance = batch.appearance.copy()
        return self

    def __len__(self) -> int:
        return len(self.gaze)

    def __getitem__(self, i):
        return self.images[i].float().div_(255.0), self.gaze[i]


class GazeSubset(Subset):
    """A Subset that keeps the per-sample ``subject`` (and ``appearance``) of its parent."""

    def __init__(self, dataset, indices):
        super().__init__(dataset, [int(i) for i in indices])
        idx = np.asarray(self.indices, dtype=np.int64)
        for name in ("subject", "cluster", "appearance"):
            values = getattr(dataset, name, None)
            if values is not None:
                setattr(self, name, np.asarray(values)[idx])


def take_fraction(dataset, fraction: float, seed: int) -> Subset:
    """A seeded random ``fraction`` in (0, 1] of a data set (the few-data experiment)."""
    return GazeSubset(dataset, fraction_indices(len(dataset), fraction, seed))
