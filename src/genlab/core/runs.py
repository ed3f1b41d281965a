"""Run folders: config.json, metrics.jsonl, atomic checkpoints, summary.json, plots.

Layout of a run folder (every command that produces results writes one)::

    config.json          every resolved option, genlab version, seed
    metrics.jsonl        one JSON object per epoch or step
    checkpoint.pt        written to a temporary file, then renamed (never half-written)
    checkpoint.prev.pt   the checkpoint before it (a damaged newest one falls back to it)
    summary.json         final figures, and how many processes ran (written last: its
                         presence marks a finished run)
    *.png                plots; report.html / report.md where the command makes a report
    tensorboard/         with --tensorboard: the metrics as TensorBoard events
    .lock                held by the process writing the folder

A run killed at any point restarts with ``resume=True``: the newest checkpoint that
passes its checksums is restored and metrics logged after it are dropped.

What a run folder may be (:func:`check_run_folder`, before anything is written): a new or
empty folder (names that begin with a dot do not count, nor sub-folders that hold genlab
runs: a bench's finished runs copied in to be reused), or a genlab run (its config.json
records ``genlab_version``) of the same command. A folder holding other files, or a
config.json that genlab did not write, is refused (ConfigError); a run of another command
(``command`` in its config.json, else the kind of its checkpoint's model record) is refused
naming that command (RunExistsError); a resume with other options names the options that
differ (ConfigError). CheckpointError is kept for a damaged run: an unreadable config.json or
checkpoint.

Under torchrun only rank 0 writes (config, metrics, checkpoints, summary, plots); the
other ranks keep their metrics in memory, resume from the same checkpoint as rank 0,
and raise the same error when rank 0 refuses the folder.
"""

from __future__ import annotations

import io
import json
import os
import sys
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from genlab.core import errors as _errors
from genlab.core.errors import CheckpointError, ConfigError, GenlabError, RunExistsError
from genlab.core.parallel.distributed import broadcast_object, init_distributed, is_distributed
from genlab.core.storage import locks
from genlab.core.storage.checkpoints import (
    CHECKPOINT,
    PREVIOUS,
    load_checkpoint,
    load_latest,
    save_checkpoint,
)
from genlab.core.storage.files import (
    append_line,
    atomic_write_bytes,
    jsonable,
    output_errors,
    read_json,
    write_json,
)
from genlab.version import __version__

__all__ = ["CHECKPOINT", "CONFIG", "KIND_KEY", "METRICS", "PREVIOUS", "SUMMARY", "RunDir",
           "atomic_write_bytes", "check_run_folder", "config_differences", "config_value",
           "load_checkpoint", "other_run_message", "read_json", "register_config_upgrade",
           "run_kind_of", "save_checkpoint", "upgraded_config", "write_json"]

CONFIG = "config.json"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
VERSION_KEY = "genlab_version"  # every run's config.json has it: what marks a genlab run
KIND_KEY = "command"  # the command that made a run ("nas search", "optim train", ...)
DIFFERENCES_SHOWN = 3  # options named when a resume differs (then "and N more")

# Options that may differ between a run and its resumption (a command adds its own through
# RunDir's ``resume_free``).
_RESUME_FREE_KEYS = {"resume", "out", "progress", "device", "tensorboard"}


def _tensorboard_requested(flag: bool | None) -> bool:
    if flag is not None:
        return flag
    return os.environ.get("GENLAB_TENSORBOARD", "").lower() in ("1", "true", "yes")


def warn(message: str) -> None:
    """One warning line on stderr."""
    print(f"genlab: warning: {message}", file=sys.stderr)


# functions config -> config that lay out an older run's config.json as this version's (an
# option folded into another); each returns a config not of its kind unchanged
CONFIG_UPGRADES: list[Callable[[dict], dict]] = []


def register_config_upgrade(upgrade: Callable[[dict], dict]) -> Callable[[dict], dict]:
    """Add ``upgrade`` (config -> config) to those every stored config passes through before
    it is compared (a resume, a sweep's folder check); called where the options moved."""
    if upgrade not in CONFIG_UPGRADES:
        CONFIG_UPGRADES.append(upgrade)
    return upgrade


def upgraded_config(config: dict) -> dict:
    """``config`` (a stored run's) laid out as this version's (CONFIG_UPGRADES, in order)."""
    for upgrade in CONFIG_UPGRADES:
        config = upgrade(config)
    return config


