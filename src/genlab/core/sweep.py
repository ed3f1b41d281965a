"""One runner for sweeps of independent runs: a local process pool by default, Ray when installed.

A sweep is a list of :class:`RunSpec` (name, target, config, run folder). The target is
a module-level function, or its path ``"package.module:function"``, called as
``target(config, out, resume=..., progress_bar=False, **kwargs)`` and returning the
run's summary dict: the shape of every genlab run function (``retrain``,
``run_search``, ``train_digits``...). Each run writes its own run folder, so:

- a run whose folder holds summary.json is finished: skipped on a rerun (its summary
  is read back), after checking that the folder was made with the spec's options
  (``expect``: the config.json the run writes; one mismatch refuses the sweep before
  anything runs);
- a run whose folder holds config.json but no summary is resumed (``resume=True``);
- a run that raises is reported with its error line (the traceback goes to
  ``error.txt`` in its folder) and the others go on; a worker process that dies (killed,
  out of memory) is retried alone, and reported if it dies again;
- a run may need others first (``after``: their names); it starts once they finished, and
  fails with a line naming the one that failed otherwise;
- an exception class listed in a spec's ``result_errors`` (a diverged training, say) is a
  result, not a failure: its summary ``{"failed": kind, "error": message}`` is written to
  the folder and the run counts as finished.

Executors (registry ``EXECUTORS``): ``process`` (default; ``workers`` spawned
processes, each with ``threads`` torch threads), ``inline`` (this process, one run
after another: notebooks and debugging) and ``ray`` (``pip install 'genlab[ray]'``; a
local Ray instance, or the cluster at ``address`` HOST:PORT). One progress bar covers
the whole sweep; ``status`` (a path) receives sweep.json after every run.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from genlab.core.errors import ConfigError, GenlabError
from genlab.core.progress import progress
from genlab.core.registry import Registry, import_path
from genlab.core.runs import config_differences, config_value
from genlab.core.storage.files import read_json, write_json

FINISHED, SKIPPED, FAILED = "finished", "skipped", "failed"
CONFIG, SUMMARY = "config.json", "summary.json"


@dataclass
class RunSpec:
    """One run of a sweep: ``target(config, out, resume=..., progress_bar=False, **kwargs)``.

    ``after``: names of runs that must finish first. ``expect``: the config.json this run
    writes; a folder that holds a run with other options is refused (keys that the stored
    config lacks are read from its summary, then from ``defaults``; those named in ``free``,
    ``outer.inner`` for a nested one, are not compared). ``result_errors``:
    exception classes that end the run with a summary instead of a failure.
    """

    name: str
    target: str | Callable
    config: Any
    out: str | Path
    kwargs: dict = field(default_factory=dict)
    after: tuple[str, ...] = ()
    expect: dict | None = None
    defaults: dict | None = None
    free: tuple[str, ...] = ()
    result_errors: tuple[type[BaseException], ...] = ()

    @property
    def finished(self) -> bool:
        return (Path(self.out) / SUMMARY).is_file()

    @property
    def started(self) -> bool:
        return (Path(self.out) / CONFIG).is_file()


@dataclass
class RunOutcome:
    """What became of one run: finished, skipped (finished before) or failed (with its line)."""

    name: str
    out: str
    status: str
    summary: dict | None = None
    error: str | None = None
    seconds: float = 0.0


def resolve_target(target: str | Callable) -> Callable:
    """The function behind ``"package.module:function"`` (or ``target`` itself if callable)."""
    try:
        fn = import_path(target, what="function")
    except ConfigError as exc:
        raise ConfigError(f"sweep target {exc}") from exc
    if not callable(fn):
        raise ConfigError(f"sweep target {target!r} is not callable")
    return fn


def check_folder(spec: RunSpec) -> None:
    """ConfigError if ``spec.out`` holds a run made with other options than ``spec.expect``."""
    if spec.expect is None or not spec.started:
        return
    out = Path(spec.out)
    try:
        old = read_json(out / CONFIG)
        summary = read_json(out / SUMMARY) if spec.finished else {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{out}: unreadable run folder ({exc}); remove it or choose "
                          "another output folder") from exc
    want = dict(spec.expect)
    filled = {**{k: summary[k] for k in want if k in summary}, **old}
    diffs = config_differences(filled, want, spec.free, spec.defaults)
    filled = {**(spec.defaults or {}), **filled}  # what the message shows
    diffs = [k for k in diffs if k.split(".")[0] in want]
    if diffs:
        state = "a finished" if spec.finished else "a started"
        raise ConfigError(
            f"{out} holds {state} run of {spec.name} with other options ("
            + ", ".join(f"{k}: {config_value(filled, k)!r} -> {config_value(want, k)!r}"
                        for k in diffs[:4])
            + "); choose another output folder or remove it")


def error_line(exc: BaseException) -> str:
    """One line for a failed run: genlab's kind and message, else the exception's first line."""
    if isinstance(exc, GenlabError):
        return f"{exc.kind}: {exc}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def run_one(spec: RunSpec) -> dict:
    """One spec in this process, its own exception propagating: the spec's folder checked
    (``expect``), a finished run read back, a started one resumed; its summary."""
    _check_specs([spec])
    return _run(spec)


def _run(spec: RunSpec) -> dict:
    out = Path(spec.out)
    if spec.finished:
        return read_json(out / SUMMARY)
    fn = resolve_target(spec.target)
    try:
        return fn(spec.config, out, resume=spec.started, progress_bar=False, **spec.kwargs)
    except spec.result_errors as exc:
        summary = {"failed": getattr(exc, "kind", type(exc).__name__), "error": str(exc)}
        write_json(out / SUMMARY, summary)
        return summary


def execute(spec: RunSpec) -> RunOutcome:
    """Run one spec in this process (skip if finished, resume if started); never raises."""
    out = Path(spec.out)
    t0 = time.perf_counter()
    status = SKIPPED if spec.finished else FINISHED
    try:
        summary = _run(spec)
    except Exception as exc:  # noqa: BLE001 - a failed run is reported, the sweep goes on
        _keep_traceback(out)
        return RunOutcome(spec.name, str(out), FAILED, error=error_line(exc),
                          seconds=time.perf_counter() - t0)
    return RunOutcome(spec.name, str(out), status, summary=summary,
                      seconds=time.perf_counter() - t0)


def _keep_traceback(out: Path) -> None:
    try:
        if out.is_dir():
            (out / "error.txt").write_text(traceback.format_exc())
    except OSError:
        pass


def _init_worker(threads: int) -> None:
    import torch

    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("GENLAB_QUIET", "1")
    torch.set_num_threads(threads)


# -- executors -----------------------------------------------------------------------------

Done = Callable[[RunOutcome], None]


class InlineExecutor:
    """One run after another in this process."""

    def __init__(self, workers: int, threads: int, address: str | None):
        self.threads = threads

    def run(self, specs: Sequence[RunSpec], done: Done) -> None:
        for spec in specs:
            done(execute(spec))


class ProcessExecutor:
    """A pool of ``workers`` spawned processes; at most ``workers`` runs in flight.

    When a worker dies the pool breaks: the runs in flight are retried one by one in a
    process of their own (whose exit code names the culprit), the others continue in a
    new pool.
    """

    def __init__(self, workers: int, threads: int, address: str | None):
        self.workers, self.threads = workers, threads
        self.context = mp.get_context("spawn")

    def run(self, specs: Sequence[RunSpec], done: Done) -> None:
        queue = list(specs)
        while queue:
            suspects, queue = self._pool(queue, done)
            for spec in suspects:
                done(self._alone(spec))

    def _pool(self, queue: list[RunSpec], done: Done) -> tuple[list[RunSpec], list[RunSpec]]:
        """Run ``queue`` until it is empty or the pool breaks; (runs in flight, runs not begun)."""
        queue = list(queue)
        with cf.ProcessPoolExecutor(self.workers, mp_context=self.context,
                                    initializer=_init_worker, initargs=(self.threads,)) as pool:
            flight: dict[cf.Future, RunSpec] = {}
            while queue or flight:
                try:
                    while queue and len(flight) < self.workers:
                        flight[pool.submit(execute, queue[0])] = queue[0]
                        queue.pop(0)
                except cf.process.BrokenProcessPool:
                    return list(flight.values()), queue
                finished, _ = cf.wait(flight, return_when=cf.FIRST_COMPLETED)
                broken = []
                for future in finished:
                    spec = flight.pop(future)
                    try:
                        done(future.result())
                    except cf.process.BrokenProcessPool:
                        broken.append(spec)
                if broken:
                    return [*broken, *flight.values()], queue
        return [], []

    def _alone(self, spec: RunSpec) -> RunOutcome:
        """Run one spec in a fresh process; a death is reported with its exit code."""
        receive, send = self.context.Pipe(duplex=False)
        child = self.context.Process(target=_child, args=(spec, send, self.threads))
        t0 = time.perf_counter()
        child.start()
        send.close()
        try:
            outcome = receive.recv()
        except EOFError:
            outcome = None
        child.join()
        if outcome is None:
            code = child.exitcode
            how = f"killed by signal {-code}" if code is not None and code < 0 else \
                f"exit code {code}"
            outcome = RunOutcome(spec.name, str(spec.out), FAILED,
                                 error=f"worker process died ({how})",
                                 seconds=time.perf_counter() - t0)
        return outcome


def _child(spec: RunSpec, send, threads: int) -> None:
    _init_worker(threads)
    send.send(execute(spec))
    send.close()


class RayExecutor:
    """Ray tasks (one CPU each); a local instance unless ``address`` names a cluster."""

    def __init__(self, workers: int, threads: int, address: str | None):
        try:
            import ray
        except ImportError as exc:
            raise ConfigError("--executor ray needs the optional extra: "
                              "pip install 'genlab[ray]'") from exc
        self.ray, self.workers, self.threads, self.address = ray, workers, threads, address

    def run(self, specs: Sequence[RunSpec], done: Done) -> None:
        ray = self.ray
        started = not ray.is_initialized()
        if started:
            options = dict(include_dashboard=False, log_to_driver=False)
            if self.address:
                ray.init(address=self.address, **options)
            else:
                ray.init(num_cpus=self.workers, **options)
        try:
            task = ray.remote(num_cpus=1, max_retries=0)(_ray_execute)
            refs = {task.remote(spec, self.threads): spec for spec in specs}
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                for ref in ready:
                    spec = refs.pop(ref)
                    try:
                        done(ray.get(ref))
                    except ray.exceptions.RayError as exc:
                        done(RunOutcome(spec.name, str(spec.out), FAILED,
                                        error=f"ray task failed: {error_line(exc)}"))
        finally:
            if started:
                ray.shutdown()


def _ray_execute(spec: RunSpec, threads: int) -> RunOutcome:
    _init_worker(threads)
    return execute(spec)


EXECUTORS: Registry[Callable[[int, int, str | None], Any]] = Registry("executor")
EXECUTORS.register("process", ProcessExecutor)
EXECUTORS.register("local", ProcessExecutor)  # the commands' --executor name: this machine
EXECUTORS.register("inline", InlineExecutor)
EXECUTORS.register("ray", RayExecutor)


# -- the sweep -----------------------------------------------------------------------------

def _check_specs(specs: Sequence[RunSpec]) -> None:
    names, folders = set(), set()
    for spec in specs:
        folder = os.path.realpath(spec.out)
        if spec.name in names:
            raise ConfigError(f"sweep: two runs are named {spec.name!r}")
        if folder in folders:
            raise ConfigError(f"sweep: two runs would write the same folder {spec.out}")
        names.add(spec.name)
        folders.add(folder)
        if not callable(spec.target):
            resolve_target(spec.target)
    for spec in specs:
        missing = [dep for dep in spec.after if dep not in names]
        if missing:
            raise ConfigError(f"sweep: run {spec.name!r} needs {missing[0]!r}, which is not "
                              "in the sweep")
        check_folder(spec)


def waves(specs: Sequence[RunSpec], finished: set[str] | None = None) -> list[list[RunSpec]]:
    """The specs in dependency order: each wave needs only runs of earlier waves (or runs
    named in ``finished``).

    Specs listed after everything they need keep their list order: a new wave begins at
    the first spec that needs one of the current wave (so an inline sweep runs them exactly
    in list order). Otherwise each wave is every spec whose needs are met.
    """
    placed: set[str] = set(finished or ())
    if all(dep in placed or dep in {p.name for p in specs[:i]}
           for i, s in enumerate(specs) for dep in s.after):
        ordered: list[list[RunSpec]] = [[]]
        for spec in specs:
            if any(dep in {w.name for w in ordered[-1]} for dep in spec.after):
                ordered.append([])
            ordered[-1].append(spec)
        return [w for w in ordered if w]
    pending, result = list(specs), []
    while pending:
        wave = [s for s in pending if all(dep in placed for dep in s.after)]
        if not wave:
            raise ConfigError("sweep: the runs' dependencies form a circle ("
                              + ", ".join(s.name for s in pending) + ")")
        result.append(wave)
        placed.update(s.name for s in wave)
        pending = [s for s in pending if s.name not in placed]
    return result


def run_sweep(specs: Sequence[RunSpec], *, executor: str = "process", workers: int | None = None,
              threads: int | None = None, address: str | None = None,
              status: str | Path | None = None, progress_bar: bool | None = None,
              description: str = "sweep",
              on_outcome: Callable[[RunOutcome], None] | None = None) -> list[RunOutcome]:
    """Run every spec (finished ones skipped, started ones resumed); outcomes in spec order.

    ``workers`` defaults to the number of CPUs (at most the number of runs); ``threads``
    (torch threads per run) to CPUs / workers. ``on_outcome`` is called in this process
    with each run's outcome as soon as it is known (finished ones read back included).
    """
    EXECUTORS.canonical(executor)
    specs = list(specs)
    _check_specs(specs)
    workers, threads = _pool_size(workers, threads, len(specs))
    outcomes: dict[str, RunOutcome] = {}
    todo = _read_finished(specs, outcomes, on_outcome)
    runner = EXECUTORS.get(executor)(workers, threads, address)
    with progress(len(specs), description, progress_bar, completed=len(outcomes)) as tick:
        done = _recorder(specs, outcomes, status, on_outcome, tick)
        for wave in waves(todo, set(outcomes)):
            ready = []
            for spec in wave:
                failed = [d for d in spec.after if outcomes[d].status == FAILED]
                if failed:
                    done(RunOutcome(spec.name, str(spec.out), FAILED,
                                    error=f"needs {failed[0]}, which failed"))
                else:
                    ready.append(spec)
            if ready:
                runner.run(ready, done)
    result = [outcomes[s.name] for s in specs]
    if status is not None:
        write_sweep_status(status, result)
    return result


def _pool_size(workers: int | None, threads: int | None, runs: int) -> tuple[int, int]:
    """(workers, torch threads per run): the CPUs (at most ``runs``) and CPUs / workers
    unless given; ConfigError below 1."""
    cpus = os.cpu_count() or 1
    workers = workers or max(1, min(cpus, runs))
    threads = threads or max(1, cpus // workers)
    if workers < 1 or threads < 1:
        raise ConfigError(f"workers and threads must be >= 1, got {workers} and {threads}")
    return workers, threads


def _read_finished(specs: list[RunSpec], outcomes: dict[str, RunOutcome],
                   on_outcome: Callable[[RunOutcome], None] | None) -> list[RunSpec]:
    """The outcomes of the runs finished before, read back into ``outcomes`` (each reported
    to ``on_outcome``); returns the others, to run."""
    todo = []
    for spec in specs:
        if spec.finished:
            outcomes[spec.name] = execute(spec)  # finished before: reads the summary back
            if on_outcome is not None:
                on_outcome(outcomes[spec.name])
        else:
            todo.append(spec)
    return todo


def _recorder(specs: list[RunSpec], outcomes: dict[str, RunOutcome],
              status: str | Path | None, on_outcome: Callable[[RunOutcome], None] | None,
              tick) -> Callable[[RunOutcome], None]:
    """What is done with each outcome as it comes: kept, reported, written to ``status``,
    counted on the progress line (with the failures so far)."""
    def done(outcome: RunOutcome) -> None:
        outcomes[outcome.name] = outcome
        if on_outcome is not None:
            on_outcome(outcome)
        if status is not None:
            write_sweep_status(status, [outcomes[s.name] for s in specs
                                        if s.name in outcomes])
        failed = sum(o.status == FAILED for o in outcomes.values())
        if failed:
            tick(1, failed=failed)
        else:
            tick(1)
    return done


def write_sweep_status(path: str | Path, outcomes: Sequence[RunOutcome]) -> None:
    """sweep.json: one record per run (name, folder, status, error line, seconds, summary)."""
    counts = {k: sum(o.status == k for o in outcomes) for k in (FINISHED, SKIPPED, FAILED)}
    write_json(Path(path), {"counts": counts, "runs": [asdict(o) for o in outcomes]})
