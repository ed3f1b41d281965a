"""`genlab nas bench`: methods or regularisers x seeds in one space, searched then retrained.

A row is a search method at its authors' preset (``methods``: genlab.nas.methods), a
regulariser on DARTS (``regs``, or a regulariser's name among ``methods``: ``ber``), or
``METHOD+REG`` (a method with another regulariser on top); every row shares the search
template, so all methods get the same step budget.

Every search and retraining is its own run folder under ``out/search`` and
``out/retrain``; every job (regulariser, seed) and each of its stages goes through
genlab.core.sweep, so finished runs are reused (after the sweep's check that they were made
with the same options), unfinished ones resumed, and a killed bench continues where it
stopped. Results: bench.json (one record per run plus
per-regulariser mean and std), bench.md (Markdown table) and bench.png.

Sanity rows: ``random_archs`` adds, per seed, a random architecture of the space (derived from
alphas drawn N(0, 1) with that seed: the space's own derivation rule, no search) retrained
like the searched ones, and every table carries the constant predictor (the majority class of
the training data) on the same test split; the tuning table (``tune``) carries it on the
validation half each selection seed's retraining is scored on.
"""

from __future__ import annotations

import itertools
import json
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from genlab.core.data import majority_accuracy
from genlab.core.errors import ConfigError, DataError, require_positive
from genlab.core.options import Options, check_options, option, option_like
from genlab.core.runs import RunDir, atomic_write_bytes, write_json
from genlab.core.sweep import RunSpec, run_one, run_sweep
from genlab.core.trainer import resolve_device
from genlab.nas.bench.report import (
    CONSTANT,
    aggregate,
    bench_markdown,
    plot_bench,
    tuning_markdown,
)
from genlab.nas.bench.tuning import (
    SCORE,
    TUNING_FILE,
    chosen_settings,
    score_settings,
    setting_text,
    tuning_grid,
)
from genlab.nas.data import load_image_data
from genlab.nas.inputs import check_run_kind
from genlab.nas.methods.reported import standing
from genlab.nas.retrain import RetrainConfig, fit_and_score_splits, retrain
from genlab.nas.search import (
    PENALTY_NAMES,
    RESUME_FREE,
    SearchConfig,
    run_config,
    run_search,
    search_regularizer,
    space_table,
)
from genlab.nas.spaces import get_space

RANDOM = "random"
# The default rows: DARTS, beta-DARTS, BER as chosen (docs/ber_round3.md), the earlier ber-kl
# by its own name and round two's batch-entropy candidates at their presets.
DEFAULT_REGS = ("none", "beta", "ber", "ber-kl", "ber-op", "ber-lbe", "ber-ib")


@dataclass
class BenchConfig(Options):
    """Regularisers x seeds, the shared search template and the retraining budget."""

    regs: list[str] = option(factory=lambda: list(DEFAULT_REGS), parse="list",
                             choices=PENALTY_NAMES, help="Regularisers, one row each, on DARTS "
                             "(unused with --methods).")
    seeds: list[int] = option(factory=lambda: [0, 1, 2], parse="seeds", help="Seeds: a list "
                              "0,1,2 or a range 0-4 (both ends included). One search (and "
                              "retraining) per seed and row.")
    methods: list[str] | None = option(None, parse="list", help="Rows instead of --regs: "
                                       "methods at their presets (genlab nas methods), "
                                       "regularisers (on DARTS) or METHOD+REG.",
                                       choices="genlab.nas.methods:method_names", checked=False)
    search: SearchConfig = field(default_factory=SearchConfig)  # every row's template
    retrain_epochs: int = option(30, help="Epochs of each retraining (0 skips retraining).",
                                 ge=0)
    retrain_channels: int | None = option(None, help="Width of the retrainings (default: the "
                                          "space's recipe).", gt=0)
    retrain_cells: int | None = option(None, help="Depth of the retrainings (default: the "
                                       "space's recipe).", gt=0)
    random_archs: bool = option(True, help="Sanity rows: a random architecture of the space "
                                "per seed, retrained.")
    tune: bool = option(False, help="First tune every row alike (genlab.nas.bench.tuning): each of "
                        "its settings searched and retrained on --tune-seeds, scored by "
                        "validation accuracy; the chosen one runs on --seeds.")
    tune_seeds: list[int] = option(factory=lambda: [3, 4, 5], parse="seeds",
                                   help="Selection seeds of --tune (kept apart from --seeds).")
    collapse_edges: int = option(2, ge=0, help="--tune: a setting whose cell has more "
                                 "parameter-free edges than this at any selection seed is "
                                 "not chosen (collapse).")
    settings_from: str | None = option(None, help="A tuned bench's folder (or its "
                                       "tuning.json): every row runs at the setting chosen "
                                       "there, e.g. chosen on NB201 and used unchanged in "
                                       "another space (not with --tune).")

    @property
    def rows(self) -> list[str]:
        """The bench's row names: ``methods`` when given, else ``regs``."""
        return list(self.methods) if self.methods is not None else list(self.regs)

    def row_search(self, row: str, seed: int) -> SearchConfig:
        """The search of ``row`` with ``seed`` (the template with the row's method and reg)."""
        if self.methods is None:
            return replace(self.search, reg=row, seed=seed)
        return replace(self.search, **row_options(row), seed=seed)


