"""Multi-run studies as lists of independent run specs, run by one small function.

A study (the synthetic bench, the paper protocol) is a list of :class:`RunSpec`
(name, config, run folder). :func:`run_specs` executes them: a spec whose folder holds
summary.json is finished and is read back, one whose folder holds only config.json was
interrupted and is resumed, the others start. A folder whose config.json differs from
its spec's config is refused before anything runs. Specs do not depend on each other, so
they may run in any order or at the same time (``workers`` processes); everything a
run needs is in its config, and data are shared through a cache on disk.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path

from genlab.core.errors import ConfigError, DataError, require_positive
from genlab.core.runs import CONFIG, SUMMARY, read_json
from genlab.gaze.protocol import SyntheticCache, load_task_data
from genlab.gaze.train import train_gaze


@dataclass(frozen=True)
class RunSpec:
    """One run of a study: a unique name, its full config and its run folder."""

    name: str
    config: object
    folder: Path

    @property
    def finished(self) -> bool:
        return (self.folder / SUMMARY).is_file()

    @property
    def started(self) -> bool:
        return (self.folder / CONFIG).is_file()

    def check_folder(self) -> None:
        """ConfigError if the folder holds a run made with other options than this spec's.

        An option missing from the folder's config.json (added to genlab later) counts as
        its default value.
        """
        if not self.started or not is_dataclass(self.config):
            return
        want = json.loads(json.dumps(asdict(self.config)))
        defaults = json.loads(json.dumps(asdict(type(self.config)())))
        have = {**defaults, **read_json(self.folder / CONFIG)}
        diffs = sorted(k for k in want if have.get(k) != want[k])
        if diffs:
            raise ConfigError(
                f"{self.folder} holds a run of {self.name} with other options ("
                + ", ".join(f"{k}: {have.get(k)!r} -> {want[k]!r}" for k in diffs[:4])
                + "); choose another output folder or remove it"
            )


Execute = Callable[[RunSpec, bool], dict]  # (spec, resume) -> summary


def _execute(execute: Execute, spec: RunSpec) -> dict:
    return execute(spec, spec.started)


def run_specs(specs: Sequence[RunSpec], execute: Execute, *, workers: int = 1,
              progress_bar: bool | None = None, description: str = "runs",
              executor: str = "local", address: str | None = None) -> dict[str, dict]:
    """Summaries of every spec by name: finished ones read back, the others (re)run.

    ``execute(spec, resume)`` trains one spec and returns its summary. The runs go through
    genlab.core.sweep: ``executor`` "local" runs them in this process when ``workers`` is
    1, else in that many spawned processes; "inline" in this process; "ray" on a local Ray
    instance or the cluster at ``address`` (``execute`` must then be picklable). A failed
    run does not stop the others; afterwards one error lists every failed run.
    """
    from genlab.core.sweep import RunSpec as SweepSpec
    from genlab.core.sweep import run_sweep

    require_positive("workers", workers)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError(f"run specs need unique names, got duplicates in {names}")
    for spec in specs:
        spec.check_folder()
    if executor == "local" and workers == 1:
        executor = "inline"
    sweep = [SweepSpec(s.name, _run_study_spec, s.config, s.folder,
                       {"execute": execute, "name": s.name}) for s in specs]
    outcomes = run_sweep(sweep, executor=executor, workers=workers, address=address,
                         progress_bar=progress_bar, description=description)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        raise DataError(f"{len(failed)} of {len(specs)} runs failed (the others are kept): "
                        + "; ".join(f"{o.name}: {o.error}" for o in failed[:3]))
    return {o.name: o.summary for o in outcomes}


def _run_study_spec(config, out, *, resume: bool, progress_bar=False, execute: Execute,
                    name: str) -> dict:
    """core.sweep's call of one study run (module level, so worker processes can import it)."""
    return execute(RunSpec(name, config, Path(out)), resume)


@dataclass
class TrainExecutor:
    """Runs one gaze-training spec: loads its data (synthetic sets cached under
    ``cache_folder``) and trains. Picklable, so specs can run in worker processes."""

    cache_folder: Path | None = None
    plots: bool = True

    def __call__(self, spec: RunSpec, resume: bool) -> dict:
        if getattr(self, "_cache", None) is None:
            self._cache = SyntheticCache(self.cache_folder)
        data = load_task_data(spec.config, self._cache)
        _, summary = train_gaze(spec.config, data, spec.folder, resume=resume,
                                progress_bar=False, plots=self.plots)
        return summary

    def __getstate__(self) -> dict:
        return {"cache_folder": self.cache_folder, "plots": self.plots}
