"""Studies as lists of independent run specs, executed by one function that skips finished runs.

A :class:`RunSpec` is one training: a name, its full TrainConfig and its folder, plus the
names of the specs it needs first (a fine-tuning needs its pretraining). ``execute(specs)``
trains every spec whose folder has no summary.json yet (a started one resumes from its last
epoch checkpoint) and returns each spec's summary; a spec list can as well be handed to
any engine that runs independent jobs in parallel, respecting ``after``.

Trainings live in a *store*: a folder named after the config (``<label>-<hash of the
config>``), so two studies that need the same training share it and it runs once. A
study's own run folder logs one metrics line per finished spec and checkpoints their
names, so a killed study restarted with ``--resume`` continues where it stopped.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from genlab.core.errors import ConfigError, DivergedError
from genlab.core.progress import progress
from genlab.core.runs import SUMMARY, RunDir, read_json, write_json
from genlab.optim.studies.train import TrainConfig, train_digits


@dataclass(frozen=True)
class RunSpec:
    """One training of a study."""

    name: str
    config: TrainConfig
    folder: Path
    after: tuple[str, ...] = ()  # names of specs that must finish first


def job_key(values: dict) -> str:
    """A folder name from hyper-parameter values, e.g. ``lr0.1-batch32-optsgd``."""
    return "-".join(f"{k}{v}" for k, v in values.items())


def config_hash(cfg: TrainConfig) -> str:
    """A short stable hash of a training's options (its identity in a store).

    Only options that differ from TrainConfig's defaults enter it, so adding an option
    with a default keeps every stored training's name (changing a default does not:
    such a change must come with a new store).
    """
    defaults = asdict(TrainConfig())
    changed = {k: v for k, v in asdict(cfg).items() if defaults.get(k, object()) != v}
    text = json.dumps(changed, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def stored(store: Path, label: str, cfg: TrainConfig, after: tuple[str, ...] = ()) -> RunSpec:
    """The spec of ``cfg`` in ``store``: folder ``<label>-<config hash>``."""
    name = f"{label}-{config_hash(cfg)}"
    return RunSpec(name, cfg, Path(store) / name, after)


def expand(base: TrainConfig, axes: dict[str, list]) -> list[tuple[dict, TrainConfig]]:
    """Every combination of the axes' values applied to ``base`` (TrainConfig field names)."""
    names = list(axes)
    jobs = []
    for combo in itertools.product(*(axes[n] for n in names)):
        values = dict(zip(names, combo, strict=True))
        jobs.append((values, replace(base, **values)))
    return jobs


def run_one(spec: RunSpec) -> dict:
    """Train one spec unless its folder already holds a summary; its summary either way."""
    if (spec.folder / SUMMARY).exists():
        return read_json(spec.folder / SUMMARY)
    try:
        return train_digits(spec.config, spec.folder,
                            resume=(spec.folder / "config.json").exists(), progress_bar=False)
    except DivergedError as exc:  # a diverged setting is a result, not a crash
        summary = {"diverged": True, "error": str(exc)}
        write_json(spec.folder / SUMMARY, summary)
        return summary


class StudyLog:
    """A study's run folder as the log of its finished specs (one metrics line each, once)."""

    def __init__(self, run: RunDir):
        self.run = run
        self.state = run.resumed_state or {"done": []}

    def finished(self, name: str, record: dict) -> None:
        if name in self.state["done"]:
            return
        self.state["done"].append(name)
        self.run.log(record)
        self.run.save(self.state)


def default_store(out: str | Path) -> Path:
    """Where a study keeps its trainings by default: ``trainings`` next to its folder."""
    return Path(out).resolve().parent / "trainings"


def execute(specs: list[RunSpec], log: StudyLog | None = None, *,
            progress_bar: bool | None = None, name: str = "runs") -> dict[str, dict]:
    """Run the specs in order (skipping finished ones); {spec name: flat record}.

    Each record holds the spec's name and folder, its config and its summary figures;
    ``log`` (the study's folder) gets each newly finished spec once.
    """
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError("run specs must have distinct names")
    position = {n: i for i, n in enumerate(names)}
    for s in specs:
        for dep in s.after:
            if position.get(dep, len(specs)) >= position[s.name]:
                raise ConfigError(f"spec {s.name} needs {dep}, which is not listed before it")
    records: dict[str, dict] = {}
    with progress(len(specs), name, progress_bar) as tick:
        for spec in specs:
            summary = run_one(spec)
            record = {"name": spec.name, "folder": str(spec.folder),
                      **{k: v for k, v in asdict(spec.config).items() if k != "measure"},
                      **flat(summary)}
            records[spec.name] = record
            if log is not None:
                log.finished(spec.name, record)
            tick(1, last=spec.name)
    return records


def run_grid(run: RunDir, jobs: list[tuple[dict, TrainConfig]], *,
             progress_bar: bool | None = None, name: str = "grid") -> list[dict]:
    """Train every job in ``run``/trainings (skipping finished ones); records = values +
    summary figures."""
    folder = run.path / "trainings"
    folder.mkdir(exist_ok=True)
    specs = [RunSpec(job_key(values), cfg, folder / job_key(values)) for values, cfg in jobs]
    records = execute(specs, StudyLog(run), progress_bar=progress_bar, name=name)
    return [{"key": spec.name, **values, **{k: v for k, v in records[spec.name].items()
                                            if k not in values}}
            for spec, (values, _) in zip(specs, jobs, strict=True)]


def flat(summary: dict) -> dict:
    """Summary figures with the measures lifted to the top level (no nested dicts)."""
    out = {k: v for k, v in summary.items() if not isinstance(v, dict)}
    measures = summary.get("measures", {})
    out.update({k: v for k, v in measures.items() if isinstance(v, (int, float))})
    return out


def folder_of(run_path: Path, values: dict) -> Path:
    return Path(run_path) / "trainings" / job_key(values)
