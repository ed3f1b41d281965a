"""Standard training: every optimiser, tuned alike, on digits with a CNN and a Transformer.

Per architecture: the hyper-parameter search of search.py (9 trainings per optimiser,
chosen on validation accuracy), then each optimiser with its choice over ``seeds`` seeds
(seed 0, where listed, is the search training itself: same config, same store folder).
Accuracies are percent. Reported: training
accuracy reached (convergence), validation accuracy of the choice, clean test accuracy mean
+- std over seeds; then each guided optimiser minus SAM and minus SGD in test accuracy,
paired by seed, with its interval, Holm's correction over every comparison of the study
(both architectures), the verdict class, n and the minimum detectable effect at that n
(stats.py: :func:`~genlab.optim.studies.stats.compare`). Sanity rows: the constant
predictor (majority class of the fit set) and the untrained models.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from genlab.core.errors import ConfigError
from genlab.core.options import check_options, option
from genlab.core.report import figure, markdown_table
from genlab.core.runs import RunDir
from genlab.optim.studies import Study, register_study
from genlab.optim.studies.grid import execute, open_study, stored
from genlab.optim.studies.results import standard_results, write_study_results
from genlab.optim.studies.search import (
    ComparisonOptions,
    Protocol,
    require_baseline,
    run_search,
    with_choice,
)
from genlab.optim.studies.stats import (
    compare,
    comparison_block,
    comparison_markdown,
    mean_std,
    pct,
    per_seed,
)
from genlab.optim.training.models import ARCHS
from genlab.optim.training.tasks import majority_accuracy
from genlab.optim.training.train import prepare, split_scores

FLATNESS = ("sam", "asam")  # the flatness-based reference methods


@dataclass
class StandardConfig(ComparisonOptions):
    """The options of `genlab optim standard`."""

    archs: list[str] = option(factory=lambda: ["cnn", "transformer"], parse="list",
                              choices=ARCHS, help="Architectures.")
    seeds: list[int] = option(factory=lambda: [0, 1, 2], parse="seeds",
                              help="Seeds of the final trainings (seed 0 is the search "
                                   "training, reused).")

    def protocols(self) -> list[Protocol]:
        return [Protocol.for_arch(a, epochs=self.epochs, width=self.width, depth=self.depth,
                                  grid=self.grid, threads=self.threads) for a in self.archs]

    def validate(self) -> None:
        if not self.archs or not self.optimizers:
            raise ConfigError("standard: give at least one architecture and one optimiser")
        require_baseline(self.optimizers, "standard")
        check_options(self)  # types, choices, limits; seeds: integers >= 0, no repeat
        for p in self.protocols():
            p.validate()


def final_specs(protocol: Protocol, choices: dict, seeds: list[int], store: Path,
                label: str = "") -> list:
    """Each optimiser with its choice at each seed (seed 0 = the search training)."""
    return [stored(store, f"{protocol.arch}-{opt}{label}",
                   replace(with_choice(protocol.base(), choice), seed=s))
            for opt, choice in choices.items() for s in seeds]


def untrained_accuracy(protocol: Protocol, seeds: list[int]) -> tuple[float, float]:
    """Test accuracy (percent) of the models at initialisation (mean, std over seeds)."""
    accs = []
    for s in seeds:
        data, model = prepare(replace(protocol.base(), seed=s))
        accs.append(split_scores(model, data.test, torch.device("cpu"))["acc"])
    return mean_std(accs)


def summarise(protocol: Protocol, choices: dict, specs, records: dict,
              seeds: list[int]) -> dict:
    """Table rows (one per optimiser plus sanity rows) of one architecture."""
    by_opt: dict[str, list[dict]] = {}
    for spec in specs:
        by_opt.setdefault(spec.config.optimizer, []).append(records[spec.name])
    stats = {o: mean_std([r.get("test_acc") for r in rs]) for o, rs in by_opt.items()}
    rows = []
    for opt, recs in by_opt.items():
        c = choices[opt]
        train = mean_std([r.get("train_acc") for r in recs])
        rows.append({
            "optimizer": opt, "lr": c["lr"],
            "radius": f"{c['radius_field']} {c['radius']}" if c["radius_field"] else "-",
            "val_acc_seed0": pct(c["val_acc"]), "train_acc": pct(*train, digits=2),
            "test_acc": pct(*stats[opt]), "test_mean": stats[opt][0],
            "test_std": stats[opt][1], "seeds": len(recs),
        })
    data, _ = prepare(protocol.base())
    untrained = untrained_accuracy(protocol, seeds)
    sanity = [{"optimizer": "constant predictor (majority class)",
               "test_acc": pct(majority_accuracy(data)), "test_mean": majority_accuracy(data)},
              {"optimizer": "untrained model", "test_acc": pct(*untrained),
               "test_mean": untrained[0]}]
    return {"arch": protocol.arch, "protocol": asdict(protocol), "rows": rows,
            "sanity": sanity,
            "per_seed": {o: per_seed(rs) for o, rs in by_opt.items()}}


COLUMNS = ["optimizer", "lr", "radius", "val_acc_seed0", "train_acc", "test_acc"]
#: what the comparisons table compares
COMPARED = "test accuracy (points)"


def run_standard(cfg: StandardConfig, out: str | Path, *, store: str | Path | None = None,
                 resume: bool = False, progress_bar: bool | None = None) -> dict:
    """Search, final trainings, tables and plot for every architecture (resumable)."""
    run, log, store = open_study("optim standard", cfg, out, store, resume=resume)
    tables = []
    for protocol in cfg.protocols():
        choices = run_search(protocol, cfg.optimizers, store, log, progress_bar=progress_bar)
        specs = final_specs(protocol, choices, cfg.seeds, store)
        records = execute(specs, log, progress_bar=progress_bar,
                          name=f"standard {protocol.arch}")
        tables.append(summarise(protocol, choices, specs, records, cfg.seeds))
    comparisons = compare({t["arch"]: t["per_seed"] for t in tables})
    _plot(run, tables)
    text = "\n".join(f"### {t['arch']}\n\n" + markdown_table(t["rows"] + t["sanity"], COLUMNS)
                     for t in tables)
    text += comparison_markdown(COMPARED, comparisons)
    (run.path / "table.md").write_text(text)
    summary = {"tables": tables, "comparisons": comparisons, "seeds": cfg.seeds,
               "store": str(store)}
    run.write_summary(summary)
    write_study_results("genlab optim standard", cfg, out, standard_results(summary, cfg))
    return summary


def _plot(run: RunDir, tables: list[dict]) -> None:
    fig, axes = figure(ncols=len(tables), width=4.6, height=3.4)
    for ax, t in zip(axes[0], tables, strict=True):
        names = [r["optimizer"] for r in t["rows"]]
        means = [r["test_mean"] for r in t["rows"]]
        stds = [r["test_std"] for r in t["rows"]]
        ax.bar(range(len(names)), means, yerr=stds, capsize=3,
               color=["0.5" if n == "sgd" else "tab:blue" if n in FLATNESS else "tab:green"
                      for n in names])
        ax.set_xticks(range(len(names)), names, rotation=40, ha="right", fontsize=8)
        low = min(m - s for m, s in zip(means, stds, strict=True))
        ax.set(ylim=(max(0.0, low - 2), 100), ylabel="clean test accuracy (%)",
               title=f"{t['arch']} (mean ± std over seeds)")
    run.save_figure(fig, "standard.png")


def report(summary: dict, cfg: StandardConfig) -> list:
    """What `genlab optim standard` prints: one table per architecture."""
    seeds = ",".join(map(str, cfg.seeds))
    return [*((f"{t['arch']}: test accuracy (%) over seeds {seeds}", t["rows"] + t["sanity"],
               COLUMNS) for t in summary["tables"]),
            comparison_block(COMPARED, summary["comparisons"])]


STUDY = register_study(Study("standard", StandardConfig, run_standard, report))