def config_differences(old: dict, new: dict, free: Iterable[str] = (),
                       defaults: dict | None = None) -> list[str]:
    """Options whose values differ between two run configs (those free to differ on resume,
    ``free`` among them, and the version, are not compared). ``old`` is first laid out as
    this version's (:func:`upgraded_config`). An option missing from ``old`` (added since
    that run started) counts as its value in ``defaults``. A nested mapping on both sides (a
    bench's search template) is compared option by option, named ``outer.inner`` (in
    ``free`` and in the result)."""
    old = upgraded_config(old)
    new = dict(jsonable(new))
    defaults = dict(jsonable(defaults or {}))
    old = {**defaults, **old}
    skip = _RESUME_FREE_KEYS | set(free) | {VERSION_KEY, KIND_KEY}
    diffs = []
    for k in sorted(set(old) | set(new)):
        if k in skip:
            continue
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict) and (a or b):
            inner = {f[len(k) + 1:] for f in free if f.startswith(f"{k}.")}
            diffs += [f"{k}.{d}" for d in config_differences(
                a, b, inner, defaults.get(k) if isinstance(defaults.get(k), dict) else None)]
        elif a != b:
            diffs.append(k)
    return diffs


def config_value(config: dict, name: str):
    """The value of option ``name`` in ``config`` (``outer.inner`` for a nested one)."""
    value: Any = config
    for part in name.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _article(kind: str) -> str:
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def other_run_message(folder: str | Path, other: str, kind: str) -> str:
    """The line refusing a ``kind`` command's --out that holds another command's run."""
    return f"{folder} is {_article(other)} run; {kind} needs its own --out"


def run_kind_of(folder: str | Path, config: dict) -> str | None:
    """The command that made the run in ``folder`` (config.json ``config``): its ``command``
    entry, else the kind of its checkpoint's model record; None when neither tells."""
    if isinstance(config.get(KIND_KEY), str):
        return config[KIND_KEY]
    from genlab.core.storage.checkpoints import MODEL_RECORD

    try:
        state = load_checkpoint(Path(folder) / CHECKPOINT)
    except (CheckpointError, OSError, RuntimeError, ValueError):
        return None
    record = state.get(MODEL_RECORD) if isinstance(state, dict) else None
    return str(record["kind"]) if isinstance(record, dict) and "kind" in record else None


def _is_run(folder: Path) -> bool:
    try:
        config = read_json(folder / CONFIG)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and VERSION_KEY in config


def _holds_runs(path: Path) -> bool:
    """A sub-folder that is, or holds up to two levels below, genlab runs only (a bench's
    finished runs copied in to be reused)."""
    if not path.is_dir():
        return False
    found = [c.parent for pattern in ("config.json", "*/config.json", "*/*/config.json")
             for c in path.glob(pattern)]
    return bool(found) and all(_is_run(f) for f in found)


def check_run_folder(path: str | Path, kind: str | None = None) -> dict | None:
    """What ``path`` may be as a run folder (module doc), checked before anything is written:
    None for a new or empty folder, the run's config.json for a genlab run (of ``kind``,
    when given and the run records its command). ConfigError for a folder that holds other
    files or a config.json genlab did not write; RunExistsError for another command's run;
    CheckpointError for an unreadable config.json."""
    folder = Path(path)
    if not folder.is_dir():
        return None
    what = f"a run of {kind}" if kind else "a genlab run"
    advice = f"--out must be a new or empty folder, or {what}"
    config_file = folder / CONFIG
    if not config_file.is_file():
        names = sorted(p.name for p in folder.iterdir()
                       if not p.name.startswith(".") and not _holds_runs(p))
        if not names:
            return None
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if names[3:] else "")
        raise ConfigError(f"{folder} is not a genlab run folder (it holds {shown}); {advice}")
    try:
        config = read_json(config_file)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{config_file}: unreadable ({exc})") from exc
    if not isinstance(config, dict) or VERSION_KEY not in config:
        raise ConfigError(f"{folder} is not a genlab run folder (its {CONFIG} was not written "
                          f"by genlab: no {VERSION_KEY}); {advice}")
    if kind is not None:
        other = run_kind_of(folder, config)
        if other is not None and other != kind:
            raise RunExistsError(other_run_message(folder, other, kind))
    return config


def _differences_text(old: dict, new: dict, diffs: list[str]) -> str:
    shown = ", ".join(f"{k}: {config_value(old, k)!r} -> {config_value(new, k)!r}"
                      for k in diffs[:DIFFERENCES_SHOWN])
    more = len(diffs) - DIFFERENCES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


