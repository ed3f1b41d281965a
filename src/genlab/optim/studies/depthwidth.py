"""Depth and width against nonuniformity: tr Sigma, s and lambda_max over MLP and CNN grids.

Every (depth, width) of each grid trains ``seeds`` times with SGD (momentum 0.9, cosine
learning rate, fixed lr per architecture: ours) on the whole digits training pool, then
tr Sigma, s = sqrt(lambda_max(Sigma_H)) and lambda_max(H) are measured on the training
set and the gaps (test - train loss, train - test accuracy) recorded. Reported per
architecture: the mean of each over seeds per grid cell, plots against width (one line per
depth) and against depth (one line per width), and Kendall tau of each measure with depth
and with width (how they relate) and with the gaps over all SGD-trained models of the grid
(the paper's "the generalization gap of SGD-trained models grows with nonuniformity").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genlab.core.errors import ConfigError
from genlab.core.options import Options, check_options, option, option_like
from genlab.core.registry import Registry
from genlab.core.report import figure, markdown_table
from genlab.core.runs import RunDir
from genlab.optim.measures.correlation import (
    RANDOM_MEASURE,
    kendall_tau,
    kendall_tau_interval,
    with_random_measure,
)
from genlab.optim.studies import Study, register_study
from genlab.optim.studies.grid import execute, open_study, stored
from genlab.optim.studies.results import depthwidth_results, write_study_results
from genlab.optim.studies.stats import mean_std
from genlab.optim.training.train import TrainConfig

MEASURES = ("trace_sigma", "curvature_nonuniformity", "hessian_top_eigenvalue")
GAPS = ("gap_loss", "gap_acc")
CELL_COLUMNS = ["depth", "width", *MEASURES, *GAPS, "train_acc"]  # the cells' table
#: architecture -> (depths, widths, lr) of the default grids (ours); an architecture's
#: grid is three options of DepthWidthConfig (``<arch>_depths``, ``_widths``, ``_lr``)
DEPTH_WIDTH_GRIDS: Registry[tuple[list[int], list[int], float]] = Registry("depth-width grid")
DEPTH_WIDTH_GRIDS.register("mlp", ([1, 2, 3, 4], [16, 32, 64, 128], 0.05))
DEPTH_WIDTH_GRIDS.register("cnn", ([1, 2, 3], [8, 16, 32], 0.05))


def _grid_field(arch: str, part: int, what: str):
    """The option of one part (0 depths, 1 widths, 2 lr) of ``arch``'s grid, its default
    read from DEPTH_WIDTH_GRIDS."""
    if part == 2:
        return option(DEPTH_WIDTH_GRIDS.get(arch)[2], gt=0,
                      help=f"SGD learning rate of the {arch} grid.")
    return option(factory=lambda: list(DEPTH_WIDTH_GRIDS.get(arch)[part]), parse="list",
                  help=f"{what} of the {arch} grid.")


@dataclass
class DepthWidthConfig(Options):
    """The options of `genlab optim depth-width`: one grid of depths x widths per
    architecture (its lr fixed), ``seeds`` trainings per cell."""

    archs: list[str] = option(factory=lambda: list(DEPTH_WIDTH_GRIDS), parse="list",
                              choices=DEPTH_WIDTH_GRIDS, help="Architectures whose grids train.")
    seeds: list[int] = option(factory=lambda: [0, 1, 2], parse="seeds",
                              help="Seeds of every grid cell.")
    epochs: int = option_like(TrainConfig, "epochs", default=30)
    batch_size: int = option_like(TrainConfig, "batch_size", default=64)
    mlp_depths: list[int] = _grid_field("mlp", 0, "Depths")
    mlp_widths: list[int] = _grid_field("mlp", 1, "Widths")
    mlp_lr: float = _grid_field("mlp", 2, "")
    cnn_depths: list[int] = _grid_field("cnn", 0, "Depths")
    cnn_widths: list[int] = _grid_field("cnn", 1, "Widths")
    cnn_lr: float = _grid_field("cnn", 2, "")
    measure_samples: int = option_like(TrainConfig, "measure_samples", default=256)
    curvature_samples: int = option_like(TrainConfig, "curvature_samples", default=64)
    measure_iterations: int = option_like(TrainConfig, "measure_iterations", default=20)
    measure_probes: int = option_like(TrainConfig, "measure_probes", default=10)
    threads: int = option_like(TrainConfig, "threads", default=1)
    store: str | None = option(None, help="Folder of the trainings, shared by the studies "
                               "(default: 'trainings' next to --out).")

    def grid(self, arch: str) -> tuple[list[int], list[int], float]:
        """(depths, widths, lr) of ``arch``."""
        return tuple(getattr(self, f"{arch}_{part}") for part in ("depths", "widths", "lr"))

    def validate(self) -> None:
        check_options(self)  # types, choices (archs), limits; seeds
        if not self.archs:
            raise ConfigError("depth-width: give at least one architecture")
        for a in self.archs:
            depths, widths, _ = self.grid(a)
            if not depths or not widths:
                raise ConfigError(f"depth-width: empty depth or width list for {a!r}")
            for d in depths:
                for w in widths:
                    self.config(a, d, w, 0).validate()

    def config(self, arch: str, depth: int, width: int, seed: int) -> TrainConfig:
        return TrainConfig(arch=arch, depth=depth, width=width, lr=self.grid(arch)[2],
                           epochs=self.epochs, batch_size=self.batch_size, schedule="cosine",
                           split="full", data_seed=0, seed=seed,
                           measure_samples=self.measure_samples,
                           curvature_samples=self.curvature_samples,
                           measure_iterations=self.measure_iterations,
                           measure_probes=self.measure_probes, threads=self.threads)


def depthwidth_specs(cfg: DepthWidthConfig, arch: str, store: Path) -> list:
    """The run specs of one architecture's grid: every (depth, width) at every seed."""
    return [stored(store, f"{arch}-d{d}-w{w}", cfg.config(arch, d, w, s))
            for d in cfg.grid(arch)[0] for w in cfg.grid(arch)[1] for s in cfg.seeds]


