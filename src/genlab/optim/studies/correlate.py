"""Which measure predicts the generalization gap? A grid of digits trainings and Kendall taus.

Protocol (after Jiang et al. 2020, scaled down to digits; the sizes are ours): every
combination of learning rate, batch size, width, depth and optimiser trains one model of
one architecture for a fixed number of epochs; for each model we record the gaps
(gap_acc = train_acc - test_acc, gap_loss = test_loss - train_loss) and every measure on
its training set. The table gives, per measure, the plain Kendall tau over all models and
the granulated tau (mean over hyper-parameters of the tau within groups where only that
hyper-parameter varies). Unlike Jiang et al. the models are not trained to a common
training loss, which leaves the optimisation state as a confounder; the tables are also
given over the "converged" models only (training accuracy >= ``min_train_acc`` percent), a
stand-in for Jiang et al.'s common stopping criterion; with a cosine learning rate
(``schedule``) and enough epochs every model of the grid reaches it (the summary gives the
lowest and highest training accuracy).

Defaults per architecture (``CorrelateConfig.for_arch``; any option given overrides its
default): the MLP grid is 32 trainings of 15 epochs at a constant learning rate; the
Transformer grid is 32 trainings (learning rates 0.03 and 0.1, batch 32 and 64, width 24
and 32, 1 and 2 blocks, SGD and SAM) of 40 epochs at a cosine learning rate with weight
decay 5e-4, so that at least 24 of them reach 99% training accuracy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from genlab.core.errors import ConfigError, DivergedError, require_choice
from genlab.core.report import figure, markdown_table
from genlab.core.runs import RunDir
from genlab.optim.measures.correlation import RANDOM_MEASURE, tau_table, with_random_measure
from genlab.optim.studies.grid import expand, run_grid
from genlab.optim.studies.models import ARCHS
from genlab.optim.studies.train import TrainConfig

TAU_MEASURES = ("trace_sigma", "minibatch_noise", "curvature_nonuniformity",
                "hessian_top_eigenvalue", "hessian_trace", "m_sharpness", "average_sharpness",
                "gradient_diversity", "noise_scale")
GAPS = ("gap_acc", "gap_loss")

#: architecture -> its grid's defaults where they differ from CorrelateConfig's (the MLP's)
ARCH_GRIDS: dict[str, dict] = {
    "transformer": {"lrs": [0.03, 0.1], "batch_sizes": [32, 64], "widths": [24, 32],
                    "depths": [1, 2], "optimizers": ["sgd", "sam"], "epochs": 40,
                    "schedule": "cosine", "weight_decay": 5e-4},
}


@dataclass
class CorrelateConfig:
    arch: str = "mlp"
    lrs: list[float] = field(default_factory=lambda: [0.02, 0.1])
    batch_sizes: list[int] = field(default_factory=lambda: [16, 128])
    widths: list[int] = field(default_factory=lambda: [32, 128])
    depths: list[int] = field(default_factory=lambda: [1, 2])
    optimizers: list[str] = field(default_factory=lambda: ["sgd", "sam"])
    epochs: int = 15
    momentum: float = 0.9
    weight_decay: float = 0.0
    schedule: str = "constant"
    rho: float = 0.05
    seed: int = 0
    measure_samples: int = 256
    curvature_samples: int = 64
    measure_iterations: int = 15
    measure_probes: int = 10
    min_train_acc: float = 99.0  # percent: the "converged" subset (stand-in for a common loss)
    threads: int = 1  # torch intra-op threads of every training (0: torch's default)

    @classmethod
    def for_arch(cls, arch: str = "mlp", **options) -> CorrelateConfig:
        """The config of ``arch`` at its defaults (ARCH_GRIDS), ``options`` (not None) on top."""
        require_choice("arch", arch, ARCHS)
        values = {**ARCH_GRIDS.get(arch, {}), **{k: v for k, v in options.items()
                                                 if v is not None}}
        return cls(arch=arch, **values)

    def validate(self) -> None:
        require_choice("arch", self.arch, ARCHS)
        if not 0 <= self.min_train_acc <= 100:
            raise ConfigError(f"min_train_acc is a percentage (0-100), got {self.min_train_acc}")
        for name in ("lrs", "batch_sizes", "widths", "depths", "optimizers"):
            if not getattr(self, name):
                raise ConfigError(f"{name}: give at least one value")
        self.base().validate()
        for cfg in [c for _, c in expand(self.base(), self.axes())]:
            cfg.validate()

    def axes(self) -> dict[str, list]:
        return {"lr": self.lrs, "batch_size": self.batch_sizes, "width": self.widths,
                "depth": self.depths, "optimizer": self.optimizers}

    def base(self) -> TrainConfig:
        return TrainConfig(arch=self.arch, epochs=self.epochs, momentum=self.momentum,
                           weight_decay=self.weight_decay, schedule=self.schedule,
                           rho=self.rho, seed=self.seed, measure_samples=self.measure_samples,
                           curvature_samples=self.curvature_samples,
                           measure_iterations=self.measure_iterations,
                           measure_probes=self.measure_probes, threads=self.threads)


def run_correlate(cfg: CorrelateConfig, out: str | Path, *, resume: bool = False,
                  progress_bar: bool | None = None) -> dict:
    """Train the grid (resumable), then the tau tables and the scatter plots."""
    cfg.validate()
    run = RunDir(out, {"command": "optim correlate", **asdict(cfg)}, resume=resume)
    records = run_grid(run, expand(cfg.base(), cfg.axes()), progress_bar=progress_bar,
                       name=f"correlate {cfg.arch}")
    varying = [h for h, vals in cfg.axes().items() if len(vals) > 1]
    finished = with_random_measure([r for r in records if not r.get("diverged")])
    if not finished:
        raise DivergedError("every training of the grid diverged; lower the learning rates")
    measures = (*TAU_MEASURES, RANDOM_MEASURE)  # the last: the sanity row
    tables = {gap: tau_table(finished, measures, gap, varying) for gap in GAPS}
    converged = [r for r in finished if r["train_acc"] >= cfg.min_train_acc]
    tables_converged = ({gap: tau_table(converged, measures, gap, varying) for gap in GAPS}
                        if len(converged) >= 2 else {})
    for gap in GAPS:
        _scatter(run, finished, gap)
    (run.path / "table.md").write_text(
        tables_markdown(tables, f"all {len(finished)} trainings")
        + tables_markdown(tables_converged, f"{len(converged)} converged trainings "
                                            f"(training accuracy >= {cfg.min_train_acc:g}%)"))
    summary = {"arch": cfg.arch, "trainings": len(records),
               "diverged": len(records) - len(finished), "hyperparameters": varying,
               "train_acc_min": min(r["train_acc"] for r in finished),
               "train_acc_max": max(r["train_acc"] for r in finished),
               "tau": tables, "converged": len(converged), "tau_converged": tables_converged,
               "records": records}
    run.write_summary(summary)
    return summary


TABLE_COLUMNS = ["measure", "tau", "tau_lo", "tau_hi", "granulated"]


def tables_markdown(tables: dict, title: str) -> str:
    """One Markdown table per gap: tau, its 95% bootstrap interval, granulated tau."""
    return "".join(f"### Kendall tau against {gap}, {title}\n\n"
                   + markdown_table(rows, TABLE_COLUMNS, digits=2) + "\n"
                   for gap, rows in tables.items())


def _scatter(run: RunDir, records: list[dict], gap: str) -> None:
    ncols = 3
    nrows = math.ceil(len(TAU_MEASURES) / ncols)
    fig, axes = figure(ncols=ncols, nrows=nrows, width=3.4, height=2.8)
    opts = sorted({r["optimizer"] for r in records})
    colors = dict(zip(opts, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple",
                             "tab:brown", "tab:pink", "tab:gray"], strict=False))
    for i, m in enumerate(TAU_MEASURES):
        ax = axes[i // ncols][i % ncols]
        for o in opts:
            rs = [r for r in records if r["optimizer"] == o and r.get(m) is not None]
            ax.scatter([r[m] for r in rs], [r[gap] for r in rs], s=12, color=colors[o], label=o)
        vals = np.array([r[m] for r in records if r.get(m) is not None], dtype=float)
        if len(vals) and np.all(vals > 0):
            ax.set_xscale("log")
        ax.set(xlabel=m, ylabel=gap if i % ncols == 0 else None)
    for j in range(len(TAU_MEASURES), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    axes[0][0].legend(fontsize=7)
    run.save_figure(fig, f"scatter_{gap}.png")