class RunDir:
    """One run's output folder.

    ``RunDir(out, config)`` creates the folder and writes config.json. A folder that
    already holds a run is never overwritten: pass ``resume=True`` to continue it
    (its config must match, apart from options such as the device) or choose
    another folder. A folder being written by another live process is refused
    (RunInUseError); a folder that is not a genlab run, or (``kind``: the command, recorded
    in config.json as ``command``) another command's run, is refused before anything is
    written (:func:`check_run_folder`). ``resume_free`` names further options that may
    change on resume (a path to a lookup table, say); ``defaults`` gives the values of
    options newer than a run's config.json (they compare as these). ``tensorboard=True`` (or
    GENLAB_TENSORBOARD=1) mirrors every metrics record as TensorBoard scalars.
    """

    def __init__(self, path: str | Path, config: dict, *, resume: bool = False,
                 tensorboard: bool | None = None, resume_free: Iterable[str] = (),
                 defaults: dict | None = None, kind: str | None = None):
        self.path = Path(path)
        self.kind = kind or (config.get(KIND_KEY) if isinstance(config.get(KIND_KEY), str)
                             else None)  # the studies record theirs as "command"
        self.resume_free = tuple(resume_free)
        self.defaults = dict(defaults or {})
        self.config = dict(jsonable(config))
        self.config.setdefault(VERSION_KEY, __version__)
        if kind is not None:
            self.config.setdefault(KIND_KEY, kind)
        self.resumed_state: dict | None = None
        self.checkpoint_name: str | None = None
        info = init_distributed()
        self.is_main, self.processes = info.is_main, info.world_size
        self._records: list[dict] = []
        self._tensorboard: Any = None
        outcome: tuple | None = None
        failure: Exception | None = None
        if self.is_main:
            try:
                outcome = ("ok", *self._open_as_writer(resume))
            except Exception as exc:  # noqa: BLE001 - the other ranks must hear of any failure
                if not is_distributed():
                    raise
                outcome, failure = ("error", type(exc).__name__, str(exc)), exc
        outcome = broadcast_object(outcome)
        if outcome[0] == "error":
            if failure is not None:
                raise failure
            kind = getattr(_errors, outcome[1], None)
            if not (isinstance(kind, type) and issubclass(kind, GenlabError)):
                raise RuntimeError(f"rank 0 could not open {self.path}: {outcome[2]}")
            raise kind(outcome[2])
        if not self.is_main:
            self._open_as_reader(outcome[1], outcome[2])
        elif _tensorboard_requested(tensorboard):
            self._open_tensorboard()

    # -- opening -----------------------------------------------------------------
    def _open_as_writer(self, resume: bool) -> tuple[str | None, int]:
        """Create or reopen the folder (rank 0); returns (checkpoint used, metric lines kept)."""
        locks.check_free(self.path)  # a folder another process writes is named as such first
        check_run_folder(self.path, self.kind)  # before anything is written
        with output_errors(self.path, "cannot create the run folder"):
            self.path.mkdir(parents=True, exist_ok=True)
        key = locks.acquire(self.path)
        self._finalizer = weakref.finalize(self, locks.release, key)
        existing = self.path / CONFIG
        if not existing.exists():
            if resume:
                warn(f"{self.path} holds no run to resume; starting a new one")
            write_json(existing, self.config)
            self._remove_temporaries()
            return None, 0
        try:
            old = read_json(existing)
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{existing}: unreadable ({exc})") from exc
        if not resume:
            raise RunExistsError(f"{self.path} already holds a run; pass --resume to continue "
                                 "it or choose another --out")
        self._check_same_config(old)
        state, name, problems = load_latest(self.path)
        for problem in problems:
            warn(f"{problem}; resuming from {name}")
        self.resumed_state, self.checkpoint_name = state, name
        keep = int(state.get("metrics_lines", 0)) if state is not None else 0
        self._truncate_metrics(keep)
        self._remove_temporaries()
        return name, keep

    def _open_as_reader(self, checkpoint: str | None, kept: int) -> None:
        """Ranks > 0: the checkpoint rank 0 chose, and the metric lines it kept (read only)."""
        if checkpoint is not None:
            self.resumed_state = load_checkpoint(self.path / checkpoint)
            self.checkpoint_name = checkpoint
        if kept:
            lines = (self.path / METRICS).read_text().splitlines()[:kept]
            self._records = [json.loads(ln) for ln in lines]

    def _open_tensorboard(self) -> None:
        from genlab.core.storage.tensorboard import TensorBoardMirror, record_step

        kept = self.metrics()
        purge = record_step(kept[-1], len(kept) - 1) + 1 if kept else None
        self._tensorboard = TensorBoardMirror(self.path, purge_step=purge)

    def _check_same_config(self, old: dict) -> None:
        old = upgraded_config(old)
        diffs = config_differences(old, self.config, self.resume_free, self.defaults)
        if diffs:
            detail = _differences_text(old, self.config, diffs)
            raise ConfigError(
                f"{self.path} was run with other options ({detail}); a resume keeps the run's "
                f"own: leave them out (--out {self.path} --resume alone continues the run) or "
                "choose another --out")

    def _truncate_metrics(self, keep: int) -> None:
        """Drop metric lines written after the checkpoint, so resumed logs have no duplicates."""
        metrics = self.path / METRICS
        if not metrics.exists():
            return
        lines = metrics.read_text().splitlines(keepends=True)
        complete = [ln for ln in lines if ln.endswith("\n")]
        if len(complete) != keep or len(lines) != len(complete):
            atomic_write_bytes(metrics, "".join(complete[:keep]).encode())

    def _remove_temporaries(self) -> None:
        """Temporary files a killed writer left behind (this process holds the lock)."""
        for tmp in self.path.glob(".*.tmp"):
            try:
                tmp.unlink()
            except OSError:
                pass

    # -- writing -----------------------------------------------------------------
    def file(self, name: str) -> Path:
        return self.path / name

    def log(self, record: dict) -> None:
        """Append one JSON object to metrics.jsonl (flushed at once; rank 0 writes)."""
        line = json.dumps(jsonable(record))
        if not self.is_main:
            self._records.append(json.loads(line))
            return
        append_line(self.path / METRICS, line)
        if self._tensorboard is not None:
            self._tensorboard.write(json.loads(line), self.metrics_lines() - 1)

    def metrics(self) -> list[dict]:
        if not self.is_main:
            return [dict(r) for r in self._records]
        path = self.path / METRICS
        if not path.exists():
            return []
        return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]

    def metrics_lines(self) -> int:
        if not self.is_main:
            return len(self._records)
        path = self.path / METRICS
        return len(path.read_text().splitlines()) if path.exists() else 0

    def save(self, state: dict) -> None:
        """Write checkpoint.pt atomically (the previous one kept), with its metric line count."""
        if not self.is_main:
            return
        state = dict(state)
        state["metrics_lines"] = self.metrics_lines()
        save_checkpoint(self.path / CHECKPOINT, state, keep_previous=self.path / PREVIOUS)

    def finished_summary(self) -> dict | None:
        """The summary of the run this folder already finished (None when it has none).

        A command resumed on a finished run returns it and rewrites nothing:
        ``if (done := run.finished_summary()) is not None: run.close(); return done``.
        """
        path = self.path / SUMMARY
        if not path.is_file():
            return None
        try:
            return read_json(path)
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{path}: unreadable ({exc}); remove it to finish the run "
                                  "again") from exc

    def sanity_warning(self, summary: dict, text: str) -> None:
        """A run that does not beat its sanity row: ``text`` goes into ``summary["warning"]``
        and, once (rank 0), onto stderr as a warning line."""
        summary["warning"] = text
        if self.is_main:
            warn(text)

    def write_summary(self, summary: dict) -> None:
        """summary.json (rank 0 writes); adds ``processes`` (how many ran) to ``summary`` itself.

        The run is finished: its superseded checkpoint (checkpoint.prev.pt) is removed, so a
        finished folder holds one checkpoint, and the folder is released (``close``): a
        library caller leaves no .lock behind however long it keeps the object. Nothing
        writes a finished folder again (``finished_summary`` answers a resume)."""
        summary["processes"] = self.processes
        if self.is_main:
            write_json(self.path / SUMMARY, summary)
            try:
                (self.path / PREVIOUS).unlink(missing_ok=True)
            except OSError:
                pass  # a read-only folder keeps it: harmless
        self.close()

    def save_figure(self, fig, name: str) -> Path:
        """Save a matplotlib figure as PNG in the run folder (atomically) and close it."""
        import matplotlib.pyplot as plt

        target = self.path / name
        try:
            if self.is_main:
                buffer = io.BytesIO()
                fig.savefig(buffer, format=target.suffix.lstrip(".") or "png", dpi=110,
                            bbox_inches="tight")
                atomic_write_bytes(target, buffer.getvalue())
        finally:
            plt.close(fig)
        return target

    def close(self) -> None:
        """Flush TensorBoard events and release the folder's lock, removing the lock file
        (also done when collected and at exit)."""
        if self._tensorboard is not None:
            self._tensorboard.close()
            self._tensorboard = None
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
