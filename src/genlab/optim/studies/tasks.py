"""Digits tasks of the studies: fixed splits, class subsets, few-shot training sets, label noise.

Every task is cut from scikit-learn's digits (genlab.core.data: 20% test (359 images), the rest the
"training pool"; standardised with the pool's statistics). Two ways to use the pool
(``split``):

- ``full``: train on the whole pool (1,438 images), no validation set;
- ``holdout``: a stratified 75/25 split of the pool into a fit set (1,079 images) and a
  validation set (359) on which hyper-parameters are chosen; test data are never used
  for a choice.

The split is fixed by ``data_seed``, so trainings that differ only in their seed see the
same fit, validation and test sets. A task (``TASKS``) keeps some classes, relabelled
0..k-1 in order (e.g. ``digits0-4`` and ``digits5-9`` for transfer learning);
``per_class`` > 0 keeps that many fit images per class (the first in a seeded order).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from genlab.core.data import ImageData, Split, load_digits_data, stratified_split
from genlab.core.errors import ConfigError, require_choice
from genlab.core.registry import Registry
from genlab.optim.studies.noise import corrupt_labels

#: task name -> the digit classes it keeps (relabelled 0..k-1 in this order)
TASKS: Registry[tuple[int, ...]] = Registry("task")
TASKS.register("digits", tuple(range(10)))
TASKS.register("digits0-4", (0, 1, 2, 3, 4))
TASKS.register("digits5-9", (5, 6, 7, 8, 9))
SPLITS = ("full", "holdout")
VAL_FRACTION = 0.25


@dataclass
class TaskData:
    """Fit (training), optional validation and test sets of one task."""

    fit: Split
    val: Split | None
    test: Split
    num_classes: int
    in_channels: int
    size: int
    clean_fit_labels: torch.Tensor  # the fit labels before any label noise


@functools.lru_cache(maxsize=4)
def _digits(data_seed: int) -> ImageData:
    """The digits split of a data seed, loaded once per process (never mutated)."""
    return load_digits_data(size=8, seed=data_seed)


def _keep_classes(split: Split, classes: tuple[int, ...]) -> Split:
    if classes == tuple(range(int(split.labels.max()) + 1)):
        return split
    relabel = torch.full((int(split.labels.max()) + 1,), -1, dtype=torch.long)
    relabel[list(classes)] = torch.arange(len(classes))
    new = relabel[split.labels]
    keep = new >= 0
    return Split(split.images[keep], new[keep])


def _per_class(split: Split, per_class: int, seed: int) -> Split:
    order = torch.randperm(len(split), generator=torch.Generator().manual_seed(seed))
    labels = split.labels[order]
    picked = torch.cat([order[labels == c][:per_class] for c in labels.unique()])
    picked = picked.sort().values
    return Split(split.images[picked], split.labels[picked])


def task_data(task: str = "digits", split: str = "full", *, data_seed: int = 0,
              per_class: int = 0, label_noise: float = 0.0, noise_kind: str = "symmetric",
              noise_seed: int = 0) -> TaskData:
    """The sets of one task (see module doc); label noise touches the fit labels only."""
    require_choice("split", split, SPLITS)
    if per_class < 0:
        raise ConfigError(f"per_class must be >= 0, got {per_class}")
    data = _digits(data_seed)
    classes = TASKS.get(task)
    pool = _keep_classes(data.train_full(), classes)
    test = _keep_classes(data.test, classes)
    val = None
    if split == "holdout":
        fit_idx, val_idx = stratified_split(pool.labels.numpy(), (1 - VAL_FRACTION, VAL_FRACTION),
                                            data_seed)
        fit = Split(pool.images[fit_idx], pool.labels[fit_idx])
        val = Split(pool.images[val_idx], pool.labels[val_idx])
    else:
        fit = pool
    if per_class:
        fit = _per_class(fit, per_class, data_seed)
    clean = fit.labels
    if label_noise > 0 and noise_kind == "asymmetric" and task != "digits":
        raise ConfigError(f"asymmetric label noise maps digit classes; task {task!r} "
                          "relabels them (use task 'digits')")
    if label_noise > 0:
        noisy = corrupt_labels(clean, label_noise, noise_kind, num_classes=len(classes),
                               seed=noise_seed)
        fit = Split(fit.images, noisy)
    return TaskData(fit, val, test, len(classes), data.in_channels, data.size, clean)


def majority_accuracy(data: TaskData) -> float:
    """Test accuracy (percent) of the constant predictor of the fit set's most frequent label."""
    counts = np.bincount(data.fit.labels.numpy(), minlength=data.num_classes)
    return 100 * float((data.test.labels == int(counts.argmax())).float().mean())