def _template(name: str):
    return option_like(SearchConfig, name)


def _bench(name: str):
    return option_like(BenchConfig, name)


@dataclass
class BenchCommandConfig:
    """Every option of `genlab nas bench`: a flat command config whose fields build the
    nested one (:meth:`bench`: a BenchConfig with its search template) plus how the jobs run
    (``executor``, ``workers``, ``address``: run_bench's, not the bench's config)."""

    space: str = _template("space")
    regs: list[str] = _bench("regs")
    methods: list[str] | None = _bench("methods")
    select: str = _template("select")
    seeds: list[int] = _bench("seeds")
    steps: int | None = _template("steps")
    channels: int | None = _template("channels")
    cells: int | None = _template("cells")
    order: int = _template("order")
    augment: bool = _template("augment")
    retrain_epochs: int = _bench("retrain_epochs")
    random_archs: bool = _bench("random_archs")
    tune: bool = _bench("tune")
    tune_seeds: list[int] = _bench("tune_seeds")
    collapse_edges: int = _bench("collapse_edges")
    settings_from: str | None = _bench("settings_from")
    device: str = _template("device")
    threads: int = _template("threads")
    nb201_table: str | None = _template("nb201_table")
    executor: str = option("local", help="Where the jobs run; local: this machine, in this "
                           "process with one worker, else a process pool (process).",
                           choices="genlab.core.sweep:EXECUTORS")
    workers: int = option(1, help="Jobs (search + retraining) run at the same time.", gt=0)
    address: str | None = option(None, help="HOST:PORT of a Ray cluster (--executor ray; "
                                 "default a local Ray instance).")

    def bench(self) -> BenchConfig:
        """The bench these options describe."""
        return BenchConfig(search=SearchConfig(**{k: getattr(self, k) for k in _TEMPLATE}),
                           **{k: getattr(self, k) for k in _BENCH})

    @classmethod
    def record_options(cls, data: dict) -> dict:
        """A bench's config.json (the search template nested) as this command's options.
        One that sets an option the command has no flag for is refused: the command could
        not repeat that bench."""
        flat = {k: v for k, v in data.items() if k != "search"}
        search = data.get("search") or {}
        if not isinstance(search, dict):
            raise ConfigError(f"config: search must be a mapping of search options, got "
                              f"{search!r}")
        flat.update({k: v for k, v in search.items() if k in _TEMPLATE})
        defaults = {**asdict(SearchConfig()), **asdict(BenchConfig())}
        lost = sorted(k for k, v in {**search, **flat}.items()
                      if k in defaults and k not in cls.__dataclass_fields__
                      and v != defaults[k])
        if lost:
            raise ConfigError(f"config: this bench sets {', '.join(lost)}, which `nas bench` "
                              "has no option for; run it with genlab.nas.bench.run_bench")
        return flat


_TEMPLATE = tuple(k for k in BenchCommandConfig.__dataclass_fields__
                  if k in SearchConfig.__dataclass_fields__)
