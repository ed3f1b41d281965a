"""The cross-domain gaze protocol: worlds, tasks, and the data of one training run.

A *world* is a set of synthetic domains with named tasks (source -> target)::

    realistic    E->M = broad-e -> narrow-m   E->D = broad-e -> narrow-d
                 G->M = broad-g -> narrow-m   G->D = broad-g -> narrow-d
    appearance   the same four tasks on app-e / app-g -> app-m / app-d
    control      label-shift = ctrl-s -> ctrl-label, capture-shift = ctrl-s -> ctrl-capture
    anatomy      the four tasks on ana-e / ana-g -> ana-m / ana-d

(see genlab.gaze.synth.domains and genlab.gaze.synth.worlds). Real data sets are named
``NAME:ROOT`` (genlab.gaze.data.realdata). A run trains on its source and is tested on
every one of its targets, so the E->M and E->D rows share one E model.

Source and target are different people: synthetic targets are rendered with their own
data seed (``target_seed``), real ones are other data sets. Validation holds out a
``val_fraction`` of the source's *subjects*; targets are used only for the final test.
``target_scale`` k renders each synthetic target with k times its subjects and images
(the same images per subject: more test subjects for a sized comparison).
``fraction`` keeps a seeded random share of the source training images (the paper's
"10% of the data", every subject kept), ``subject_fraction`` a seeded share of the
training subjects with all their images (the other reading: 10% of the people); both
apply after ``train_subjects`` (when given) kept only those training subjects, subjects
first. An in-domain reference trains on another population of a target:
for a synthetic target another data seed; for a real one, with ``target_fold`` k >= 0,
the subjects outside fold k of ``folds`` (the target's subjects split by subject), and
it is tested on fold k.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from genlab.core.errors import ConfigError, require_choice
from genlab.core.registry import Registry
from genlab.core.runs import save_checkpoint
from genlab.gaze.data.gazeset import GazeLabels, GazeSet
from genlab.gaze.data.realdata import open_real, split_ref
from genlab.gaze.data.splits import (
    hold_out_subjects,
    keep_subjects,
    subject_fold,
    take_share,
    take_subject_share,
)
from genlab.gaze.synth.dataset import SyntheticGaze, render_domain
from genlab.gaze.synth.domains import DOMAINS, get_domain

WORLDS: Registry[dict[str, tuple[str, str]]] = Registry("world")  # world -> its tasks
WORLDS.register("realistic", {
    "E->M": ("broad-e", "narrow-m"),
    "E->D": ("broad-e", "narrow-d"),
    "G->M": ("broad-g", "narrow-m"),
    "G->D": ("broad-g", "narrow-d"),
})
WORLDS.register("appearance", {
    "E->M": ("app-e", "app-m"),
    "E->D": ("app-e", "app-d"),
    "G->M": ("app-g", "app-m"),
    "G->D": ("app-g", "app-d"),
})
WORLDS.register("control", {
    "label-shift": ("ctrl-s", "ctrl-label"),
    "capture-shift": ("ctrl-s", "ctrl-capture"),
})
WORLDS.register("anatomy", {
    "E->M": ("ana-e", "ana-m"),
    "E->D": ("ana-e", "ana-d"),
    "G->M": ("ana-g", "ana-m"),
    "G->D": ("ana-g", "ana-d"),
})
TASKS = WORLDS.get("realistic")


@dataclass
class TaskData:
    """Source training images, held-out source subjects (val) and the target data sets."""

    train: object
    val: object
    targets: dict[str, object] = field(default_factory=dict)


def task_domains(task: str, world: str = "realistic") -> tuple[str, str]:
    """(source, target) domains of a task name such as "E->M" in a world."""
    tasks = WORLDS.get(world)
    require_choice("task", task, tuple(tasks))
    return tasks[task]


def target_seed(data_seed: int) -> int:
    """The data seed of synthetic targets: other people than the source's."""
    return data_seed + 1_000_003


def synthetic_set(domain: str, count: int, seed: int, size=(32, 48),
                  n_subjects: int | None = None) -> GazeSet:
    """Render ``count`` images of a synthetic domain into an in-memory GazeSet."""
    return SyntheticGaze.from_batch(render_domain(domain, count, seed, size=tuple(size),
                                                  n_subjects=n_subjects))


