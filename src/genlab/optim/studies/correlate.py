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

Defaults per architecture (ARCH_GRIDS; any option given overrides its default) are sized
for the paired comparison the claim makes (docs/nonuniformity_sizing.md): MLP 324 and CNN
216 trainings of 20 epochs, Transformer 144 of 40, all at a cosine learning rate, over
learning rate, batch size, width, depth, optimiser (SGD, SAM) and weight decay. The paired
table (``paired``: tau(nonuniformity) - tau(sharpness) on the same converged trainings, with
paired bootstrap intervals, verdicts and Jiang et al.'s K) is computed on the converged ones.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from genlab.core.errors import ConfigError, DivergedError, require_choice
from genlab.core.options import Options, check_options, option, option_like
from genlab.core.report import figure, markdown_table
from genlab.core.runs import RunDir
from genlab.optim.measures.correlation import (
    RANDOM_MEASURE,
    paired_table,
    tau_table,
    with_random_measure,
)
from genlab.optim.optimizers.registry import OPTIMIZER_REGISTRY
from genlab.optim.studies import Study, register_study
from genlab.optim.studies.grid import expand, run_grid
from genlab.optim.studies.models import ARCHS
from genlab.optim.studies.train import TrainConfig

TAU_MEASURES = ("trace_sigma", "minibatch_noise", "curvature_nonuniformity",
                "hessian_top_eigenvalue", "hessian_trace", "m_sharpness", "average_sharpness",
                "gradient_diversity", "noise_scale")
GAPS = ("gap_acc", "gap_loss")

#: architecture -> the defaults of its grid (an option left unset takes its architecture's;
#: an architecture not listed takes the MLP's). Sized for the paired comparison of tr Sigma
#: with each sharpness measure (docs/nonuniformity_sizing.md, "The sized grids")
ARCH_GRIDS: dict[str, dict] = {
    "mlp": {"lrs": [0.02, 0.05, 0.1], "batch_sizes": [16, 64, 128], "widths": [32, 64, 128],
            "depths": [1, 2, 3], "optimizers": ["sgd", "sam"], "weight_decays": [0.0, 5e-4],
            "epochs": 20, "schedule": "cosine"},
    "cnn": {"lrs": [0.02, 0.05, 0.1], "batch_sizes": [32, 64, 128], "widths": [8, 16, 32],
            "depths": [1, 2], "optimizers": ["sgd", "sam"], "weight_decays": [0.0, 5e-4],
            "epochs": 20, "schedule": "cosine"},
    "transformer": {"lrs": [0.03, 0.05, 0.1], "batch_sizes": [32, 64], "widths": [16, 24, 32],
                    "depths": [1, 2], "optimizers": ["sgd", "sam"],
                    "weight_decays": [5e-4, 1e-3], "epochs": 40, "schedule": "cosine"},
}


def arch_defaults(arch: str) -> dict:
    """The grid defaults of ``arch`` (ARCH_GRIDS; the MLP's for one not listed there)."""
    return ARCH_GRIDS.get(arch, ARCH_GRIDS["mlp"])


def _per_arch(name: str) -> str:
    """'default per architecture: ...' of one option, read from ARCH_GRIDS."""
    def shown(value):
        return ",".join(map(str, value)) if isinstance(value, list) else f"{value:g}" \
            if isinstance(value, float) else str(value)
    return "default per architecture: " + "; ".join(
        f"{arch} {shown(grid[name])}" for arch, grid in ARCH_GRIDS.items()) + \
        "; any other as mlp"


def _grid_option(name: str, what: str, **declaration):
    return option(None, help=f"{what} ({_per_arch(name)}).", **declaration)


@dataclass
class CorrelateConfig(Options):
    """The options of `genlab optim correlate`: a grid of trainings of one architecture; an
    axis or setting left unset takes the architecture's default (ARCH_GRIDS, filled in by
    :meth:`resolved`, which the run and config.json hold)."""

    arch: str = option_like(TrainConfig, "arch", default="mlp")
    lrs: list[float] | None = _grid_option("lrs", "Learning rates", parse="list")
    batch_sizes: list[int] | None = _grid_option("batch_sizes", "Batch sizes", parse="list")
    widths: list[int] | None = _grid_option("widths", "Widths", parse="list")
    depths: list[int] | None = _grid_option("depths", "Depths", parse="list")
    optimizers: list[str] | None = _grid_option("optimizers", "Optimisers", parse="list",
                                                choices=OPTIMIZER_REGISTRY)
    epochs: int | None = option_like(TrainConfig, "epochs", default=None,
                                     help=f"Epochs ({_per_arch('epochs')}).")
    momentum: float = option_like(TrainConfig, "momentum")
    weight_decays: list[float] | None = _grid_option("weight_decays", "Weight decays",
                                                     parse="list", ge=0)
    schedule: str | None = option_like(TrainConfig, "schedule", default=None,
                                       help="Learning rate over the epochs: constant or cosine "
                                            f"(to 0) ({_per_arch('schedule')}).")
    rho: float = option_like(TrainConfig, "rho")
    seed: int = option_like(TrainConfig, "seed")
    measure_samples: int = option_like(TrainConfig, "measure_samples", default=256)
    curvature_samples: int = option_like(TrainConfig, "curvature_samples", default=64)
    measure_iterations: int = option_like(TrainConfig, "measure_iterations", default=15)
    measure_probes: int = option_like(TrainConfig, "measure_probes", default=10)
    min_train_acc: float = option(99.0, ge=0, le=100, help="Training accuracy (percent) of "
                                  "the 'converged' subset also tabulated (a stand-in for a "
                                  "common stopping loss).")
    threads: int = option_like(TrainConfig, "threads", default=1)
    resamples: int = option(1000, gt=0, help="Bootstrap resamples of the paired intervals "
                            "(the same resamples for every pair of measures).")

    @classmethod
    def for_arch(cls, arch: str = "mlp", **options) -> CorrelateConfig:
        """The resolved config of ``arch``, ``options`` (not None) on top."""
        return cls(arch=arch, **{k: v for k, v in options.items() if v is not None}).resolved()

    def resolved(self) -> CorrelateConfig:
        """This config with every unset grid option at its architecture's default."""
        require_choice("arch", self.arch, ARCHS)
        defaults = arch_defaults(self.arch)
        return replace(self, **{k: v for k, v in defaults.items() if getattr(self, k) is None})

    def validate(self) -> None:
        """Checks the options as declared, then every training of the resolved grid."""
        check_options(self)
        full = self.resolved()
        for name in ("lrs", "batch_sizes", "widths", "depths", "optimizers", "weight_decays"):
            if not getattr(full, name):
                raise ConfigError(f"{name}: give at least one value")
        for cfg in [full.base(), *(c for _, c in expand(full.base(), full.axes()))]:
            cfg.validate()

    def axes(self) -> dict[str, list]:
        return {"lr": self.lrs, "batch_size": self.batch_sizes, "width": self.widths,
                "depth": self.depths, "optimizer": self.optimizers,
                "weight_decay": self.weight_decays}

    def base(self) -> TrainConfig:
        return TrainConfig(arch=self.arch, epochs=self.epochs, momentum=self.momentum,
                           weight_decay=self.weight_decays[0], schedule=self.schedule,
                           rho=self.rho, seed=self.seed, measure_samples=self.measure_samples,
                           curvature_samples=self.curvature_samples,
                           measure_iterations=self.measure_iterations,
                           measure_probes=self.measure_probes, threads=self.threads)


def run_correlate(cfg: CorrelateConfig, out: str | Path, *, resume: bool = False,
                  progress_bar: bool | None = None) -> dict:
    """Train the grid (resumable), then the tau tables and the scatter plots."""
    cfg.validate()
    cfg = cfg.resolved()  # config.json records the grid that ran
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
    # the claim's comparison: tau(nonuniformity) - tau(sharpness) on the same converged
    # trainings, paired bootstrap intervals, Jiang et al.'s K beside (genlab.optim.measures)
    paired = ({gap: paired_table(converged, gap, varying, resamples=cfg.resamples,
                                 seed=cfg.seed) for gap in GAPS}
              if len(converged) >= 3 else {})
    for gap in GAPS:
        _scatter(run, finished, gap)
    (run.path / "table.md").write_text(
        tables_markdown(tables, f"all {len(finished)} trainings")
        + tables_markdown(tables_converged, f"{len(converged)} converged trainings "
                                            f"(training accuracy >= {cfg.min_train_acc:g}%)")
        + paired_markdown(paired, len(converged)))
    summary = {"arch": cfg.arch, "trainings": len(records),
               "diverged": len(records) - len(finished), "hyperparameters": varying,
               "train_acc_min": min(r["train_acc"] for r in finished),
               "train_acc_max": max(r["train_acc"] for r in finished),
               "tau": tables, "converged": len(converged), "tau_converged": tables_converged,
               "paired": paired, "records": records}
    run.write_summary(summary)
    return summary


TABLE_COLUMNS = ["measure", "tau", "tau_lo", "tau_hi", "granulated"]
PAIRED_COLUMNS = ["a", "b", "tau_diff", "tau_lo", "tau_hi", "verdict", "granulated_diff",
                  "granulated_lo", "granulated_hi", "granulated_verdict", "cmi_a", "cmi_b"]


def paired_markdown(paired: dict, converged: int) -> str:
    """One Markdown table per gap: tau(a) - tau(b) on the converged trainings, intervals,
    verdicts, and each measure's K."""
    return "".join(f"### tau(a) - tau(b) against {gap}, {converged} converged trainings "
                   f"(paired bootstrap 95% intervals; cmi: Jiang et al.'s K)\n\n"
                   + markdown_table(rows, PAIRED_COLUMNS, digits=2) + "\n"
                   for gap, rows in paired.items())


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


def report(summary: dict, cfg: CorrelateConfig) -> list:
    """What `genlab optim correlate` prints: the range of training accuracy, the taus over
    every training and over the converged ones, then the paired differences (the claim)."""
    blocks: list = [f"training accuracy {summary['train_acc_min']:.2f}%-"
                    f"{summary['train_acc_max']:.2f}% over {summary['trainings']} trainings"]
    blocks += [(f"Kendall tau against {gap} ({summary['trainings']} trainings)", rows,
                TABLE_COLUMNS) for gap, rows in summary["tau"].items()]
    blocks += [(f"Kendall tau against {gap}, {summary['converged']} converged trainings "
                f"(train accuracy >= {cfg.min_train_acc:g}%)", rows, TABLE_COLUMNS)
               for gap, rows in summary["tau_converged"].items()]
    blocks += [(f"tau(a) - tau(b) against {gap}, {summary['converged']} converged trainings "
                "(paired bootstrap 95% intervals; cmi: Jiang et al.'s K)", rows,
                ["a", "b", "tau_diff", "tau_lo", "tau_hi", "verdict", "granulated_diff",
                 "granulated_verdict"])
               for gap, rows in summary.get("paired", {}).items()]
    return blocks


STUDY = register_study(Study("correlate", CorrelateConfig, run_correlate, report, digits=2))
