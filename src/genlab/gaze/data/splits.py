"""Seeded index selections shared by every gaze data set: subject splits and data shares.

A leaf module (numpy and genlab.core only), so that readers, synthetic data, training
and the protocol can all use one implementation without importing each other. The
data-set helpers at the end work on anything with ``labels.subject``, ``subset`` and
``len`` (genlab.gaze.data.gazeset.GazeData).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch.utils.data import Subset

from genlab.core.errors import ConfigError, DataError


def fraction_indices(n: int, fraction: float, seed: int) -> np.ndarray:
    """Sorted indices of a seeded random ``fraction`` of ``n`` items (at least one)."""
    if not (0.0 < float(fraction) <= 1.0):
        raise ConfigError(f"fraction must be in (0, 1], got {fraction}")
    if fraction >= 1.0:
        return np.arange(n)
    k = max(1, int(round(fraction * n)))
    return np.sort(np.random.default_rng([seed, 31]).permutation(n)[:k])


def subject_split(subject_ids, fractions: Sequence[float] = (0.8, 0.2),
                  seed: int = 0) -> tuple[np.ndarray, ...]:
    """Split sample indices into parts by subject: no subject appears in two parts.

    ``fractions`` (positive, summing to 1) are shares of the *subjects*; every part
    gets at least one subject when there are enough. Returns one sorted index array per part.
    """
    ids = np.asarray(subject_ids)
    fr = np.asarray(fractions, dtype=np.float64)
    if fr.ndim != 1 or len(fr) < 1 or np.any(fr <= 0) or abs(fr.sum() - 1.0) > 1e-6:
        raise ConfigError(f"fractions must be positive and sum to 1, got {list(fractions)}")
    unique = np.unique(ids)
    if len(unique) < len(fr):
        raise ConfigError(f"cannot split {len(unique)} subjects into {len(fr)} parts")
    order = np.random.default_rng([seed, 17]).permutation(unique)
    bounds = np.round(np.cumsum(fr) * len(unique)).astype(int)
    bounds[-1] = len(unique)
    # every part gets at least one subject: cap from the end, then raise from the start
    for k in range(len(bounds) - 2, -1, -1):
        bounds[k] = min(bounds[k], bounds[k + 1] - 1)
    for k in range(len(bounds)):
        bounds[k] = max(bounds[k], (bounds[k - 1] if k else 0) + 1)
    parts, lo = [], 0
    for hi in bounds:
        parts.append(np.flatnonzero(np.isin(ids, order[lo:hi])))
        lo = hi
    return tuple(parts)


def step_batches(n: int, batch_size: int, seed: int, start: int, stop: int):
    """Index batches of optimiser steps ``start..stop-1`` of a seeded shuffled stream.

    Step ``s`` belongs to pass ``s // per_pass`` over the ``n`` items (a fresh seeded
    permutation per pass; the last incomplete batch of a pass is dropped so that every
    step sees ``batch_size`` items; a set smaller than one batch is used whole). The
    batches of a step depend only on (n, batch_size, seed, step): a resumed run and
    every model trained with the same seed see the same batches in the same order.
    """
    size = min(batch_size, n)
    per_pass = max(1, n // size)
    perm, perm_pass = None, -1
    for step in range(start, stop):
        p, j = divmod(step, per_pass)
        if p != perm_pass:
            perm, perm_pass = np.random.default_rng([seed, 101, p]).permutation(n), p
        yield perm[j * size:(j + 1) * size]


def ordered_batches(n: int, batch_size: int):
    """Consecutive index batches covering ``0..n-1`` once (evaluation order)."""
    for lo in range(0, n, batch_size):
        yield np.arange(lo, min(n, lo + batch_size))


def hold_out_subjects(data, val_fraction: float, seed: int):
    """Split by subject: a seeded ``val_fraction`` of the subjects goes to validation."""
    if len(np.unique(data.labels.subject.numpy())) < 2:
        raise DataError(f"{data.name}: need at least 2 subjects to hold some out")
    parts = subject_split(data.labels.subject.numpy(), (1 - val_fraction, val_fraction), seed)
    return tuple(data.subset(idx) for idx in parts)


def keep_subjects(data, subjects: Sequence[int]):
    """The images of ``subjects`` (ids that must all occur in ``data``), in data order."""
    ids = data.labels.subject.numpy()
    wanted = np.asarray(list(subjects), dtype=np.int64)
    missing = np.setdiff1d(wanted, ids)
    if len(missing):
        raise ConfigError(f"{data.name}: subjects {missing.tolist()[:8]} are not among the "
                          f"{len(np.unique(ids))} training subjects (held out, or absent)")
    return data.subset(np.flatnonzero(np.isin(ids, wanted)))


def take_share(data, fraction: float, seed: int):
    """A seeded random share ``fraction`` in (0, 1] of the images (at least one)."""
    if fraction == 1:
        return data
    return data.subset(fraction_indices(len(data), fraction, seed))


def take_subject_share(data, fraction: float, seed: int):
    """Every image of a seeded random share ``fraction`` in (0, 1] of the subjects (at
    least one subject): the few-people reading of "10% of the data"."""
    if fraction == 1:
        return data
    subject = data.labels.subject.numpy()
    ids = np.unique(subject)
    kept = ids[fraction_indices(len(ids), fraction, seed)]
    return data.subset(np.flatnonzero(np.isin(subject, kept)))


def subject_fold(data, fold: int, folds: int, seed: int):
    """(the subjects outside fold ``fold``, the subjects inside it) of ``folds`` by subject."""
    if not 0 <= fold < folds:
        raise ConfigError(f"target_fold must be in 0..{folds - 1}, got {fold}")
    parts = subject_split(data.labels.subject.numpy(), (1.0 / folds,) * folds, seed)
    rest = np.sort(np.concatenate([p for k, p in enumerate(parts) if k != fold]))
    return data.subset(rest), data.subset(parts[fold])


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
