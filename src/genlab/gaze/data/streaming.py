"""Gaze data read from disk batch by batch through a DataLoader (bounded memory).

:class:`StreamingSet` wraps a torch Dataset whose items are ``(image, gaze)`` (the
readers in :mod:`genlab.gaze.data.xgaze` and :mod:`genlab.gaze.data.gazehub`) together with its
labels, which are small and read up front. Images are never held beyond the batches in
flight: memory is bounded by ``batch_size * (2 * workers + 1)`` images whatever the data
set's size. It offers the same interface as the in-memory
:class:`genlab.gaze.data.gazeset.GazeSet` (:class:`genlab.gaze.data.gazeset.GazeData`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from genlab.core.errors import DataError
from genlab.gaze.data.gazeset import GazeLabels


class _Images(Dataset):
    """The images of a ``(image, gaze)`` data set, by index."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i):
        return self.dataset[i][0]


def _worker_init(worker_id: int) -> None:
    """Let a reader forget file handles inherited from the parent process."""
    info = torch.utils.data.get_worker_info()
    init = getattr(info.dataset.dataset, "worker_init_fn", None)
    if init is not None:
        init(worker_id)


class StreamingSet:
    """A data set read lazily from disk; ``indices`` select (and order) its samples."""

    def __init__(self, dataset, labels: GazeLabels, name: str, *, workers: int = 0,
                 indices=None):
        if len(labels) != len(dataset):
            raise DataError(f"{name}: {len(dataset)} samples but {len(labels)} labels")
        self.dataset, self.name, self.workers = dataset, name, int(workers)
        self._all_labels = labels
        self.indices = (np.arange(len(dataset)) if indices is None
                        else np.asarray(indices, dtype=np.int64))
        if len(self.indices) == 0:
            raise DataError(f"data set {name} is empty")
        self.labels = labels.index(self.indices)

    def __len__(self) -> int:
        return len(self.indices)

    def subset(self, indices) -> StreamingSet:
        return StreamingSet(self.dataset, self._all_labels, self.name, workers=self.workers,
                            indices=self.indices[np.asarray(indices, dtype=np.int64)])

    def load(self, index_batches: Iterable) -> Iterator[tuple[torch.Tensor, GazeLabels]]:
        """(images float [0, 1], labels) per batch of indices, read by ``workers`` processes."""
        batches = [np.asarray(b, dtype=np.int64) for b in index_batches]
        if not batches:
            return
        loader = DataLoader(
            _Images(self.dataset),
            batch_sampler=[self.indices[b].tolist() for b in batches],
            num_workers=self.workers,
            worker_init_fn=_worker_init if self.workers > 0 else None,
        )
        for b, images in zip(batches, loader, strict=True):
            yield images, self.labels.index(b)

    def preview(self, n: int) -> torch.Tensor:
        """The first ``n`` images as float [0, 1] (for plots)."""
        return torch.stack([self.dataset[int(i)][0] for i in self.indices[:n]])
