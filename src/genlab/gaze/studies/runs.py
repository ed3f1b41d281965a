"""One training run of a gaze study as a ``genlab.core.sweep`` target, and a study's sweep.

A study (the synthetic bench, the paper protocol, the demo) is a list of
``core.sweep.RunSpec`` made by :func:`train_spec`: target :func:`train_run`, the run's
GazeTrainConfig and its folder. ``core.sweep.run_sweep`` skips finished runs (reading
their summary back), resumes interrupted ones and refuses a folder made with other
options before anything runs (``expect``: the config.json the run writes; an option
missing from an old config.json counts as its GazeTrainConfig default). :func:`run_study`
runs the sweep and, once every run had its turn, raises one error that lists every
failed run. Synthetic data are shared through a :class:`SyntheticCache` (in memory
within a process, on disk under its folder across processes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from genlab.core.errors import DataError, require_positive
from genlab.core.sweep import RunSpec, run_sweep
from genlab.gaze.protocol import SyntheticCache, load_task_data
from genlab.gaze.train import GazeTrainConfig, train_gaze

_DEFAULTS = json.loads(json.dumps(asdict(GazeTrainConfig())))


def train_run(config: GazeTrainConfig, out: str | Path, *, resume: bool = False,
              progress_bar: bool | None = False, cache: SyntheticCache | None = None,
              plots: bool = True) -> dict:
    """Load one run's data (synthetic sets through ``cache``) and train it; its summary."""
    data = load_task_data(config, cache or SyntheticCache())
    _, summary = train_gaze(config, data, out, resume=resume, progress_bar=False, plots=plots)
    return summary


def train_spec(name: str, config: GazeTrainConfig, out: str | Path, *,
               cache: SyntheticCache | None = None, plots: bool = True) -> RunSpec:
    """The sweep spec of one gaze training run (config checked against its folder's)."""
    return RunSpec(name, train_run, config, Path(out), {"cache": cache, "plots": plots},
                   expect=json.loads(json.dumps(asdict(config))), defaults=_DEFAULTS)


def run_study(specs: Sequence[RunSpec], *, workers: int = 1, executor: str = "local",
              address: str | None = None, progress_bar: bool | None = None,
              description: str = "runs") -> dict[str, dict]:
    """Summaries of every spec by name: finished ones read back, the others (re)run.

    ``executor`` "local" runs in this process when ``workers`` is 1, else in that many
    spawned processes; "inline" in this process; "ray" on a local Ray instance or the
    cluster at ``address``. A failed run does not stop the others; afterwards one
    DataError lists every failed run.
    """
    require_positive("workers", workers)
    if executor == "local" and workers == 1:
        executor = "inline"
    outcomes = run_sweep(specs, executor=executor, workers=workers, address=address,
                         progress_bar=progress_bar, description=description)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        raise DataError(f"{len(failed)} of {len(outcomes)} runs failed (the others are kept): "
                        + "; ".join(f"{o.name}: {o.error}" for o in failed[:3]))
    return {o.name: o.summary for o in outcomes}


def timed_report(summary: dict, cfg=None) -> list:
    """What a multi-run gaze study prints: its tables and its wall time in this invocation."""
    return [summary["markdown"], f"{summary['seconds']:.0f} s this invocation"]
