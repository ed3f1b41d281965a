"""The cross-domain gaze protocol on synthetic domains (and on real data from disk).

Four tasks mirror the paper's E->M, E->D, G->M, G->D (ETH-XGaze / Gaze360 ->
MPIIFaceGaze / EyeDiap) with genlab's procedural eye domains::

    E->M = broad-e -> narrow-m     E->D = broad-e -> narrow-d
    G->M = broad-g -> narrow-m     G->D = broad-g -> narrow-d

Source and target are rendered from different domains (different appearance
distributions and different people). The target is used only for the final test
(and logged per epoch for curves); validation holds out a fraction of the
source's subjects. ``fraction`` keeps a seeded random share of the source training
images (the paper's "10% of the data" setting).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from genlab.core.errors import ConfigError, DataError, require_choice
from genlab.gaze.train import GazeSet

TASKS = {
    "E->M": ("broad-e", "narrow-m"),
    "E->D": ("broad-e", "narrow-d"),
    "G->M": ("broad-g", "narrow-m"),
    "G->D": ("broad-g", "narrow-d"),
}


@dataclass
class TaskData:
    """Source training images, held-out source subjects (val) and the target domain (test)."""

    train: GazeSet
    val: GazeSet
    test: GazeSet


def task_domains(task: str) -> tuple[str, str]:
    """(source, target) domains of a task name such as "E->M"."""
    require_choice("task", task, tuple(TASKS))
    return TASKS[task]


def _to_tensor_images(images: np.ndarray) -> torch.Tensor:
    """(N,H,W,3) uint8 RGB -> (N,3,H,W) float in [0, 1], NCHW-contiguous."""
    # .contiguous(): a permuted tensor keeps NHWC strides, which sends convolutions down
    # torch's channels-last CPU path (heap corruption seen there with 2 threads).
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).contiguous() / 255.0


def synthetic_set(
    domain: str, count: int, seed: int, size=(32, 48), n_subjects: int | None = None
) -> GazeSet:
    """Render ``count`` images of a synthetic domain into an in-memory GazeSet."""
    from genlab.gaze.synth import render_domain

    batch = render_domain(domain, count, seed, size=tuple(size), n_subjects=n_subjects)
    if len(batch.images) == 0:
        raise DataError(f"domain {domain!r} rendered no images (count={count})")
    return GazeSet(
        _to_tensor_images(batch.images),
        torch.as_tensor(np.asarray(batch.gaze), dtype=torch.float32),
        torch.as_tensor(np.asarray(batch.subject), dtype=torch.long),
        domain,
    )


def hold_out_subjects(data: GazeSet, val_fraction: float, seed: int) -> tuple[GazeSet, GazeSet]:
    """Split by subject: a seeded ``val_fraction`` of the subjects goes to validation."""
    from genlab.gaze.datasets import subject_split

    if len(data.subject.unique()) < 2:
        raise DataError(f"{data.name}: need at least 2 subjects to hold some out")
    parts = subject_split(data.subject.numpy(), (1 - val_fraction, val_fraction), seed)
    return tuple(data.subset(torch.as_tensor(idx)) for idx in parts)


def take_share(data: GazeSet, fraction: float, seed: int) -> GazeSet:
    """A seeded random share ``fraction`` in (0, 1] of the images (at least one)."""
    from genlab.gaze.datasets import fraction_indices

    if fraction == 1:
        return data
    return data.subset(torch.as_tensor(fraction_indices(len(data), fraction, seed)))


def synthetic_task(
    source: str,
    target: str,
    *,
    train_count: int,
    test_count: int,
    size=(32, 48),
    data_seed: int = 0,
    val_fraction: float = 0.2,
) -> TaskData:
    """Render a source domain (split by subject into train/val) and a target domain."""
    if source == target:
        raise ConfigError(f"source and target must be different domains, both are {source!r}")
    full = synthetic_set(source, train_count, data_seed, size)
    train, val = hold_out_subjects(full, val_fraction, data_seed)
    test = synthetic_set(target, test_count, data_seed + 1_000_003, size)
    return TaskData(train, val, test)


def with_fraction(task: TaskData, fraction: float, seed: int) -> TaskData:
    """The task with only a share ``fraction`` of its training images."""
    return TaskData(take_share(task.train, fraction, seed), task.val, task.test)


def dataset_to_set(dataset, name: str) -> GazeSet:
    """Materialise a torch Dataset of (image (3,H,W), gaze (2,)) with ``.subject`` ids."""
    if len(dataset) == 0:
        raise DataError(f"{name}: holds no images")
    images, gaze = zip(*(dataset[i] for i in range(len(dataset))), strict=True)
    images = torch.stack([torch.as_tensor(im, dtype=torch.float32) for im in images])
    gaze = torch.stack([torch.as_tensor(g, dtype=torch.float32) for g in gaze])
    subject = torch.as_tensor(
        np.asarray(getattr(dataset, "subject", np.zeros(len(images)))), dtype=torch.long
    )
    return GazeSet(images, gaze, subject, name)


def real_set(data_format: str, paths: list[str], size, image_root: str | None = None) -> GazeSet:
    """Read ETH-XGaze h5 files/folders ("xgaze") or GazeHub label files ("gazehub")."""
    from genlab.gaze import datasets

    require_choice("data format", data_format, ("xgaze", "gazehub"))
    if not paths:
        raise ConfigError(f"--data-format {data_format} needs at least one data file path")
    if data_format == "xgaze":
        ds = datasets.ETHXGaze(list(paths), size=tuple(size))
    else:
        if image_root is None:
            raise ConfigError("--data-format gazehub needs --image-root")
        ds = datasets.GazeHub(image_root, list(paths), size=tuple(size))
    return dataset_to_set(ds, ",".join(str(p) for p in paths))


def load_task_data(cfg) -> TaskData:
    """TaskData for a GazeTrainConfig: the synthetic protocol or real files from disk."""
    if cfg.data_format == "synthetic":
        task = synthetic_task(
            cfg.source,
            cfg.target,
            train_count=cfg.train_count,
            test_count=cfg.test_count,
            size=cfg.size,
            data_seed=cfg.data_seed,
        )
        return with_fraction(task, cfg.fraction, cfg.seed)
    if not cfg.test_path:
        raise ConfigError(f"--data-format {cfg.data_format} needs --test-path")
    full = real_set(cfg.data_format, cfg.train_path, cfg.size, image_root=cfg.image_root)
    train, val = hold_out_subjects(full, 0.2, cfg.data_seed)
    test = real_set(cfg.data_format, cfg.test_path, cfg.size, image_root=cfg.image_root)
    return with_fraction(TaskData(train, val, test), cfg.fraction, cfg.seed)
