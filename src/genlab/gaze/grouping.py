"""The grouping phase of a MoEGaze run: appearance sub-datasets fixed before gaze training.

``--grouping colour`` or ``crossfit`` (genlab.gaze.models.subgroups has the methods):
before the run's first step its training subjects are grouped into K sub-datasets; the
groups, their sizes, how many subjects moved per cross-fitting iteration and (where the
data know the true appearance clusters) the groups' NMI with them go to the run's
metrics.jsonl (``phase: grouping``) and to grouping.json. Cross-fitting trains its fold
models as sub-runs in RUN/grouping/ (``baseline_it0_f0``, ``experts_it1_f0``, ...), each
resumable, so a run killed mid-way through the grouping phase continues from its
finished fold models and ends equal to an uninterrupted one; grouping.json, once
written, is read back instead of grouping again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from genlab.core.runs import RunDir
from genlab.core.storage.files import read_json, write_json
from genlab.gaze.models.subgroups import (
    FitFold,
    Grouping,
    colour_groups,
    crossfit_groups,
    iteration_record,
)

GROUPING_FILE = "grouping.json"
SUBRUNS = "grouping"


def fold_folder(run: RunDir, kind: str, iteration: int, fold: int) -> Path:
    """Where cross-fitting's fold model of (kind, iteration, fold) is trained."""
    return run.path / SUBRUNS / f"{kind}_it{iteration}_f{fold}"


def find_groups(cfg, train, run: RunDir, device, fit: FitFold) -> Grouping:
    """The groups of the run's training subjects (read back from grouping.json if there)."""
    file = run.path / GROUPING_FILE
    if file.is_file():
        saved = read_json(file)
        return Grouping(torch.tensor(saved["subjects"]), torch.tensor(saved["groups"]),
                        saved["history"])
    grouping = _group(cfg, train, device, fit, run.log)
    write_json(file, {"method": cfg.grouping, "init": cfg.group_init,
                             **grouping.record()})
    return grouping


def _group(cfg, train, device, fit: FitFold, log: Callable[[dict], None]) -> Grouping:
    k, seed = cfg.experts, cfg.seed
    if cfg.grouping == "colour":
        ids, groups = colour_groups(train, k, seed)
        grouping = Grouping(ids, groups)
        grouping.history = [iteration_record(0, grouping, None, train, k)]
        log(grouping.history[0])
        return grouping
    start = None
    if cfg.group_init == "colour":
        start = Grouping(*colour_groups(train, k, seed))
    return crossfit_groups(train, k, folds=cfg.group_folds, iterations=cfg.group_iterations,
                           seed=seed, fit=fit, device=device, start=start, on_iteration=log)

