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
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path

from genlab.core.errors import ConfigError, require_positive
from genlab.core.progress import progress
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
              progress_bar: bool | None = None, description: str = "runs") -> dict[str, dict]:
    """Summaries of every spec by name: finished ones read back, the others (re)run.

    ``execute(spec, resume)`` trains one spec and returns its summary; with ``workers``
    > 1 it runs in that many fresh processes (it must then be picklable).
    """
    require_positive("workers", workers)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError(f"run specs need unique names, got duplicates in {names}")
    for spec in specs:
        spec.check_folder()
    results = {s.name: read_json(s.folder / SUMMARY) for s in specs if s.finished}
    pending = [s for s in specs if not s.finished]
    with progress(len(specs), description, progress_bar, completed=len(results)) as tick:
        if workers == 1:
            for spec in pending:
                results[spec.name] = _execute(execute, spec)
                tick(1, last=spec.name)
        elif pending:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
                futures = {pool.submit(_execute, execute, s): s for s in pending}
                for done in as_completed(futures):
                    results[futures[done].name] = done.result()
                    tick(1, last=futures[done].name)
    return {name: results[name] for name in names}


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
