"""Running a bench (:func:`run_bench`): its options checked before the folder, the tuning
stage, every job through genlab.core.sweep, and bench.json, bench.md and bench.png."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import asdict, replace

import torch

from genlab.core.errors import ConfigError, DataError, require_positive
from genlab.core.options import check_options, command_line
from genlab.core.results.files import NO_CHECKOUT
from genlab.core.runs import RunDir, atomic_write_bytes, write_json
from genlab.core.sweep import RunSpec, run_sweep
from genlab.core.trainer import resolve_device
from genlab.nas.bench.config import (
    RANDOM,
    ROW_OPTIONS,
    BenchCommandConfig,
    BenchConfig,
    row_options,
)
from genlab.nas.bench.jobs import (
    BENCH_RESUME_FREE,
    BenchJob,
    constant_accuracy,
    job_spec,
    random_record,
    retraining,
)
from genlab.nas.bench.records import (
    FIELDS,
    RUNS_CSV,
    append_record,
    check_source,
    read_records,
    write_records,
)
from genlab.nas.bench.report import CONSTANT, aggregate, bench_markdown, plot_bench, tuning_markdown
from genlab.nas.bench.results import write_bench_results
from genlab.nas.bench.tuning import (
    SCORE,
    TUNING_FILE,
    chosen_settings,
    score_settings,
    setting_text,
    tuning_grid,
)
from genlab.nas.bench.versus import VERSUS_LEVEL, primary_row, versus_rows
from genlab.nas.inputs import check_run_kind
from genlab.nas.methods.reported import random_cells, standing
from genlab.nas.search import RESUME_FREE, SearchConfig, search_regularizer, space_table
from genlab.nas.spaces import get_space


def run_bench(cfg: BenchConfig, out, *, resume: bool = False, progress_bar=None,
              executor: str = "local", workers: int = 1, address: str | None = None) -> dict:
    """Search and retrain every (regulariser, seed); write bench.json, bench.md, bench.png.

    The jobs go through genlab.core.sweep: ``executor`` "local" runs them one after the
    other in this process with one worker, else in ``workers`` processes; "inline"; "ray"
    (``address`` of a cluster, default a local instance). A failed job does not stop the
    others; afterwards one error lists the failed jobs.
    """
    space, grids, settings = check_bench(cfg, workers)
    check_run_kind(out, "nas bench")
    run = RunDir(out, asdict(cfg), resume=resume, defaults=asdict(BenchConfig()),
                 resume_free=BENCH_RESUME_FREE + tuple(f"search.{k}" for k in RESUME_FREE))
    sweep = {"executor": "inline" if (executor, workers) == ("local", 1) else executor,
             "workers": workers, "address": address, "progress_bar": progress_bar}
    tuning = []
    if cfg.tune:
        settings, tuning = tune_rows(cfg, grids, run, space, sweep)
    records = bench_records(cfg, run, space, settings, sweep)
    result = bench_result(cfg, space, records, settings, tuning)
    write_bench(run, cfg, space, result)
    written = write_bench_results(result, space, bench_command(cfg, out, executor, workers,
                                                               address), run.path)
    print(f"results file: {written}" if written else NO_CHECKOUT)
    return result


def bench_command(cfg: BenchConfig, out, executor: str, workers: int,
                  address: str | None) -> str:
    """The `genlab nas bench` command line that makes ``cfg`` in ``out`` (the options that
    differ from their defaults), or where its options are, for a bench the command cannot
    spell."""
    try:
        flat = BenchCommandConfig.record_options(asdict(cfg))
    except ConfigError:
        return f"genlab.nas.bench.run_bench with {out}/config.json"
    known = BenchCommandConfig.__dataclass_fields__
    command = BenchCommandConfig(**{k: v for k, v in flat.items() if k in known},
                                 executor=executor, workers=workers, address=address)
    return command_line("genlab nas bench", command, out)


def check_bench(cfg: BenchConfig, workers: int) -> tuple:
    """Every check of a bench before its folder is made: its options, every row's search (and
    tuning settings), the settings read from a tuned bench, the device. Returns (space, the
    rows' tuning grids, the rows' settings read with ``settings_from``)."""
    if not cfg.rows or not cfg.seeds:
        raise ConfigError("bench needs at least one method (or regulariser) and one seed")
    check_options(cfg)  # types, choices and limits as the fields declare them
    require_positive("workers", workers)
    space = get_space(cfg.search.space)
    cfg.search.validate(space)
    grids = row_grids(cfg, space)
    if cfg.records_from and cfg.tune:
        raise ConfigError("--records-from takes finished jobs' records, and --tune chooses the "
                          "settings the jobs run at first: give one of them")
    if cfg.tune and cfg.settings_from:
        raise ConfigError("--tune chooses each row's setting and --settings-from reads it from "
                          "a tuned bench: give one of them")
    settings = chosen_settings(cfg.settings_from, cfg.rows) if cfg.settings_from else {}
    for row, setting in settings.items():
        replace(cfg.row_search(row, cfg.seeds[0]), **setting).validate(space)
    if cfg.versus is not None and cfg.versus not in cfg.rows:
        raise ConfigError(f"--versus {cfg.versus}: not a row of this bench (its rows: "
                          f"{', '.join(cfg.rows)})")
    if cfg.tune and cfg.retrain_epochs == 0:
        raise ConfigError("--tune scores each setting by its retrained cell: give "
                          "--retrain-epochs > 0")
    if cfg.retrain_epochs > 0 and cfg.retrain:  # the retrainings' options, on a random cell
        retraining(cfg, random_record(space, 0)["genotype"], space.name, 0, "test").validate()
    resolve_device(cfg.search.device)  # an unknown or absent device before the folder
    given = given_records(cfg)  # a records file that is absent, malformed or another bench's
    if cfg.records_only and not any(f"{row}-s{seed}" in given
                                    for row in cfg.rows for seed in cfg.seeds):
        raise ConfigError("--records-only reports the records of --records-from: give a "
                          "file that holds some of the bench's rows and seeds")
    return space, grids, settings


def row_grids(cfg: BenchConfig, space) -> dict[str, tuple[dict, ...]]:
    """Every row's search checked; with ``tune``, each row's tuning grid (every setting
    checked too)."""
    grids = {}
    for row in cfg.rows:  # every row's options (and tuning settings) before the folder
        cfg.row_search(row, cfg.seeds[0]).validate(space)
        if cfg.tune:
            grids[row] = tuning_grid(row, row_options(row) if cfg.methods is not None
                                     else {"method": None, "reg": row})
            for setting in grids[row]:
                replace(cfg.row_search(row, cfg.tune_seeds[0]), **setting).validate(space)
    return grids


def bench_records(cfg: BenchConfig, run: RunDir, space, settings: dict[str, dict],
                  sweep: dict) -> list[dict]:
    """Run every job (rows x seeds, the random rows; a job that repeats another's search
    reuses it) and return their records, each with its network's size; logged to
    metrics.jsonl."""
    jobs = list(itertools.product(cfg.rows, cfg.seeds))
    if cfg.random_archs:
        jobs += [(RANDOM, seed) for seed in cfg.seeds]
    given = given_records(cfg)
    if cfg.records_only:  # the jobs the file holds, no other
        jobs = [(reg, seed) for reg, seed in jobs if f"{reg}-s{seed}" in given]
    aliases = alias_jobs(cfg, jobs) if not settings and not cfg.tune else {}
    specs = []
    for reg, seed in jobs:
        if f"{reg}-s{seed}" not in aliases and f"{reg}-s{seed}" not in given:
            job = BenchJob(reg, seed, cfg, str(run.path), setting=settings.get(reg, {}))
            specs.append(job_spec(job, run.path / "jobs" / job.name))
    done = {**given, **run_jobs(specs, f"nas bench {space.name}", sweep,
                                on_outcome=keep_record(run.file(RUNS_CSV), jobs))}
    records, sizes = [], {}
    for reg, seed in jobs:
        name = f"{reg}-s{seed}"
        record = dict(done.get(name) or done[aliases.get(name, name)], run=name, reg=reg,
                      seed=seed)
        if name in given:
            record["from_records"] = True  # its compute was spent by the bench that ran it
        genotype = record["genotype"]
        if genotype not in sizes:  # the derived network's size, from its genotype
            sizes[genotype] = space.reference_size(genotype) or {}
        record.update(sizes[genotype])
        records.append(record)
        run.log({k: v for k, v in record.items() if not k.endswith(("_curve", "_steps"))})
    return records


def given_records(cfg: BenchConfig) -> dict[str, dict]:
    """The records ``--records-from`` gives (job name -> record), checked against this bench's
    options (genlab.nas.bench.records)."""
    if cfg.records_from is None:
        return {}
    records = read_records(cfg.records_from)  # an absent or malformed file first
    check_source(cfg.records_from, asdict(cfg), ROW_OPTIONS + RESUME_FREE)
    return records


def bench_result(cfg: BenchConfig, space, records: list[dict], settings: dict[str, dict],
                 tuning: list[dict]) -> dict:
    """bench.json's content: the records, the per-row aggregates, the constant predictor,
    the standing among the reported results, and the tuning (when tuned)."""
    regs = cfg.rows + ([RANDOM] if cfg.random_archs else [])
    result = {"space": space.name, "dataset": cfg.search.dataset, "records": records,
              "per_reg": aggregate(records, regs, space),
              "constant_test_acc": constant_accuracy(cfg.search),
              "steps": cfg.search.resolved(space).steps}
    per_seed = {row: [r["cifar10"] for r in records
                      if r["reg"] == row and r.get("cifar10") is not None] for row in regs}
    if (rank := standing(result["per_reg"], per_seed)) is not None:
        result["standing"] = rank
    if space.name == "nb201" and (table := space_table(space, cfg.search.nb201_table)):
        result["random_cells"] = random_cells(table, result["per_reg"])
    if cfg.versus is not None:
        result["versus"] = {"row": cfg.versus, "level": VERSUS_LEVEL,
                            "rows": versus_rows(records, regs, cfg.versus),
                            "primary": primary_row(records, regs, cfg.versus,
                                                   margin=cfg.versus_margin,
                                                   planned_seeds=len(cfg.seeds))}
    if cfg.tune:
        result["tuning"] = tuning
    if cfg.tune or cfg.settings_from:
        result["settings"] = {row: setting_text(settings[row]) for row in cfg.rows}
    return result


def write_bench(run: RunDir, cfg: BenchConfig, space, result: dict) -> None:
    """bench.json, bench.md, bench.png and the summary (the per-row aggregates)."""
    write_json(run.file("bench.json"), result)
    write_records(run.file(RUNS_CSV), result["records"])
    atomic_write_bytes(run.file("bench.md"), bench_markdown(result).encode())
    run.save_figure(plot_bench(result["records"], cfg.rows, space), "bench.png")
    # a copy (the summary gains "processes"), with the torch threads of the jobs run here
    threads = torch.get_num_threads() if cfg.search.threads == 0 else cfg.search.threads
    run.write_summary({**result["per_reg"], "torch_threads": threads})


def keep_record(path, jobs: list[tuple[str, int]]):
    """The sweep's callback that appends each finished job's record to ``path`` (runs.csv) as
    it finishes, once (a job already in the file is not written again)."""
    names = {f"{reg}-s{seed}": (reg, seed) for reg, seed in jobs}
    records = read_records(path) if path.exists() else {}
    if records and path.read_text().split("\n", 1)[0] != ",".join(FIELDS):
        write_records(path, list(records.values()))  # an earlier bench's layout, up to date
    kept = set(records)

    def keep(outcome) -> None:
        if outcome.summary is None or outcome.name in kept or outcome.name not in names:
            return
        reg, seed = names[outcome.name]
        append_record(path, {**outcome.summary, "reg": reg, "seed": seed})
        kept.add(outcome.name)

    return keep


def run_jobs(specs: list[RunSpec], description: str, sweep: dict,
             on_outcome=None) -> dict[str, dict]:
    """Run ``specs`` through genlab.core.sweep (``sweep``: executor, workers, address,
    progress_bar; ``on_outcome``: called with each job's outcome as it is known); name ->
    summary, or one DataError naming the failed jobs."""
    outcomes = run_sweep(specs, description=description, on_outcome=on_outcome, **sweep)
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


