"""Hyper-parameter sensitivity: accuracy over each optimiser's lr x radius grid.

The grid is the search grid (search.py: 3 learning rates x 3 radii, 9 learning rates for
SGD), trained at each of ``seeds`` (seed 0 = the search trainings, reused). Per optimiser:
the mean test accuracy (percent) of each cell over seeds, its best and worst cell, the
spread (best - worst, points), the mean over cells, the share (a fraction of the
cells) within 1 point of the best cell, and the mean over cells of each cell's std over
seeds (the noise floor of the other columns; the constant predictor is the sanity row) (the
paper's claim: guided methods are less sensitive, i.e. a larger share and a smaller
spread). SGD is also given on the 3 learning rates the other optimisers use, so that
every row covers the same learning-rate range. Nothing is chosen here; test accuracy is
reported, validation accuracy is in summary.json. The claim's comparison: each guided
optimiser's spread minus SAM's and minus SGD's (SGD on the 3 shared learning rates), the
spread computed per seed over that seed's cells, paired by seed, Holm over the study's
comparisons, a negative difference reading "better" (stats.py:
:func:`~genlab.optim.studies.stats.compare`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from genlab.core.errors import ConfigError
from genlab.core.options import check_options, option
from genlab.core.report import figure, markdown_table
from genlab.core.runs import RunDir
from genlab.optim.studies import Study, register_study
from genlab.optim.studies.grid import StudyLog, default_store, execute, stored
from genlab.optim.studies.results import sensitivity_results, write_study_results
from genlab.optim.studies.search import (
    SEARCH_GRIDS,
    ComparisonOptions,
    Protocol,
    radius_field,
    search_specs,
)
from genlab.optim.studies.stats import (
    compare,
    comparison_block,
    comparison_markdown,
    mean_std,
)
from genlab.optim.training.models import ARCHS

WITHIN = 1.0  # "within 1 point (percent) of the best"


@dataclass
class SensitivityConfig(ComparisonOptions):
    """The options of `genlab optim sensitivity`."""

    arch: str = option("transformer", help="Architecture.", choices=ARCHS)
    seeds: list[int] = option(factory=lambda: [0, 1, 2], parse="seeds",
                              help="Seeds of the final trainings (seed 0 is the search "
                                   "training, reused).")

    def protocol(self) -> Protocol:
        return Protocol.for_arch(self.arch, epochs=self.epochs, width=self.width,
                                 depth=self.depth, grid=self.grid, threads=self.threads)

    def validate(self) -> None:
        check_options(self)  # types, choices, limits; seeds: integers >= 0, no repeat
        if not self.optimizers:
            raise ConfigError("sensitivity: give at least one optimiser")
        self.protocol().validate()


def grid_specs(cfg: SensitivityConfig, store: Path) -> list:
    """The search grid at every seed (at seed 0: the search trainings themselves)."""
    base = search_specs(cfg.protocol(), cfg.optimizers, store)
    specs = []
    for s in cfg.seeds:
        specs += base if s == 0 else [
            stored(store, spec.name.rsplit("-", 1)[0], replace(spec.config, seed=s))
            for spec in base]
    return specs


def cell_key(cfg) -> tuple:
    field_ = radius_field(cfg.optimizer)
    return (cfg.lr, getattr(cfg, field_) if field_ else None)


def sensitivity_row(name: str, cells: dict, stds: dict | None = None) -> dict:
    """Best, worst, spread, mean (percent) and share (a fraction of the cells) within 1
    point of the best of {cell: mean accuracy in percent}; with {cell: std over seeds},
    also ``seed_std``, the mean over cells of that std: the noise floor below which two
    rows' best, worst or spread do not differ."""
    accs = np.array(list(cells.values()))
    best = float(accs.max())
    row = {"optimizer": name, "cells": len(accs), "best": best,
           "worst": float(accs.min()), "spread": best - float(accs.min()),
           "mean": float(accs.mean()),
           "share_within_1pt": float((accs >= best - WITHIN - 1e-12).mean())}
    if stds is not None:
        finite = [v for k, v in stds.items() if k in cells and np.isfinite(v)]
        row["seed_std"] = float(np.mean(finite)) if finite else float("nan")
    return row


def constant_row(records: list[dict]) -> dict:
    """The sanity row of the constant predictor (the fit labels' majority class): every
    cell at its test accuracy, so a row near it has not learnt."""
    known = [r["constant_test_acc"] for r in records if r.get("constant_test_acc") is not None]
    acc = float(np.mean(known)) if known else float("nan")
    return {"optimizer": "sanity: constant predictor (majority class)", "cells": 1,
            "best": acc, "worst": acc, "spread": 0.0, "mean": acc, "share_within_1pt": 1.0,
            "seed_std": 0.0}


COLUMNS = ["optimizer", "cells", "best", "worst", "spread", "mean", "share_within_1pt",
           "seed_std"]


