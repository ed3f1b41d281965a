"""Studies as lists of trainings, run by genlab.core.sweep (finished ones skipped).

A training is a :class:`genlab.core.sweep.RunSpec` whose target is :func:`train_or_diverge`
(train_digits; a diverged setting is a result, summary ``{"diverged": True, "error": ...}``)
and whose config is its full TrainConfig; ``after`` names the trainings it needs first (a
fine-tuning needs its pretraining). ``execute(specs)`` runs them through ``run_sweep``
(inline, one after another, as the studies always ran): a spec whose folder holds
summary.json is read back, a started one resumes from its last epoch checkpoint; it
returns each spec's flat record.

Trainings live in a *store*: a folder named after the config (``<label>-<hash of the
config>``), so two studies that need the same training share it and it runs once. A
study's own run folder logs one metrics line per finished spec and checkpoints their
names, so a killed study restarted with ``--resume`` continues where it stopped.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, replace
from pathlib import Path

from genlab.core.errors import DivergedError, GenlabError
from genlab.core.runs import SUMMARY, RunDir, write_json
from genlab.core.sweep import FAILED, RunSpec, run_sweep
from genlab.optim.training.train import TrainConfig, train_digits


def train_or_diverge(cfg: TrainConfig, out: str | Path, *, resume: bool = False,
                     progress_bar: bool | None = False) -> dict:
    """train_digits, where a diverged setting is a result: summary {"diverged": True, "error"}."""
    try:
        return train_digits(cfg, out, resume=resume, progress_bar=progress_bar)
    except DivergedError as exc:
        summary = {"diverged": True, "error": str(exc)}
        write_json(Path(out) / SUMMARY, summary)
        return summary


def training(name: str, cfg: TrainConfig, folder: Path, after: tuple[str, ...] = ()) -> RunSpec:
    """The sweep spec of one training of a study."""
    return RunSpec(name, train_or_diverge, cfg, Path(folder), after=tuple(after))


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
    return training(name, cfg, Path(store) / name, after)


def expand(base: TrainConfig, axes: dict[str, list]) -> list[tuple[dict, TrainConfig]]:
    """Every combination of the axes' values applied to ``base`` (TrainConfig field names)."""
    names = list(axes)
    jobs = []
    for combo in itertools.product(*(axes[n] for n in names)):
        values = dict(zip(names, combo, strict=True))
        jobs.append((values, replace(base, **values)))
    return jobs


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


def open_study(command: str, cfg, out: str | Path, store: str | Path | None, *,
               resume: bool) -> tuple[RunDir, StudyLog, Path]:
    """A study's run folder: its options validated (``cfg.validate()``), the trainings' store
    (``store``, else the config's, else beside ``out``), config.json with the command's name
    and every option, and the log of its trainings: (run, log, store)."""
    cfg.validate()
    where = Path(store or cfg.store or default_store(out))
    run = RunDir(out, {"command": command, **asdict(cfg), "store": str(where)}, resume=resume)
    return run, StudyLog(run), where


def execute(specs: list[RunSpec], log: StudyLog | None = None, *,
            progress_bar: bool | None = None, name: str = "runs") -> dict[str, dict]:
    """Run the specs (run_sweep, inline; finished ones read back); {spec name: flat record}.

    Each record holds the spec's name and folder, its config and its summary figures;
    ``log`` (the study's folder) gets each newly finished spec once. A training that fails
    (other than by diverging) fails the study with its error line.
    """
    by_name = {spec.name: spec for spec in specs}
    records: dict[str, dict] = {}

    def finished(outcome) -> None:  # each training's line as soon as it ends
        if outcome.status == FAILED:
            return
        spec = by_name[outcome.name]
        records[spec.name] = {"name": spec.name, "folder": str(spec.out),
                              **{k: v for k, v in asdict(spec.config).items()
                                 if k != "measure"},
                              **flat(in_percent(outcome.summary))}
        if log is not None:
            log.finished(spec.name, records[spec.name])

    outcomes = run_sweep(specs, executor="inline", progress_bar=progress_bar,
                         description=name, on_outcome=finished)
    failed = [o for o in outcomes if o.status == FAILED]
    if failed:
        raise GenlabError(f"training {failed[0].name} failed: {failed[0].error}")
    return {spec.name: records[spec.name] for spec in specs}


def run_grid(run: RunDir, jobs: list[tuple[dict, TrainConfig]], *,
             progress_bar: bool | None = None, name: str = "grid") -> list[dict]:
    """Train every job in ``run``/trainings (skipping finished ones); records = values +
    summary figures."""
    folder = run.path / "trainings"
    folder.mkdir(exist_ok=True)
    specs = [training(job_key(values), cfg, folder / job_key(values)) for values, cfg in jobs]
    records = execute(specs, StudyLog(run), progress_bar=progress_bar, name=name)
    return [{"key": spec.name, **values, **{k: v for k, v in records[spec.name].items()
                                            if k not in values}}
            for spec, (values, _) in zip(specs, jobs, strict=True)]


def in_percent(summary: dict) -> dict:
    """A training's summary with its accuracies in percent. A summary written before they
    were (it has accuracies but no ``constant_test_acc``: a store filled by an earlier
    genlab) has every ``*_acc*`` figure scaled by 100, so one table never mixes units."""
    if "train_acc" not in summary or "constant_test_acc" in summary:
        return summary
    return {k: 100 * v if "_acc" in k and isinstance(v, (int, float))
            and not isinstance(v, bool) else v for k, v in summary.items()}


def flat(summary: dict) -> dict:
    """Summary figures with the measures lifted to the top level (no nested dicts)."""
    out = {k: v for k, v in summary.items() if not isinstance(v, dict)}
    measures = summary.get("measures", {})
    out.update({k: v for k, v in measures.items() if isinstance(v, (int, float))})
    return out


def folder_of(run_path: Path, values: dict) -> Path:
    return Path(run_path) / "trainings" / job_key(values)
