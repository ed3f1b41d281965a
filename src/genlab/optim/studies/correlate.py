"""Which measure predicts the generalization gap? A grid of digits trainings and Kendall taus.

Protocol (after Jiang et al. 2020, "Fantastic generalization measures and where to find
them", scaled down to digits; the sizes are ours): every combination of learning rate, batch
size, width, depth, optimiser and weight decay trains one model of one architecture until
its training cross-entropy (the whole training set, eval mode) is below ``stop_loss``, with
``epochs`` as the cap (`optim train --stop-loss`). Every model counts: one that hits the cap
above the loss is kept in every table, counted ("capped") and listed with its epochs and
loss, and drawn hollow in the scatter plots (a diverged one has no measures; it is counted
apart). For each model we record the gaps (gap_acc = train_acc - test_acc, gap_loss =
test_loss - train_loss) and every measure on its training set. The primary result per
measure is the granulated tau (the mean over hyper-parameters of the tau within groups
where only that hyper-parameter varies) and Jiang et al.'s conditional-independence score
K; the plain Kendall tau over all models, with its bootstrap interval, is secondary. The
claim's comparison (``paired``: tau(nonuniformity) - tau(sharpness) on the same models,
granulated and plain) is judged through genlab.core.stats: paired bootstrap over the
models, Holm over the claim's pairs, and for an undecided pair the number of models a
decision needs (genlab.optim.measures.correlation.paired_table).

The stopping rule's values (ARCH_GRIDS; measured on corners of each grid, constant learning
rate, 200-epoch cap, docs/nonuniformity_sizing.md "The stopping rule"):
- the learning rate is constant: under a cosine schedule to the cap the learning rate
  vanishes before the slow corners get there (MLP lr 0.02, batch 128: training CE 0.033 and
  0.047 after a 60-epoch cosine, 0.011 after a 200-epoch one), and where the model stops
  would depend on the cap;
- MLP: 0.01, Jiang et al.'s value on CIFAR-10; every measured corner that learns reaches
  it within 23-106 epochs (lr 0.1, batch 16, depth 3 does not learn at all and is capped);
- Transformer: 0.05. Under weight decay 1e-3 and the larger learning rates SGD's noise holds
  the training CE at 0.02-0.1 (lr 0.05 batch 32: minimum 0.021 over 200 epochs; lr 0.1:
  0.039), so 0.01 capped 2 of the 4 measured corners; every measured corner is below 0.05
  within 39-114 epochs;
- CNN: 0.05, and depths {2, 3} instead of {1, 2}: a depth-1 CNN (one conv block, then the
  mean over positions) does not fit digits (training CE 0.10 and 0.13 after 200 epochs), so
  under any common loss it would only be capped; the measured depth-2 and depth-3 corners
  are below 0.05 within 4-104 epochs.

Defaults per architecture (ARCH_GRIDS; any option given overrides its default): MLP 324,
CNN 216 and Transformer 144 trainings over learning rate, batch size, width, depth,
optimiser (SGD, SAM) and weight decay (docs/nonuniformity_sizing.md sizes them).
``--stop-loss 0`` trains every model for ``epochs`` (the protocol before the rule, which the
pilot tables of docs/nonuniformity_studies.md used). A run folder made before the stopping
rule (its config.json has ``min_train_acc``, not ``stop_loss``) is refused on ``--resume``
naming the options that differ; its summary.json stays readable
(experiments/nonuniformity_sizing.py reads both kinds).
"""

from __future__ import annotations