_BENCH = tuple(k for k in BenchCommandConfig.__dataclass_fields__
               if k in BenchConfig.__dataclass_fields__)


def row_options(row: str) -> dict:
    """A ``methods`` row's search options: a method's name (its preset), a regulariser's
    (DARTS with it), or METHOD+REG; ConfigError naming both registries otherwise."""
    from genlab.nas.methods import get_method, method_names
    from genlab.nas.regularizers import PENALTIES

    if "+" in row:
        method, reg = row.split("+", 1)
        get_method(method)
        PENALTIES.get(reg)
        return {"method": method, "reg": reg}
    if row in method_names():
        return {"method": row, "reg": None}
    if row in PENALTIES.choices():
        return {"method": None, "reg": row}
    raise ConfigError(f"unknown bench row {row!r}: expected a method ({', '.join(method_names())}"
                      f"), a regulariser ({', '.join(PENALTIES.choices())}) or METHOD+REG")


def run_stage(name: str, target, cfg, folder: Path, expect: dict, **kwargs) -> dict:
    """One stage of a job (its search or its retraining) through genlab.core.sweep: refused
    when ``folder`` holds a run made with other options (``expect``: the config.json the stage
    writes), read back when finished, resumed when started; a failure raises its exception."""
    return run_one(RunSpec(name, target, cfg, folder, kwargs=kwargs, expect=expect))


def search_once(cfg: SearchConfig, folder: Path, space=None) -> dict:
    """The summary of the search ``cfg`` in ``folder`` (run_stage: reused, resumed or run)."""
    folder = Path(folder)
    expect = {k: v for k, v in run_config(cfg.resolved(space)).items() if k not in RESUME_FREE}
    return run_stage(f"search {folder.name}", run_search, cfg, folder, expect)


def retrain_once(cfg: RetrainConfig, folder: Path) -> dict:
    """The summary of the retraining ``cfg`` in ``folder`` (run_stage: reused, resumed or run)."""
    folder = Path(folder)
    return run_stage(f"retrain {folder.name}", retrain, cfg, folder, asdict(cfg.resolved()))


@dataclass
class BenchJob:
    """One (row, seed) of a bench: its search and its retraining; a tuning job (``setting``
    over the row's preset, scored on the validation half: ``eval_on`` "val") likewise."""

    reg: str
    seed: int
    bench: BenchConfig
    folder: str  # the bench folder (search/ and retrain/ sub-runs inside)
    setting: dict = field(default_factory=dict)  # search options over the row's preset
    eval_on: str = "test"
    name: str = ""  # the job's name (default ROW-sSEED)

    def __post_init__(self):
        self.name = self.name or f"{self.reg}-s{self.seed}"


# Bench options that may change on --resume: rows and seeds may be added (or dropped), the
# tuning stage turned on; the finished jobs of the others are reused, since a job's identity
# leaves them out (a tuned row's jobs carry their chosen setting).
BENCH_RESUME_FREE = ("regs", "methods", "seeds", "tune", "tune_seeds", "collapse_edges")


# A job's options that may differ from the run in its folder: the search's own (the table
# that judges the cell, per-cell checkpointing).
JOB_FREE = tuple(f"bench.search.{k}" for k in RESUME_FREE)


def job_spec(job: BenchJob, folder: Path) -> RunSpec:
    """The sweep's run of one bench job in ``folder``."""
    return RunSpec(job.name, run_job, job, folder, expect=job_config(job), free=JOB_FREE,
                   defaults=job_defaults())


def job_defaults() -> dict:
    """What a job's options newer than its run compare as: the bench's defaults."""
    bench = asdict(BenchConfig())
    return {"bench": {k: v for k, v in bench.items() if k not in BENCH_RESUME_FREE}}


def job_config(job: BenchJob) -> dict:
    """A job's identity (its config.json): everything but the bench's list of rows and seeds."""
    config = asdict(job)
    for key in BENCH_RESUME_FREE:
        config["bench"].pop(key)
    return config


