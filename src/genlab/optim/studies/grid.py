"""Resumable grids of digits trainings: each training is its own run folder under trainings/.

A finished training has a summary.json and is never redone; a training killed midway
continues from its last epoch checkpoint (``train_digits(..., resume=True)``). The grid's
own run folder logs one metrics line per finished training and checkpoints the list of
finished keys, so a killed grid restarted with ``--resume`` continues where it stopped.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

from genlab.core.errors import DivergedError
from genlab.core.progress import progress
from genlab.core.runs import SUMMARY, RunDir, read_json, write_json
from genlab.optim.studies.train import TrainConfig, train_digits


def job_key(values: dict) -> str:
    """A folder name from hyper-parameter values, e.g. ``lr0.1-batch32-optsgd``."""
    return "-".join(f"{k}{v}" for k, v in values.items())


def expand(base: TrainConfig, axes: dict[str, list]) -> list[tuple[dict, TrainConfig]]:
    """Every combination of the axes' values applied to ``base`` (TrainConfig field names)."""
    names = list(axes)
    jobs = []
    for combo in itertools.product(*(axes[n] for n in names)):
        values = dict(zip(names, combo, strict=True))
        jobs.append((values, replace(base, **values)))
    return jobs


def run_grid(run: RunDir, jobs: list[tuple[dict, TrainConfig]], *,
             progress_bar: bool | None = None, name: str = "grid") -> list[dict]:
    """Train every job (skipping finished ones); returns records = values + summary figures."""
    folder = run.path / "trainings"
    folder.mkdir(exist_ok=True)
    state = run.resumed_state or {"done": []}
    records = []
    with progress(len(jobs), name, progress_bar) as tick:
        for values, cfg in jobs:
            key = job_key(values)
            out = folder / key
            if (out / SUMMARY).exists():
                summary = read_json(out / SUMMARY)
            else:
                try:
                    summary = train_digits(cfg, out, resume=(out / "config.json").exists(),
                                           progress_bar=False)
                except DivergedError as exc:  # a diverged setting is a result, not a crash
                    summary = {"diverged": True, "error": str(exc)}
                    write_json(out / SUMMARY, summary)
            record = {"key": key, **values, **_flat(summary)}
            records.append(record)
            if key not in state["done"]:
                state["done"].append(key)
                run.log(record)
                run.save(state)
            tick(1, last=key)
    return records


def _flat(summary: dict) -> dict:
    """Summary figures with the measures lifted to the top level (no nested dicts)."""
    flat = {k: v for k, v in summary.items() if not isinstance(v, dict)}
    measures = summary.get("measures", {})
    flat.update({k: v for k, v in measures.items() if isinstance(v, (int, float))})
    return flat


def folder_of(run_path: Path, values: dict) -> Path:
    return Path(run_path) / "trainings" / job_key(values)