class SyntheticCache:
    """Rendered synthetic sets kept in memory and, with ``folder``, as .pt files on disk.

    Rendering is deterministic, so every process (or a later run) that asks for the same
    (domain, count, seed, size) gets the same images; files are written atomically.
    """

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder is not None else None
        self._sets: dict[tuple, GazeSet] = {}

    def __getstate__(self) -> dict:
        """Only the folder travels to worker processes (they read the sets from disk)."""
        return {"folder": self.folder}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["folder"])

    def get(self, domain: str, count: int, seed: int, size, scale: int = 1) -> GazeSet:
        """The domain's ``count`` images (``scale`` x count images of scale x its subjects)."""
        key = (domain, int(count), int(seed), tuple(int(s) for s in size), int(scale))
        if key not in self._sets:
            self._sets[key] = self._load_or_render(key)
        return self._sets[key]

    def _load_or_render(self, key: tuple) -> GazeSet:
        domain, count, seed, size, scale = key
        path = None
        if self.folder is not None:
            more = f"_x{scale}" if scale != 1 else ""
            path = self.folder / f"{domain}_n{count}_s{seed}_{size[0]}x{size[1]}{more}.pt"
            if path.is_file():
                d = torch.load(path, weights_only=True)
                return GazeSet(d["images"], GazeLabels(d["gaze"], d["subject"], d["cluster"]),
                               domain)
        subjects = None if scale == 1 else scale * get_domain(domain).n_subjects
        data = synthetic_set(domain, scale * count, seed, size, n_subjects=subjects)
        if path is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            save_checkpoint(path, {"images": data.images, "gaze": data.gaze,
                                   "subject": data.subject, "cluster": data.cluster})
        return data


def check_data_ref(ref: str) -> None:
    """ConfigError unless ``ref`` names a synthetic domain or a real ``NAME:ROOT`` data set."""
    if split_ref(ref) is None:
        get_domain(ref)


def check_oracle_data(refs: dict[str, list[str]], experts: int) -> None:
    """ConfigError unless every data reference (by option name: ``{"--source": [...]}``)
    is a synthetic domain with appearance clusters and ``experts`` covers them: oracle
    routing sends each sample to the expert of its true cluster."""
    clustered = ", ".join(name for name, spec in DOMAINS.items() if spec.clusters)
    for option, values in refs.items():
        for ref in values:
            spec = None if split_ref(ref) is not None else get_domain(ref)
            if spec is None or not spec.clusters:
                raise ConfigError(
                    f"--routing oracle: {option} {ref!r} has no appearance clusters to route "
                    f"by; use domains that have them ({clustered}), e.g. --source app-e "
                    "--target app-m")
            if experts < len(spec.clusters):
                raise ConfigError(
                    f"--routing oracle: {option} {ref!r} has {len(spec.clusters)} appearance "
                    f"clusters, one expert each, got --experts {experts}; pass --experts "
                    f"{len(spec.clusters)}")


def open_data(ref: str, count: int, seed: int, size, cfg, cache: SyntheticCache | None,
              scale: int = 1):
    """A synthetic domain (rendered, through ``cache``; ``scale`` x its subjects and
    ``count``) or a real ``NAME:ROOT`` data set."""
    check_data_ref(ref)
    if split_ref(ref) is not None:
        return open_real(ref, size, workers=cfg.workers)
    return (cache or SyntheticCache()).get(ref, count, seed, size, scale)


def load_task_data(cfg, cache: SyntheticCache | None = None) -> TaskData:
    """TaskData for a GazeTrainConfig (source, targets, counts, seeds, fraction, fold)."""
    cache = cache or SyntheticCache()
    source = open_data(cfg.source, cfg.train_count, cfg.data_seed, cfg.size, cfg, cache)
    if cfg.target_fold >= 0:
        if list(cfg.targets) != [cfg.source]:
            raise ConfigError("target_fold needs the source as the only target (an in-domain "
                              f"reference), got source {cfg.source!r}, targets {cfg.targets}")
        source, fold = subject_fold(source, cfg.target_fold, cfg.folds, cfg.data_seed)
        targets = {cfg.source: fold}
    else:
        targets = {t: open_data(t, cfg.test_count, target_seed(cfg.data_seed), cfg.size, cfg,
                                cache, cfg.target_scale) for t in cfg.targets}
    train, val = hold_out_subjects(source, cfg.val_fraction, cfg.data_seed)
    if cfg.train_subjects:
        train = keep_subjects(train, cfg.train_subjects)
    train = take_subject_share(train, cfg.subject_fraction, cfg.seed)
    return TaskData(take_share(train, cfg.fraction, cfg.seed), val, targets)
