"""A bench's unit of work: one (row, seed) job (:class:`BenchJob`), its search and its
retraining as stages of genlab.core.sweep, reused, resumed or run, and the job's record."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from genlab.core.data import majority_accuracy
from genlab.core.runs import RunDir
from genlab.core.sweep import RunSpec, run_one
from genlab.nas.bench.config import RANDOM, BenchConfig
from genlab.nas.data import load_image_data
from genlab.nas.retrain import RetrainConfig, fit_and_score_splits, retrain
from genlab.nas.search import RESUME_FREE, SearchConfig, run_config, run_search, space_table
from genlab.nas.spaces import get_space


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
BENCH_RESUME_FREE = ("regs", "methods", "seeds", "tune", "tune_seeds", "collapse_edges",
                     "versus", "versus_margin", "records_from", "records_only")


# A job's options that may differ from the run in its folder: the search's own (the table
# that judges the cell, per-cell checkpointing) and where the bench lives (a bench folder
# moved or copied, to continue it with more rows, reads its finished jobs back).
JOB_FREE = ("folder", *(f"bench.search.{k}" for k in RESUME_FREE))


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
    # the job's CPU seconds, when this call runs it whole (a resumed search's are partial)
    start = time.process_time()
    whole = not any((root / stage / name).exists() for stage in ("search", "retrain"))
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
        rcfg = retraining(cfg, record["genotype"], space.name, job.seed, job.eval_on)
        rsum = retrain_once(rcfg, root / "retrain" / name)
        record[f"{job.eval_on}_acc"] = rsum[f"{job.eval_on}_acc"]
        record["params"] = rsum["params"]
    record["cpu_seconds"] = time.process_time() - start if whole else None
    record = json.loads(json.dumps(record))  # as read back from summary.json
    run.write_summary(dict(record))
    return record


def retraining(cfg: BenchConfig, arch: str, space: str, seed: int,
               eval_on: str) -> RetrainConfig:
    """The retraining of cell ``arch`` in a bench job: the search's data, device and threads,
    the bench's budget and its retraining options (``cfg.retrain``)."""
    return RetrainConfig(arch=arch, space=space, dataset=cfg.search.dataset,
                         data_root=cfg.search.data_root, size=cfg.search.size,
                         channels=cfg.retrain_channels, cells=cfg.retrain_cells,
                         epochs=cfg.retrain_epochs, seed=seed, device=cfg.search.device,
                         threads=cfg.search.threads, eval_on=eval_on, **cfg.retrain)


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