import math
import time
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
from genlab.optim.studies.results import correlate_results, write_study_results
from genlab.optim.training.models import ARCHS
from genlab.optim.training.train import TrainConfig

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
            "epochs": 200, "schedule": "constant", "stop_loss": 0.01},
    "cnn": {"lrs": [0.02, 0.05, 0.1], "batch_sizes": [32, 64, 128], "widths": [8, 16, 32],
            "depths": [2, 3], "optimizers": ["sgd", "sam"], "weight_decays": [0.0, 5e-4],
            "epochs": 200, "schedule": "constant", "stop_loss": 0.05},
    "transformer": {"lrs": [0.03, 0.05, 0.1], "batch_sizes": [32, 64], "widths": [16, 24, 32],
                    "depths": [1, 2], "optimizers": ["sgd", "sam"],
                    "weight_decays": [5e-4, 1e-3], "epochs": 200, "schedule": "constant",
                    "stop_loss": 0.05},
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
                                     help="The cap on each model's epochs "
                                          f"({_per_arch('epochs')}).")
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
    stop_loss: float | None = option(None, ge=0, help="Every model trains until its training "
                                     "cross-entropy is below this, --epochs being the cap; 0: "
                                     "every model trains --epochs (the protocol before the "
                                     f"rule) ({_per_arch('stop_loss')}).")
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
        return TrainConfig(arch=self.arch, epochs=self.epochs, stop_loss=self.stop_loss,
                           momentum=self.momentum,
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
    cpu0 = time.process_time()  # trainings run in this process (run_grid)
    records = run_grid(run, expand(cfg.base(), cfg.axes()), progress_bar=progress_bar,
                       name=f"correlate {cfg.arch}")
    varying = [h for h, vals in cfg.axes().items() if len(vals) > 1]
    models = with_random_measure([r for r in records if not r.get("diverged")])
    if not models:
        raise DivergedError("every training of the grid diverged; lower the learning rates")
    capped = ([r for r in models if not r.get("reached_stop_loss")] if cfg.stop_loss > 0
              else [])  # without the rule no model is capped: each trains every epoch
    measures = (*TAU_MEASURES, RANDOM_MEASURE)  # the last: the sanity row
    tables = {gap: tau_table(models, measures, gap, varying) for gap in GAPS}
    # the claim's comparison: tau(nonuniformity) - tau(sharpness) on every model, paired
    # bootstrap, Holm over the claim's pairs (genlab.optim.measures.correlation)
    paired = ({gap: paired_table(models, gap, varying, resamples=cfg.resamples,
                                 seed=cfg.seed) for gap in GAPS}
              if len(models) >= 3 else {})
    for gap in GAPS:
        _scatter(run, models, gap)
    what = population(len(models), len(capped), cfg)
    (run.path / "table.md").write_text(
        tables_markdown(tables, what) + paired_markdown(paired, what)
        + capped_markdown(capped, cfg))
    summary = {"arch": cfg.arch, "trainings": len(records),
               "diverged": len(records) - len(models), "hyperparameters": varying,
               "stop_loss": cfg.stop_loss, "epochs_cap": cfg.epochs, "models": len(models),
               "capped": len(capped), "capped_models": capped_rows(capped),
               "train_acc_min": min(r["train_acc"] for r in models),
               "train_acc_max": max(r["train_acc"] for r in models),
               "tau": tables, "paired": paired, "records": records,
               "cpu_seconds_this_invocation": time.process_time() - cpu0}
    run.write_summary(summary)
    write_study_results("genlab optim correlate", cfg, out, correlate_results(summary, cfg))
    return summary


TABLE_COLUMNS = ["measure", "granulated", "K", "tau", "tau_lo", "tau_hi"]
PAIRED_COLUMNS = ["a", "b", "granulated_diff", "granulated_lo", "granulated_hi",
                  "granulated_verdict", "granulated_models_needed", "cmi_a", "cmi_b",
                  "tau_diff", "tau_lo", "tau_hi", "tau_verdict", "tau_models_needed"]
CAPPED_COLUMNS = ["key", "epochs_trained", "train_loss", "train_acc", "test_acc"]


def population(models: int, capped: int, cfg: CorrelateConfig) -> str:
    """The models a table is computed over, in words."""
    if not cfg.stop_loss:
        return f"all {models} models ({cfg.epochs} epochs each, no stopping rule)"
    return (f"all {models} models ({models - capped} reached training cross-entropy "
            f"< {cfg.stop_loss:g}, {capped} capped at {cfg.epochs} epochs)")


def capped_rows(capped: list[dict]) -> list[dict]:
    """The models that hit the epoch cap without reaching the loss: key and figures."""
    return [{c: r.get(c) for c in CAPPED_COLUMNS} for r in capped]


def capped_markdown(capped: list[dict], cfg: CorrelateConfig) -> str:
    """The table of the capped models (they are in every table above)."""
    title = (f"### Models capped at {cfg.epochs} epochs above training cross-entropy "
             f"{cfg.stop_loss:g} ({len(capped)}; counted in every table above)\n\n")
    return title + (markdown_table(capped_rows(capped), CAPPED_COLUMNS, digits=4)
                    if capped else "none\n") + "\n"


def paired_markdown(paired: dict, what: str) -> str:
    """One Markdown table per gap: granulated tau(a) - tau(b) (the primary result) and plain
    tau(a) - tau(b), intervals at Holm's levels, verdicts, models needed, each K."""
    return "".join(f"### {PAIRED_TITLE} against {gap}, {what}\n\n"
                   + markdown_table(rows, PAIRED_COLUMNS, digits=2) + "\n"
                   for gap, rows in paired.items())


#: the paired tables' title
PAIRED_TITLE = ("tau(a) - tau(b), granulated then plain (paired bootstrap over models, "
                "Holm over the claim's pairs; cmi: Jiang et al.'s K)")


def tables_markdown(tables: dict, title: str) -> str:
    """One Markdown table per gap: granulated tau and K (primary), plain tau and its 95%
    bootstrap interval."""
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
        for o in opts:  # a capped model: a hollow marker
            for reached in (True, False):
                rs = [r for r in records if r["optimizer"] == o and r.get(m) is not None
                      and bool(r.get("reached_stop_loss")) == reached]
                ax.scatter([r[m] for r in rs], [r[gap] for r in rs], s=12,
                           color=colors[o] if reached else "none", edgecolors=colors[o],
                           label=o if reached else f"{o}, capped")
        vals = np.array([r[m] for r in records if r.get(m) is not None], dtype=float)
        if len(vals) and np.all(vals > 0):
            ax.set_xscale("log")
        ax.set(xlabel=m, ylabel=gap if i % ncols == 0 else None)
    for j in range(len(TAU_MEASURES), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    axes[0][0].legend(fontsize=7)
    run.save_figure(fig, f"scatter_{gap}.png")


def report(summary: dict, cfg: CorrelateConfig) -> list:
    """What `genlab optim correlate` prints: the models (capped ones counted), the taus
    over every model, the paired differences (the claim), then the capped models."""
    what = population(summary["models"], summary["capped"], cfg)
    blocks: list = [f"training accuracy {summary['train_acc_min']:.2f}%-"
                    f"{summary['train_acc_max']:.2f}% over {what}; "
                    f"{summary['diverged']} diverged"]
    blocks += [(f"Kendall tau against {gap}, {what}", rows, TABLE_COLUMNS)
               for gap, rows in summary["tau"].items()]
    blocks += [(f"{PAIRED_TITLE} against {gap}", rows, PAIRED_COLUMNS)
               for gap, rows in summary.get("paired", {}).items()]
    if summary["capped_models"]:
        blocks.append((f"models capped at {cfg.epochs} epochs (counted above)",
                       summary["capped_models"], CAPPED_COLUMNS))
    return blocks


STUDY = register_study(Study("correlate", CorrelateConfig, run_correlate, report, digits=2))