def run_depthwidth(cfg: DepthWidthConfig, out: str | Path, *, store: str | Path | None = None,
                   resume: bool = False, progress_bar: bool | None = None) -> dict:
    """Train and measure every grid cell and seed (resumable); tables, taus and plots."""
    run, log, store = open_study("optim depth-width", cfg, out, store, resume=resume)
    results = {}
    for arch in cfg.archs:
        specs = depthwidth_specs(cfg, arch, store)
        records = execute(specs, log, progress_bar=progress_bar, name=f"depth-width {arch}")
        recs = [r for r in records.values() if not r.get("diverged")]
        cells = []
        for d in cfg.grid(arch)[0]:
            for w in cfg.grid(arch)[1]:
                rs = [r for r in recs if r["depth"] == d and r["width"] == w]
                cell = {"depth": d, "width": w, "seeds": len(rs)}
                for key in (*MEASURES, *GAPS, "train_acc", "test_acc"):
                    cell[key], cell[f"{key}_std"] = mean_std([r.get(key) for r in rs])
                cells.append(cell)
        taus = [tau_row(with_random_measure(recs), m) for m in (*MEASURES, RANDOM_MEASURE)]
        results[arch] = {"cells": cells, "taus": taus, "trainings": len(records),
                         "diverged": len(records) - len(recs),
                         "min_train_acc": min(r["train_acc"] for r in recs) if recs else None}
        _plot(run, arch, cells, cfg)
    text = ""
    for arch, res in results.items():
        text += (f"### {arch}\n\n" + markdown_table(res["cells"], CELL_COLUMNS, digits=4)
                 + "\n" + markdown_table(res["taus"], digits=2) + "\n")
    (run.path / "table.md").write_text(text)
    summary = {"results": results, "seeds": cfg.seeds, "store": str(store)}
    run.write_summary(summary)
    write_study_results("genlab optim depth-width", cfg, out, depthwidth_results(summary, cfg))
    return summary


def tau_row(recs: list[dict], measure: str) -> dict:
    """Kendall tau of a measure with depth, width and each gap, with bootstrap intervals."""
    row = {"measure": measure}
    pairs = {"depth": ([r["depth"] for r in recs], [r[measure] for r in recs]),
             "width": ([r["width"] for r in recs], [r[measure] for r in recs]),
             **{g: ([r[measure] for r in recs], [r[g] for r in recs]) for g in GAPS}}
    for name, (x, y) in pairs.items():
        lo, hi = kendall_tau_interval(x, y)
        row[f"tau_{name}"] = kendall_tau(x, y)
        row[f"tau_{name}_interval"] = f"[{lo:.2f}, {hi:.2f}]"
    return row


def _plot(run: RunDir, arch: str, cells: list[dict], cfg: DepthWidthConfig) -> None:
    keys = (*MEASURES, "gap_loss")
    fig, axes = figure(ncols=len(keys), nrows=2, width=3.2, height=2.7)
    for j, key in enumerate(keys):
        for d in cfg.grid(arch)[0]:
            cs = [c for c in cells if c["depth"] == d]
            axes[0][j].errorbar([c["width"] for c in cs], [c[key] for c in cs],
                                yerr=[c[f"{key}_std"] for c in cs], marker="o", capsize=2,
                                label=f"depth {d}")
        for w in cfg.grid(arch)[1]:
            cs = [c for c in cells if c["width"] == w]
            axes[1][j].errorbar([c["depth"] for c in cs], [c[key] for c in cs],
                                yerr=[c[f"{key}_std"] for c in cs], marker="o", capsize=2,
                                label=f"width {w}")
        vals = np.array([c[key] for c in cells], dtype=float)
        for i in range(2):
            if np.all(vals > 0):
                axes[i][j].set_yscale("log")
            axes[i][j].set(title=key if i == 0 else None, xlabel="width" if i == 0 else "depth")
        axes[0][j].set_xscale("log", base=2)
    axes[0][0].legend(fontsize=6)
    axes[1][0].legend(fontsize=6)
    fig.suptitle(f"{arch}: mean ± std over seeds")
    run.save_figure(fig, f"depth_width_{arch}.png")


def report(summary: dict, cfg: DepthWidthConfig) -> list:
    """What `genlab optim depth-width` prints: per architecture its cells, then its taus."""
    tables = []
    for arch, res in summary["results"].items():
        tables.append((f"{arch}: means over seeds (accuracies and gap_acc in percent)",
                       res["cells"], CELL_COLUMNS))
        tables.append((f"{arch}: Kendall tau", res["taus"], None))
    return tables


STUDY = register_study(Study("depth-width", DepthWidthConfig, run_depthwidth, report,
                             digits=4))
