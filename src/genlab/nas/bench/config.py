"""A bench's options: :class:`BenchConfig` (rows, seeds, the search template, the retraining
budget), the flat command config of `genlab nas bench` that builds it, and the rows' search
options (:func:`row_options`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from genlab.core.errors import ConfigError
from genlab.core.options import Options, option, option_like, takes_options
from genlab.nas.retrain import RetrainConfig
from genlab.nas.search import PENALTY_NAMES, SearchConfig

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
    # the retrainings' options over `nas train`'s defaults (RetrainConfig fields but those the
    # bench sets: RETRAIN_SET and the budget below); only those set away from the defaults
    retrain: dict[str, Any] = option(factory=dict, cli=False, help="The retrainings' "
                                     "options over nas train's (RetrainConfig's fields).")
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
    versus: str | None = option(None, help="A row of the bench compared with every other "
                                "row, paired by seed (ROW minus each): CIFAR-10 through the "
                                "table and the parameter-free edges, sign-flip intervals, "
                                "Holm over the rows (genlab.nas.bench.versus).")
    versus_margin: float = option(0.3, help="--versus: the primary comparison, ROW minus its "
                                  "best rival on CIFAR-10 (uncorrected), meets its goal when "
                                  "the interval's lower end lies above -margin (points).",
                                  ge=0)
    records_from: str | None = option(None, help="A bench's runs.csv (with its config.json "
                                      "beside it, as a bench writes them): its records "
                                      "stand for their jobs, the others run; a bench "
                                      "continued, or reported again, from committed files "
                                      "(genlab.nas.bench.records).")
    records_only: bool = option(False, help="With --records-from: run no job, report the "
                                "rows and seeds the file holds (a bench still under way, "
                                "reported from its committed runs.csv).")

    @property
    def rows(self) -> list[str]:
        """The bench's row names: ``methods`` when given, else ``regs``."""
        return list(self.methods) if self.methods is not None else list(self.regs)

    def row_search(self, row: str, seed: int) -> SearchConfig:
        """The search of ``row`` with ``seed`` (the template with the row's method and reg)."""
        if self.methods is None:
            return replace(self.search, reg=row, seed=seed)
        return replace(self.search, **row_options(row), seed=seed)


def _bench(name: str):
    return option_like(BenchConfig, name)


# the search options a bench sets itself: the row (its method and regulariser) and the seed
ROW_OPTIONS = ("method", "reg", "seed")
# the retraining options a bench sets itself: the searched cell, the search's data, device
# and threads, the job's seed and split; its budget is the bench's own (retrain_epochs, ...)
RETRAIN_SET = ("arch", "space", "dataset", "data_root", "size", "seed", "device", "threads",
               "eval_on")
RETRAIN_PREFIX = "retrain_"


@dataclass
@takes_options(SearchConfig, sets=ROW_OPTIONS)
@takes_options(RetrainConfig, sets=RETRAIN_SET, prefix=RETRAIN_PREFIX)
class BenchCommandConfig:
    """Every option of `genlab nas bench`: every option of `nas search` but the row's and the
    seed (derived from SearchConfig: the rows' search template), every option of `nas train`
    that the bench does not set itself as ``--retrain-NAME`` (derived from RetrainConfig),
    the bench's own, and how the jobs run (``executor``, ``workers``, ``address``:
    run_bench's, not the bench's config); :meth:`bench` builds the nested config (a
    BenchConfig with its search template and its retrainings' options)."""

    regs: list[str] = _bench("regs")
    methods: list[str] | None = _bench("methods")
    seeds: list[int] = _bench("seeds")
    retrain_epochs: int = _bench("retrain_epochs")
    retrain_channels: int | None = _bench("retrain_channels")
    retrain_cells: int | None = _bench("retrain_cells")
    random_archs: bool = _bench("random_archs")
    tune: bool = _bench("tune")
    tune_seeds: list[int] = _bench("tune_seeds")
    collapse_edges: int = _bench("collapse_edges")
    settings_from: str | None = _bench("settings_from")
    versus: str | None = _bench("versus")
    versus_margin: float = _bench("versus_margin")
    records_from: str | None = _bench("records_from")
    records_only: bool = _bench("records_only")
    executor: str = option("local", help="Where the jobs run; local: this machine, in this "
                           "process with one worker, else a process pool (process).",
                           choices="genlab.core.sweep:EXECUTORS")
    workers: int = option(1, help="Jobs (search + retraining) run at the same time.", gt=0)
    address: str | None = option(None, help="HOST:PORT of a Ray cluster (--executor ray; "
                                 "default a local Ray instance).")

    def bench(self) -> BenchConfig:
        """The bench these options describe."""
        retrain = {k: getattr(self, RETRAIN_PREFIX + k) for k in _RETRAIN}
        return BenchConfig(search=SearchConfig(**{k: getattr(self, k) for k in _TEMPLATE}),
                           retrain={k: v for k, v in retrain.items() if v != _RETRAIN[k]},
                           **{k: getattr(self, k) for k in _BENCH})

    @classmethod
    def record_options(cls, data: dict) -> dict:
        """A bench's config.json (the search template nested) as this command's options.
        One that sets an option the command has no flag for is refused: the command could
        not repeat that bench."""
        flat = {k: v for k, v in data.items() if k not in ("search", "retrain")}
        flat.update({RETRAIN_PREFIX + k: v for k, v in (data.get("retrain") or {}).items()})
        search = data.get("search") or {}
        if not isinstance(search, dict):
            raise ConfigError(f"config: search must be a mapping of search options, got "
                              f"{search!r}")
        search = SearchConfig.record_options(search)  # an older search's layout
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
# the derived retraining options and their defaults (the bench records those set otherwise)
_RETRAIN = {f.name: RetrainConfig.__dataclass_fields__[f.name].default
            for f in fields(RetrainConfig)
            if RETRAIN_PREFIX + f.name in BenchCommandConfig.__dataclass_fields__
            and f.name not in ("epochs", "channels", "cells")}


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