def run_sensitivity(cfg: SensitivityConfig, out: str | Path, *,
                    store: str | Path | None = None, resume: bool = False,
                    progress_bar: bool | None = None) -> dict:
    """Train the grid at every seed (resumable); the sensitivity table and heat maps."""
    cfg.validate()
    store = Path(store or cfg.store or default_store(out))
    run = RunDir(out, {"command": "optim sensitivity", **asdict(cfg), "store": str(store)},
                 resume=resume)
    specs = grid_specs(cfg, store)
    records = execute(specs, StudyLog(run), progress_bar=progress_bar, name="sensitivity")
    cells: dict[str, dict] = {o: {} for o in cfg.optimizers}
    for spec in specs:
        cells[spec.config.optimizer].setdefault(cell_key(spec.config), []).append(
            records[spec.name])
    test = {o: {k: mean_std([r.get("test_acc") for r in rs]) for k, rs in c.items()}
            for o, c in cells.items()}
    means = {o: {k: v[0] for k, v in c.items()} for o, c in test.items()}
    stds = {o: {k: v[1] for k, v in c.items()} for o, c in test.items()}
    val_means = {o: {k: mean_std([r.get("val_acc") for r in rs])[0] for k, rs in c.items()}
                 for o, c in cells.items()}
    rows = [sensitivity_row(o, means[o], stds[o]) for o in cfg.optimizers]
    shared = set(SEARCH_GRIDS.get(cfg.grid).lrs)
    if "sgd" in means:
        sub = {k: v for k, v in means["sgd"].items() if k[0] in shared}
        if sub:
            rows.append(sensitivity_row("sgd (the 3 shared learning rates)", sub, stds["sgd"]))
    sanity = [constant_row([records[spec.name] for spec in specs])]
    spreads = seed_spreads(cells, shared)
    comparisons = compare({"spread": spreads}, higher_is_better=False)
    _plot(run, cfg, means)
    (run.path / "table.md").write_text(
        markdown_table(rows + sanity, COLUMNS, digits=2)
        + comparison_markdown(COMPARED, comparisons))
    summary = {"rows": rows, "sanity": sanity, "seeds": cfg.seeds, "grid": cfg.grid,
               "spread_per_seed": spreads, "comparisons": comparisons,
               "cells": {o: [{"lr": k[0], "radius": k[1], "test_acc": v,
                              "val_acc": val_means[o][k]} for k, v in c.items()]
                         for o, c in means.items()},
               "store": str(store)}
    run.write_summary(summary)
    write_study_results("genlab optim sensitivity", cfg, out, sensitivity_results(summary, cfg))
    return summary


#: what the comparisons table compares
COMPARED = "spread (best - worst cell, points; lower is better)"


def seed_spreads(cells: dict[str, dict[tuple, list[dict]]], shared_lrs: set
                 ) -> dict[str, dict[int, float]]:
    """{optimizer: {seed: best - worst test accuracy over that seed's cells}} (SGD over the
    cells of the shared learning rates, as every other optimiser's grid spans them); a
    seed whose cells are not all finished with a finite accuracy is left out."""
    out: dict[str, dict[int, float]] = {}
    for opt, by_cell in cells.items():
        keep = {k: rs for k, rs in by_cell.items() if opt != "sgd" or k[0] in shared_lrs}
        by_seed: dict[int, list[float]] = {}
        for rs in keep.values():
            for r in rs:
                acc = r.get("test_acc")
                if isinstance(acc, (int, float)) and np.isfinite(acc):
                    by_seed.setdefault(int(r["seed"]), []).append(float(acc))
        out[opt] = {s: max(v) - min(v) for s, v in by_seed.items() if len(v) == len(keep)}
    return out


def _plot(run: RunDir, cfg: SensitivityConfig, means: dict) -> None:
    names = list(means)
    fig, axes = figure(ncols=len(names), width=2.6, height=2.6)
    lo = min(min(c.values()) for c in means.values())
    for ax, name in zip(axes[0], names, strict=True):
        cells = means[name]
        lrs = sorted({k[0] for k in cells})
        radii = sorted({k[1] for k in cells}, key=lambda r: (r is None, r))
        grid = np.array([[cells.get((lr, r), np.nan) for lr in lrs] for r in radii])
        im = ax.imshow(grid, vmin=lo, vmax=100, cmap="viridis", aspect="auto")
        for i in range(len(radii)):
            for j in range(len(lrs)):
                ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", fontsize=6,
                        color="w")
        ax.set_xticks(range(len(lrs)), [f"{lr:g}" for lr in lrs], fontsize=6, rotation=60)
        field_ = radius_field(name)
        ax.set_yticks(range(len(radii)), ["-" if r is None else f"{r:g}" for r in radii],
                      fontsize=6)
        ax.set(title=name, xlabel="lr", ylabel=field_ or "")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="test accuracy (%)")
    run.save_figure(fig, "sensitivity.png")


def report(summary: dict, cfg: SensitivityConfig) -> list:
    """What `genlab optim sensitivity` prints: the grid's table."""
    return [("test accuracy (%) over the grid's cells (share_within_1pt: a fraction of the "
             "cells)", summary["rows"] + summary["sanity"], COLUMNS),
            comparison_block(COMPARED, summary["comparisons"])]


STUDY = register_study(Study("sensitivity", SensitivityConfig, run_sensitivity, report,
                             digits=2))
