"""Splits of a data set: the tensors of one split (:class:`Split`, or image files read batch by
batch), the seeded stratified split into parts, the standardisation by the first part, and
the constant predictor's accuracy on a split's labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from genlab.core.errors import ConfigError


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


def majority_accuracy(fit_labels: torch.Tensor, score_labels: torch.Tensor) -> float:
    """The constant predictor's accuracy (%): the majority class of ``fit_labels`` (the
    smallest label on a tie) answered for every item of ``score_labels``."""
    majority = torch.bincount(fit_labels).argmax()
    return 100 * float((score_labels == majority).float().mean())