def run_job(job: BenchJob, out, *, resume: bool = False, progress_bar=None) -> dict:
    """Search (or draw the random architecture) and retrain one job; its record is the
    summary of the run folder ``out`` (the sweep's unit: finished jobs are read back)."""
    cfg, name = job.bench, job.name
    space = get_space(cfg.search.space)
    root = Path(job.folder)
    run = RunDir(out, job_config(job), resume=resume, resume_free=JOB_FREE,
                 defaults=job_defaults())
    table = space_table(space, cfg.search.nb201_table)
    if job.reg == RANDOM:
        record = random_record(space, job.seed)
        if table is not None:  # the sanity row judged like the searched cells
            record.update(table.lookup(space.parse(record["genotype"])))
    else:
        scfg = replace(cfg.row_search(job.reg, job.seed), **job.setting)
        folder = root / "search" / name
        summary = search_once(scfg, folder, space)
        record = search_record(summary, space, table)
        record["force_ratio"] = mean_force_ratio(folder)
        record["search_folder"] = folder.name
    record.update({"run": name, "reg": job.reg, "seed": job.seed})
    if cfg.retrain_epochs > 0:
        rcfg = RetrainConfig(arch=record["genotype"], space=space.name,
                             dataset=cfg.search.dataset, data_root=cfg.search.data_root,
                             size=cfg.search.size, channels=cfg.retrain_channels,
                             cells=cfg.retrain_cells, epochs=cfg.retrain_epochs, seed=job.seed,
                             device=cfg.search.device, threads=cfg.search.threads,
                             eval_on=job.eval_on)
        rsum = retrain_once(rcfg, root / "retrain" / name)
        record[f"{job.eval_on}_acc"] = rsum[f"{job.eval_on}_acc"]
        record["params"] = rsum["params"]
    record = json.loads(json.dumps(record))  # as read back from summary.json
    run.write_summary(dict(record))
    return record


def run_bench(cfg: BenchConfig, out, *, resume: bool = False, progress_bar=None,
              executor: str = "local", workers: int = 1, address: str | None = None) -> dict:
    """Search and retrain every (regulariser, seed); write bench.json, bench.md, bench.png.

    The jobs go through genlab.core.sweep: ``executor`` "local" runs them one after the
    other in this process with one worker, else in ``workers`` processes; "inline"; "ray"
    (``address`` of a cluster, default a local instance). A failed job does not stop the
    others; afterwards one error lists the failed jobs.
    """
    if not cfg.rows or not cfg.seeds:
        raise ConfigError("bench needs at least one method (or regulariser) and one seed")
    check_options(cfg)  # types, choices and limits as the fields declare them
    require_positive("workers", workers)
    space = get_space(cfg.search.space)
    cfg.search.validate(space)
    grids = {}
    for row in cfg.rows:  # every row's options (and tuning settings) before the folder
        cfg.row_search(row, cfg.seeds[0]).validate(space)
        if cfg.tune:
            grids[row] = tuning_grid(row, row_options(row) if cfg.methods is not None
                                     else {"method": None, "reg": row})
            for setting in grids[row]:
                replace(cfg.row_search(row, cfg.tune_seeds[0]), **setting).validate(space)
    if cfg.tune and cfg.settings_from:
        raise ConfigError("--tune chooses each row's setting and --settings-from reads it from "
                          "a tuned bench: give one of them")
    settings = chosen_settings(cfg.settings_from, cfg.rows) if cfg.settings_from else {}
    for row, setting in settings.items():
        replace(cfg.row_search(row, cfg.seeds[0]), **setting).validate(space)
    if cfg.tune and cfg.retrain_epochs == 0:
        raise ConfigError("--tune scores each setting by its retrained cell: give "
                          "--retrain-epochs > 0")
    resolve_device(cfg.search.device)  # an unknown or absent device before the folder
    check_run_kind(out, "nas bench")
    run = RunDir(out, asdict(cfg), resume=resume, defaults=asdict(BenchConfig()),
                 resume_free=BENCH_RESUME_FREE + tuple(f"search.{k}" for k in RESUME_FREE))
    sweep = {"executor": "inline" if (executor, workers) == ("local", 1) else executor,
             "workers": workers, "address": address, "progress_bar": progress_bar}
    tuning = []
    if cfg.tune:
        settings, tuning = tune_rows(cfg, grids, run, space, sweep)
    jobs = list(itertools.product(cfg.rows, cfg.seeds))
    if cfg.random_archs:
        jobs += [(RANDOM, seed) for seed in cfg.seeds]
    aliases = alias_jobs(cfg, jobs) if not settings and not cfg.tune else {}
    specs = []
    for reg, seed in jobs:
        if f"{reg}-s{seed}" not in aliases:
            job = BenchJob(reg, seed, cfg, str(run.path), setting=settings.get(reg, {}))
            specs.append(job_spec(job, run.path / "jobs" / job.name))
    done = run_jobs(specs, f"nas bench {space.name}", sweep)
    records, sizes = [], {}
    for reg, seed in jobs:
        name = f"{reg}-s{seed}"
        record = dict(done[aliases.get(name, name)], run=name, reg=reg, seed=seed)
        genotype = record["genotype"]
        if genotype not in sizes:  # the derived network's size, from its genotype
            sizes[genotype] = space.reference_size(genotype) or {}
        record.update(sizes[genotype])
        records.append(record)
        run.log({k: v for k, v in record.items() if not k.endswith(("_curve", "_steps"))})

    regs = cfg.rows + ([RANDOM] if cfg.random_archs else [])
    result = {"space": space.name, "records": records,
              "per_reg": aggregate(records, regs, space),
              "constant_test_acc": constant_accuracy(cfg.search),
              "steps": cfg.search.resolved(space).steps}
    per_seed = {row: [r["cifar10"] for r in records
                      if r["reg"] == row and r.get("cifar10") is not None] for row in regs}
    if (rank := standing(result["per_reg"], per_seed)) is not None:
        result["standing"] = rank
    if cfg.tune:
        result["tuning"] = tuning
    if cfg.tune or cfg.settings_from:
        result["settings"] = {row: setting_text(settings[row]) for row in cfg.rows}
    write_json(run.file("bench.json"), result)
    atomic_write_bytes(run.file("bench.md"), bench_markdown(result).encode())
    run.save_figure(plot_bench(records, cfg.rows, space), "bench.png")
    # a copy (the summary gains "processes"), with the torch threads of the jobs run here
    threads = torch.get_num_threads() if cfg.search.threads == 0 else cfg.search.threads
    run.write_summary({**result["per_reg"], "torch_threads": threads})
    return result


