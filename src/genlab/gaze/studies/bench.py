"""`genlab gaze bench`: MoEGaze against the baseline in the synthetic worlds.

The bench is a list of run specs (genlab.gaze.studies.runs), each a run folder under
``out/runs``; finished runs are skipped when it is rerun and interrupted ones resumed.
For every world (genlab.gaze.protocol.WORLDS) and seed:

* each source: baseline and MoEGaze on all of its training data and on 10% of it (10%
  of the images, every subject kept; with ``small_subjects`` also 10% of the subjects
  with all their images), each tested on the held-out source subjects and on *both* of
  the source's targets;
* reference rows: a baseline trained on another population of each target (the
  in-domain reference) and, in the appearance world, the oracle gate: MoEGaze routed by
  the true appearance cluster (one expert per cluster), judged on held-out source subjects
  against the baseline, before any target figure is read;
* the control world's two targets (label shift only, capture shift only) at 100%.

Every run of a seed shares initialisation of the shared parts and batch order, so
differences are paired by seed; intervals bootstrap over seeds and test subjects
(genlab.gaze.studies.stats). Nothing is selected on targets: every setting is fixed in advance.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from genlab.core.errors import ConfigError
from genlab.core.options import (
    Options,
    check_options,
    command_line,
    field_default,
    option,
    option_like,
    spec_of,
    takes_options,
)
from genlab.core.results.files import current_commit, write_result
from genlab.core.runs import write_json
from genlab.core.studies import Study, register_study
from genlab.core.sweep import RunSpec
from genlab.gaze.config import DESIGN, design_of
from genlab.gaze.protocol import WORLDS, SyntheticCache
from genlab.gaze.studies.runs import run_study, timed_report, train_spec
from genlab.gaze.studies.sizing import load_pilots, pilot_dicts, plan, plan_lines
from genlab.gaze.studies.tables import bench_tables, plot_main
from genlab.gaze.synth.domains import get_domain
from genlab.gaze.train import GazeTrainConfig

__all__ = ["BenchCommandConfig", "BenchConfig", "bench_specs", "run_bench"]


def _train(name: str, **changes):
    """The option ``name`` as gaze train declares it (its help, limits), with ``changes``."""
    return option_like(GazeTrainConfig, name, **changes)


#: the options of gaze train that the bench does not take: it sets them for each run itself
#: (``workers`` is an option of the bench's own, runs trained at the same time; its runs keep
#: gaze train's DataLoader workers)
SET_PER_RUN = ("model", "source", "targets", "fraction", "subject_fraction", "seed", "workers")


@dataclass
@takes_options(GazeTrainConfig, sets=SET_PER_RUN)
class BenchConfig(Options):
    """Sizes of the bench (defaults: the tables of docs/results.md), and every option of gaze
    train but those it sets for each run (:data:`SET_PER_RUN`), at gaze train's defaults
    except those declared here. MoEGaze's design (gaze.config.DESIGN) reaches its MoEGaze
    runs only (the oracle keeps the defaults).

    ``seeds``: the seeds of the compared runs, ``reference_seeds`` those of the
    trained-on-target references (lists; an int n, as before, means seeds 0..n-1).
    """

    worlds: list[str] = option(factory=lambda: list(WORLDS), parse="list", choices=WORLDS,
                               help="Worlds.")
    seeds: list[int] = option(factory=lambda: [0, 1, 2, 3, 4], parse="seeds",
                              help="Seeds of the compared runs.")
    reference_seeds: list[int] = option(factory=lambda: [0, 1, 2], parse="seeds",
                                        help="Seeds of the trained-on-target references.")
    steps: int = _train("steps", default=300, help="Optimiser steps per run.")
    small_fraction: float = option(0.1, gt=0, help="The small share of the source data "
                                   "(the paper's 10%), in (0, 1).")
    small_subjects: bool = option(False, help="Also train baseline and MoEGaze on the small "
                                  "share of the source training *subjects*, every image of "
                                  "each (the other reading of the paper's 10%).")
    workers: int = option(2, gt=0, help="Runs trained at the same time (processes).")
    n_boot: int = option(2000, gt=0, help="Bootstrap resamples of the intervals.")
    # sizing before the runs (genlab.gaze.studies.sizing)
    mde: float = option(0.2, gt=0, help="The minimum detectable effect (degrees) the sizing "
                        "plans for.")
    power: float = option(0.8, gt=0, le=0.999, help="The power at that effect (paired t over "
                          "seeds, two-sided alpha 0.05).")
    size_from: str = option("", help="Pilot of the sizing: a finished bench's bench.json (or "
                            "a results file it wrote); the plan is printed before the runs.")
    target_scale: int = option(0, ge=0, help="Render k times each target's subjects and "
                               "images (0: as the plan of --size-from needs, else 1).")

    def validate(self) -> None:
        check_options(self)  # types, choices (worlds), limits; seeds
        replace(self.base(), model="moegaze", **design_of(self)).validate()  # gaze train's checks
        if not 0 < self.small_fraction < 1:
            raise ConfigError(f"small_fraction must be in (0, 1), got {self.small_fraction}")

    @classmethod
    def quick(cls) -> BenchConfig:
        """The appearance world only, seeds 0 and 1, short runs: a smoke version in minutes."""
        return cls(**QUICK)

    def base(self) -> GazeTrainConfig:
        """Every run's options before its own (model, data, share, seed): those taken from
        gaze train, MoEGaze's design left at its defaults, the targets at the plan's scale."""
        values = self.wrapping.values(self, but=DESIGN)
        values["target_scale"] = max(1, self.target_scale)
        return GazeTrainConfig(**values)


#: the options `genlab gaze bench --quick` changes (BenchConfig.quick)
QUICK = {"worlds": ["appearance"], "seeds": [0, 1], "reference_seeds": [0], "steps": 60,
         "train_count": 800, "test_count": 300, "workers": 1, "n_boot": 500}


def _preset(name: str):
    """A bench option that --quick changes: unset (None) unless given."""
    default = field_default(BenchConfig.__dataclass_fields__[name])
    shown = ",".join(map(str, default)) if isinstance(default, list) else default
    quick = QUICK[name]
    quick = ",".join(map(str, quick)) if isinstance(quick, list) else quick
    return option_like(BenchConfig, name, default=None,
                       help=f"{spec_of(BenchConfig.__dataclass_fields__[name]).help[:-1]} "
                            f"(default {shown}; --quick: {quick}).")


@dataclass
@takes_options(BenchConfig)
class BenchCommandConfig:
    """Every option of `genlab gaze bench`: the bench's (those --quick changes are unset
    unless given) and how its runs are executed (run_bench's, not the bench's config)."""

    quick: bool = option(False, help="The quick preset: the appearance world, seeds 0,1 "
                         "(reference 0), short runs.")
    worlds: list[str] | None = _preset("worlds")
    seeds: list[int] | None = _preset("seeds")
    reference_seeds: list[int] | None = _preset("reference_seeds")
    steps: int | None = _preset("steps")
    train_count: int | None = _preset("train_count")
    test_count: int | None = _preset("test_count")
    workers: int | None = _preset("workers")
    n_boot: int | None = _preset("n_boot")
    executor: str = option("local", choices=("local", "inline", "ray"), help="Where the runs "
                           "train: local (this machine: in this process with one worker, else "
                           "a process pool), inline, ray.")
    address: str | None = option(None, help="HOST:PORT of a Ray cluster (--executor ray; "
                                 "default a local Ray instance).")

    def bench(self) -> BenchConfig:
        """The bench these options describe (the quick preset under the given options)."""
        given = {f.name: getattr(self, f.name) for f in fields(BenchConfig)
                 if getattr(self, f.name) is not None}
        return replace(BenchConfig.quick() if self.quick else BenchConfig(), **given)

    def resolved(self) -> BenchCommandConfig:
        """These options with every one --quick changes set (what --print-config shows)."""
        bench = self.bench()
        return replace(self, **{k: getattr(bench, k) for k in QUICK})


def sources_of(world: str) -> dict[str, list[str]]:
    """Each source of a world with the targets of its tasks (in task order)."""
    out: dict[str, list[str]] = {}
    for source, target in WORLDS.get(world).values():
        out.setdefault(source, []).append(target)
    return out


def clusters_of(domain: str) -> int:
    return len(get_domain(domain).clusters)


def bench_specs(cfg: BenchConfig, out: str | Path) -> list[RunSpec]:
    """Every run of the bench (seed-major, so a partial bench covers every task)."""
    cfg.validate()
    runs = Path(out) / "runs"
    base, specs = cfg.base(), []
    cache = SyntheticCache(Path(out) / "data")

    def add(name: str, **kw) -> None:
        specs.append(train_spec(name, replace(base, **kw), runs / name, cache=cache,
                                plots=False))

    for seed in sorted({*cfg.seeds, *cfg.reference_seeds}):
        for world in cfg.worlds:
            fractions = (1.0,) if world == "control" else (1.0, cfg.small_fraction)
            for source, targets in sources_of(world).items() if seed in cfg.seeds else ():
                for model in ("baseline", "moegaze"):
                    variant = design_of(cfg) if model == "moegaze" else {}
                    for fr in fractions:
                        add(f"{world}__{source}__{model}__f{fr:g}__s{seed}", model=model,
                            source=source, targets=targets, fraction=fr, seed=seed,
                            **variant)
                    if cfg.small_subjects and len(fractions) > 1:  # "p": people
                        fr = cfg.small_fraction
                        add(f"{world}__{source}__{model}__p{fr:g}__s{seed}", model=model,
                            source=source, targets=targets, subject_fraction=fr, seed=seed,
                            **variant)
                k = clusters_of(source)
                if k:
                    add(f"{world}__{source}__oracle__f1__s{seed}", model="moegaze",
                        routing="oracle", experts=k, source=source, targets=targets, seed=seed)
            if seed in cfg.reference_seeds:
                for target in dict.fromkeys(t for _, t in WORLDS.get(world).values()):
                    add(f"{world}__{target}__reference__f1__s{seed}", model="baseline",
                        source=target, targets=[target], seed=seed)
    return specs


def size_before(cfg, say=print):
    """The plan of ``cfg.size_from`` (None without it), printed through ``say``, and ``cfg``
    with ``target_scale`` resolved (0: the plan's, 1 without a pilot)."""
    if not cfg.size_from:
        return None, replace(cfg, target_scale=max(1, cfg.target_scale))
    pilots = load_pilots(cfg.size_from)
    sized = plan(pilots, mde=cfg.mde, power=cfg.power, seeds_run=len(cfg.seeds),
                 scale_run=max(1, cfg.target_scale))
    if not cfg.target_scale:
        cfg = replace(cfg, target_scale=sized["target_scale_needed"])
        sized = plan(pilots, mde=cfg.mde, power=cfg.power, seeds_run=len(cfg.seeds),
                     scale_run=cfg.target_scale)
    for line in plan_lines(sized, cfg.size_from):
        say(line)
    return sized, cfg


def own_sizing(cfg, tables: dict) -> tuple[dict | None, list[str]]:
    """The sizing from the study's own variances (the pilot of its next run) and its lines."""
    if not tables["pilot"]:
        return None, []
    own = plan(tables["pilot"], mde=cfg.mde, power=cfg.power, seeds_run=len(cfg.seeds),
               scale_run=cfg.target_scale)
    return own, plan_lines(own, "this run's own variances")


def run_bench(cfg: BenchConfig, out: str | Path, *, progress_bar: bool | None = None,
              executor: str = "local", address: str | None = None, say=print) -> dict:
    """Run (or resume) every spec of the bench; write bench.json, bench.md, bench_main.png
    and results.json (the results file of docs/results). With ``size_from`` the plan is
    printed (``say``) before any run."""
    out = Path(out)
    cfg.validate()
    sized, cfg = size_before(cfg, say)
    specs = bench_specs(cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "bench_config.json", asdict(cfg))
    t0, cpu0 = time.perf_counter(), time.process_time()
    results = run_study(specs, workers=cfg.workers, progress_bar=progress_bar,
                        description="gaze bench", executor=executor, address=address)
    seconds = time.perf_counter() - t0
    tables = bench_tables(specs, results, cfg)
    own, lines = own_sizing(cfg, tables)
    if lines:
        tables["markdown"] += "\n### Sizing\n\n" + "\n".join(
            (plan_lines(sized, cfg.size_from) if sized else []) + lines) + "\n"
    pilots = pilot_dicts(tables.pop("pilot"))
    write_json(out / "bench.json", {
        "config": asdict(cfg),
        "tables": {k: v for k, v in tables.items() if k != "markdown"},
        "plan": sized, "own_sizing": own, "pilot": pilots,
        "runs": {s.name: {"folder": str(s.out), **_row(results[s.name])} for s in specs},
        "wall_seconds_this_invocation": seconds,
        "main_process_cpu_seconds": time.process_time() - cpu0,
        "train_cpu_seconds_all_runs": sum(r.get("train_cpu_seconds", 0.0)
                                          for r in results.values()),
    })
    (out / "bench.md").write_text(tables["markdown"])
    plot_main(tables, out / "bench_main.png")
    written = write_bench_results(cfg, out, tables, pilots, sized)
    say(f"results file: {written}" if written else
        "no results file (results.json): not run from a git checkout")
    tables["seconds"] = seconds
    return tables


#: the short world names of the results files' keys (docs/results/gaze_bench.json)
WORLD_KEYS = {"realistic": "real", "appearance": "app", "control": "ctrl", "anatomy": "ana"}


def task_key(task: str) -> str:
    """E->M -> em, label-shift -> label_shift: a task in a results file's keys."""
    return task.replace("->", "").replace("-", "_").lower()


def write_bench_results(cfg: BenchConfig, out: Path, tables: dict, pilots: dict,
                        sized: dict | None) -> Path | None:
    """results.json: the bench's per-seed errors and its figures (room, the average
    reduction, the oracle gates, 10 % against 100 %, the pilot and the plan) in the format of
    genlab.core.results.files, so that a rerun replaces a recovered file of docs/results."""
    commit = current_commit()
    if commit is None:
        return None
    values: dict = {"target_error": {}, "held_out_error": {}}
    figures: dict = {}
    for world, t in tables["worlds"].items():
        key = WORLD_KEYS.get(world.removesuffix(" world"), world.split()[0])
        seeds, found = _main_results(key, t["main"])
        values["target_error"] |= seeds
        figures |= found
        seeds, found = _source_results(key, t["source"])
        values["held_out_error"] |= seeds
        figures |= found
        avg = t["average_reduction"]
        if avg is not None:
            low, high = avg["rel_ci"]
            figures[f"{key}_reduction"] = {
                "effect": avg["rel_pct"], "low": low, "high": high, "n": len(cfg.seeds),
                "test": "bootstrap over seeds and test subjects", "claim": avg["claim"]}
    figures["pilot"] = pilots
    if sized:
        figures["plan"] = {k: v for k, v in sized.items() if k != "rows"}
    path = out / "results.json"
    write_result(path, {
        "title": f"MoEGaze against the baseline in the {', '.join(cfg.worlds)} world(s) "
                 f"(degrees; {len(cfg.seeds)} seeds; verdicts: paired t over seeds, Holm over "
                 "each table's family)",
        "command": command_line("genlab gaze bench", cfg, out), "commit": commit,
        "metrics": {"target_error": "image-weighted mean angular error on the target, deg",
                    "held_out_error": "image-weighted mean angular error on the held-out "
                                      "source subjects, deg"},
        "values": values, "figures": figures})
    return path


def _main_results(key: str, rows: list[dict]) -> tuple[dict, dict]:
    """A world's main table in the results file: each task's per-seed errors on its target
    and its figures (room, 10 % against 100 %, MoEGaze's verdict)."""
    values, figures = {}, {}
    for d in rows:
        task = task_key(d["task"])
        for kind, seeds in d["seeds"].items():
            if seeds:
                values[f"{key} {d['task']} {kind}"] = seeds
        if d["baseline"] is not None and d["reference"] is not None:
            figures[f"{key}_room_{task}"] = {"baseline": round(d["baseline"], 4),
                                             "target": round(d["reference"], 4)}
        if d["verdict_10_vs_100"] and "effect" in d["verdict_10_vs_100"]:
            figures[f"{key}_10_{task}"] = d["verdict_10_vs_100"]
        if d["verdict"]:
            figures[f"{key}_moegaze_{task}"] = d["verdict"]
    return values, figures


def _source_results(key: str, rows: list[dict]) -> tuple[dict, dict]:
    """A world's source table in the results file: each source's per-seed errors on its
    held-out subjects and its oracle gate."""
    values, figures = {}, {}
    for d in rows:
        for kind, seeds in d["seeds"].items():
            if seeds:
                values[f"{key} {d['source']} {kind}"] = seeds
        if d["gate"]:
            figures[f"{key}_oracle_{d['source'].split('-')[-1]}"] = d["gate"]
    return values, figures


def _row(summary: dict) -> dict:
    keep = ("model", "source", "target_names", "seed", "fraction", "val_mean_deg",
            "constant_val_mean_deg", "target_mean_deg", "train_seconds", "train_cpu_seconds")
    return {k: summary.get(k) for k in keep}


def run_command(cmd: BenchCommandConfig, out: str | Path, *, resume: bool = False) -> dict:
    """`genlab gaze bench`: the bench that ``cmd`` describes, run where it says. A rerun in
    the same folder always resumes (``resume`` is accepted and changes nothing)."""
    return run_bench(cmd.bench(), out, executor=cmd.executor, address=cmd.address)


STUDY = register_study(Study("bench", BenchCommandConfig, run_command, timed_report))
