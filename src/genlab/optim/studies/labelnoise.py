"""Label-noise robustness on digits: clean test accuracy of each tuned optimiser under noise.

The protocol mirrors the CIFAR-10 label-noise experiments of the SAM literature (Foret et al.
2021, section 3.3): a fraction of the training labels is flipped (symmetric noise, or the
asymmetric class map of training/noise.py), the model trains on the noisy labels and is scored on
the clean test set (final epoch, no early stopping), mean and standard deviation over
seeds. Every optimiser uses the learning rate and radius the search chose for it on clean
data (search.py, validation accuracy; the same budget for all), so no optimiser is tuned
on noisy or test data. The training accuracy reached on the noisy labels shows how far
each run went towards memorising them. Model size and epochs are ours (digits, CPU).
Each guided optimiser is set against SAM and SGD per noise setting, paired by seed, with
Holm's correction over every comparison of the study (stats.py:
:func:`~genlab.optim.studies.stats.compare`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from genlab.core.errors import ConfigError
from genlab.core.options import check_options, option
from genlab.core.report import figure, markdown_table
from genlab.core.runs import RunDir
from genlab.optim.studies import Study, register_study
from genlab.optim.studies.grid import execute, open_study, stored
from genlab.optim.studies.results import labelnoise_results, write_study_results
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
from genlab.optim.training.noise import NOISE_KINDS
from genlab.optim.training.tasks import majority_accuracy, task_data


@dataclass
class LabelNoiseConfig(ComparisonOptions):
    """The options of `genlab optim labelnoise`."""

    rates: list[float] = option(factory=lambda: [0.2, 0.4, 0.6], parse="list", gt=0, le=1,
                                help="Symmetric noise rates, in (0, 1).")
    asymmetric_rates: list[float] = option(factory=lambda: [0.4], parse="list", gt=0, le=1,
                                           help="Rates of the asymmetric map 7->1, 4->9, 5->6, "
                                                "3<->8, in (0, 1).")
    seeds: list[int] = option(factory=lambda: [0, 1, 2], parse="seeds", help="Seeds.")
    arch: str = option("cnn", help="Architecture.", choices=ARCHS)

    def protocol(self) -> Protocol:
        return Protocol.for_arch(self.arch, epochs=self.epochs, width=self.width,
                                 depth=self.depth, grid=self.grid, threads=self.threads)

    def settings(self) -> list[tuple[str, float]]:
        return ([("symmetric", r) for r in self.rates]
                + [("asymmetric", r) for r in self.asymmetric_rates])

    def validate(self) -> None:
        check_options(self)  # types, choices, limits; seeds: integers >= 0, no repeat
        if not self.settings() or not self.optimizers:
            raise ConfigError("labelnoise needs noise rates and optimizers")
        for kind, rate in self.settings():
            if kind not in NOISE_KINDS or not 0 < rate < 1:
                raise ConfigError(f"label noise rate must be in (0, 1), got {rate}")
        require_baseline(self.optimizers, "labelnoise")
        self.protocol().validate()


def setting_name(kind: str, rate: float) -> str:
    return f"{'sym' if kind == 'symmetric' else 'asym'} {round(100 * rate)}%"


def noise_specs(cfg: LabelNoiseConfig, choices: dict, store: Path) -> list[tuple]:
    """(setting, optimiser, spec) for every setting, optimiser and seed."""
    protocol = cfg.protocol()
    out = []
    for kind, rate in cfg.settings():
        for opt in cfg.optimizers:
            for s in cfg.seeds:
                c = replace(with_choice(protocol.base(), choices[opt]), label_noise=rate,
                            noise_kind=kind, seed=s)
                out.append((setting_name(kind, rate), opt,
                            stored(store, f"{cfg.arch}-noise-{opt}", c)))
    return out


def run_labelnoise(cfg: LabelNoiseConfig, out: str | Path, *, store: str | Path | None = None,
                   resume: bool = False, progress_bar: bool | None = None) -> dict:
    """Every (setting, optimiser, seed) training (resumable), the accuracy table and a plot."""
    run, log, store = open_study("optim labelnoise", cfg, out, store, resume=resume)
    choices = run_search(cfg.protocol(), cfg.optimizers, store, log, progress_bar=progress_bar)
    triples = noise_specs(cfg, choices, store)
    records = execute([t[2] for t in triples], log, progress_bar=progress_bar,
                      name="label noise")
    groups: dict[tuple, list[dict]] = {}
    for setting, opt, spec in triples:
        groups.setdefault((setting, opt), []).append(records[spec.name])
    settings = [setting_name(k, r) for k, r in cfg.settings()]
    rows = table(groups, settings, cfg.optimizers)
    values = {st: {o: per_seed(groups[(st, o)]) for o in cfg.optimizers} for st in settings}
    comparisons = compare(values)
    _plot(run, rows, settings)
    cols = ["optimizer"] + settings + ["train_acc_noisy"]
    (run.path / "table.md").write_text(
        markdown_table(rows, cols) + comparison_markdown(COMPARED, comparisons))
    summary = {"table": rows, "settings": settings, "seeds": cfg.seeds, "choices": choices,
               "per_seed": values, "comparisons": comparisons, "store": str(store)}
    run.write_summary(summary)
    write_study_results("genlab optim labelnoise", cfg, out, labelnoise_results(summary, cfg))
    return summary


#: what the comparisons table compares
COMPARED = "clean test accuracy (points) per noise setting"


def table(groups: dict, settings: list[str], optimizers: list[str]) -> list[dict]:
    """Rows per optimiser: clean test accuracy (mean ± std, %) per setting and the training
    accuracy on noisy labels (the comparisons are :func:`compare`'s)."""
    stats = {k: mean_std([r.get("test_acc") for r in rs if not r.get("diverged")])
             for k, rs in groups.items()}
    rows = []
    for opt in optimizers:
        row = {"optimizer": opt}
        train = []
        for st in settings:
            m = stats[(st, opt)]
            row[st] = pct(*m)
            row[f"mean {st}"] = m[0]
            row[f"std {st}"] = m[1]
            train += [r.get("train_acc") for r in groups[(st, opt)]]
        row["train_acc_noisy"] = pct(*mean_std(train))
        rows.append(row)
    constant = pct(majority_accuracy(task_data("digits", "holdout")))
    rows.append({"optimizer": "constant predictor (majority class)",
                 **{st: constant for st in settings}})
    return rows


def _plot(run: RunDir, rows: list[dict], settings: list[str]) -> None:
    fig, axes = figure(width=5.2)
    ax = axes[0][0]
    for row in rows:
        if f"mean {settings[0]}" not in row:
            continue
        ax.errorbar(range(len(settings)), [row[f"mean {s}"] for s in settings],
                    yerr=[row[f"std {s}"] for s in settings], marker="o", capsize=3,
                    label=row["optimizer"])
    ax.set_xticks(range(len(settings)), settings)
    ax.set(xlabel="label noise", ylabel="clean test accuracy (%)")
    ax.legend(fontsize=7)
    run.save_figure(fig, "labelnoise.png")


def report(summary: dict, cfg: LabelNoiseConfig) -> list:
    """What `genlab optim labelnoise` prints: clean test accuracy per noise setting."""
    seeds = ",".join(map(str, cfg.seeds))
    return [(f"clean test accuracy (%) over seeds {seeds}", summary["table"],
             ["optimizer", *summary["settings"], "train_acc_noisy"]),
            comparison_block(COMPARED, summary["comparisons"])]


STUDY = register_study(Study("labelnoise", LabelNoiseConfig, run_labelnoise, report))