def run_jobs(specs: list[RunSpec], description: str, sweep: dict) -> dict[str, dict]:
    """Run ``specs`` through genlab.core.sweep (``sweep``: executor, workers, address,
    progress_bar); name -> summary, or one DataError naming the failed jobs."""
    outcomes = run_sweep(specs, description=description, **sweep)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        raise DataError(f"{len(failed)} of {len(specs)} bench jobs failed (finished ones are "
                        "kept; rerun with --resume): "
                        + "; ".join(f"{o.name}: {o.error}" for o in failed[:3]))
    return {o.name: {k: v for k, v in o.summary.items() if k != "processes"}
            for o in outcomes}


def tune_rows(cfg: BenchConfig, grids: dict[str, tuple[dict, ...]], run: RunDir, space,
              sweep: dict) -> tuple[dict[str, dict], list[dict]]:
    """The tuning stage (genlab.nas.bench.tuning): every setting of every row searched and
    retrained on the selection seeds, scored on validation data; the chosen setting of each
    row and the tuning table (also tuning.json and tuning.md in the bench folder)."""
    jobs = [BenchJob(row, seed, cfg, str(run.path), setting=setting, eval_on="val",
                     name=f"tune-{row}-t{k}-s{seed}")
            for row, grid in grids.items() for k, setting in enumerate(grid)
            for seed in cfg.tune_seeds]
    specs = [job_spec(job, run.path / "jobs" / job.name) for job in jobs]
    done = run_jobs(specs, f"nas bench {space.name} (tuning)", sweep)
    chosen, table = {}, []
    for row, grid in grids.items():
        records = [dict(done[job.name], setting_index=grid.index(job.setting))
                   for job in jobs if job.reg == row]
        rows, best = score_settings(row, grid, records, cfg.collapse_edges)
        chosen[row] = grid[best]
        table += rows
    table.append(constant_tuning_row(cfg.search, cfg.tune_seeds))
    write_json(run.file(TUNING_FILE), {"rows": table, "tune_seeds": cfg.tune_seeds,
                                         "collapse_edges": cfg.collapse_edges,
                                         "space": space.name, "chosen": chosen})
    atomic_write_bytes(run.file("tuning.md"), tuning_markdown(table).encode())
    return chosen, table


