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

The modules: ``config`` (the options), ``jobs`` (one job's search and retraining), ``run``
(:func:`run_bench`), ``tuning`` (the settings a row is tuned over), ``report`` (the tables
and the figure); this package re-exports their public names.
"""

from genlab.nas.bench.config import (
    DEFAULT_REGS,
    RANDOM,
    BenchCommandConfig,
    BenchConfig,
    row_options,
)
from genlab.nas.bench.jobs import (
    BENCH_RESUME_FREE,
    JOB_FREE,
    BenchJob,
    constant_accuracy,
    job_config,
    job_defaults,
    job_spec,
    mean_force_ratio,
    random_record,
    retrain_once,
    run_job,
    run_stage,
    search_once,
    search_record,
)
from genlab.nas.bench.run import (
    alias_jobs,
    constant_tuning_row,
    run_bench,
    run_jobs,
    same_search_key,
    tune_rows,
)

__all__ = ["BENCH_RESUME_FREE", "DEFAULT_REGS", "JOB_FREE", "RANDOM", "BenchCommandConfig",
           "BenchConfig", "BenchJob", "alias_jobs", "constant_accuracy", "constant_tuning_row",
           "job_config", "job_defaults", "job_spec", "mean_force_ratio", "random_record",
           "retrain_once", "row_options", "run_bench", "run_job", "run_jobs", "run_stage",
           "same_search_key", "search_once", "search_record", "tune_rows"]