def constant_tuning_row(search: SearchConfig, seeds: list[int]) -> dict:
    """The tuning table's sanity row: the constant predictor (the train half's majority
    class) scored on the validation half, through each selection seed's split as the tuning
    jobs' retrainings take it; mean and std over ``seeds``."""
    scores = [constant_accuracy(search, seed, eval_on="val") for seed in seeds]
    return {"row": CONSTANT, "setting": "-", "index": None, "seeds": len(scores),
            f"{SCORE}_mean": statistics.fmean(scores),
            f"{SCORE}_std": statistics.stdev(scores) if len(scores) > 1 else 0.0,
            "max_param_free": None, "eligible": None, "chosen": False,
            "note": "sanity row: the train half's majority class"}


def same_search_key(scfg: SearchConfig) -> str:
    """Searches with equal keys are the same computation (``ber`` and the variant it names)."""
    reg = search_regularizer(scfg)
    resolved = scfg.resolved()
    return repr(asdict(replace(resolved, reg="", reg_strength=None, reg_schedule=None,
                               reg_params={}))) + repr(asdict(reg))


def alias_jobs(cfg: BenchConfig, jobs: list[tuple[str, int]]) -> dict[str, str]:
    """Job name -> the earlier job whose search (and so retraining) is the same computation.

    ``ber`` names one of the candidates at its selected setting: its rows reuse that
    candidate's runs instead of repeating them.
    """
    owners, aliases = {}, {}
    for reg, seed in jobs:
        if reg == RANDOM:
            continue
        key = (same_search_key(cfg.row_search(reg, seed)), seed)
        name = f"{reg}-s{seed}"
        if key in owners:
            aliases[name] = owners[key]
        else:
            owners[key] = name
    return aliases


def mean_force_ratio(folder: Path) -> float | None:
    """Mean force ratio (regulariser / CE on alpha) over the logging steps of a search."""
    path = folder / "metrics.jsonl"
    if not path.exists():
        return None
    vals = [r["force_ratio"] for r in map(json.loads, path.read_text().splitlines())
            if r.get("force_ratio") is not None]
    return statistics.fmean(vals) if vals else None


def search_record(summary: dict, space, table=None) -> dict:
    """The bench's record of one finished search; its cell judged by ``table`` (the bench's
    accuracy table) when given, else by what the search's own table said (a search read
    back from a run made with another table, or none, is judged by the bench's)."""
    record = {k: summary.get(k) for k in ("genotype", "param_free_ops", "skip_ops",
                                           "mean_entropy", "hessian_eig", "search_seconds",
                                           "param_free_curve", "entropy_curve", "curve_steps")}
    if table is not None:
        record.update(table.lookup(space.parse(record["genotype"])))
    elif space.table:
        record.update(summary.get(space.table, {}))
    return record


def random_record(space, seed: int) -> dict:
    """A random architecture of ``space``: its derivation applied to N(0, 1) alphas."""
    g = torch.Generator().manual_seed(seed)
    alphas = {name: torch.randn(spec.shape, generator=g)
              for name, spec in space.alpha_specs().items()}
    genotype = space.derive(alphas)
    return {"genotype": space.format(genotype), **space.op_counts(genotype)}


def constant_accuracy(search: SearchConfig, seed: int = 0, eval_on: str = "test") -> float:
    """Accuracy (%) of always predicting the majority class of the split a retraining with
    ``seed`` and ``eval_on`` fits, on the split it is scored on (retrain's splits)."""
    data = load_image_data(search.dataset, search.data_root,
                           size=search.resolved().size, seed=seed)
    fit, score = fit_and_score_splits(data, eval_on)
    return majority_accuracy(fit.labels, score.labels)
