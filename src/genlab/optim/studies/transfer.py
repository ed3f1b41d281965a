"""Transfer learning: pretrain on digits 0-4, fine-tune on few images of digits 5-9.

Protocol (ours): per seed, one network of the study's architecture is pretrained with SGD
(the learning rate the search chose for SGD) on the fit set of ``source`` (digits 0-4);
every optimiser then fine-tunes it (classifier head re-initialised, every weight trained)
on ``per_class`` images per class of ``target`` (digits 5-9, relabelled 0-4) with the
learning rate and radius the search chose for it on full digits (search.py; nothing is
re-tuned, nothing chosen on test data), and is scored on the target's test images.
Sanity rows: SGD trained from scratch on the same few images (does pretraining help?), and
the constant predictor.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from genlab.core.errors import ConfigError
from genlab.core.report import figure, markdown_table
from genlab.core.runs import RunDir
from genlab.optim.optimizers.registry import OPTIMIZER_REGISTRY
from genlab.optim.studies.grid import StudyLog, default_store, execute, stored
from genlab.optim.studies.search import (
    STANDARD_OPTIMIZERS,
    Protocol,
    run_search,
    with_choice,
)
from genlab.optim.studies.standard import FLATNESS
from genlab.optim.studies.stats import mean_std, pct, seed_list, verdict
from genlab.optim.studies.tasks import TASKS, majority_accuracy, task_data


@dataclass
class TransferConfig:
    arch: str = "cnn"
    source: str = "digits0-4"
    target: str = "digits5-9"
    per_class: int = 20
    optimizers: list[str] = field(default_factory=lambda: list(STANDARD_OPTIMIZERS))
    seeds: list[int] = field(default_factory=lambda: list(range(5)))  # an int n: 0..n-1
    epochs: int | None = None
    width: int | None = None
    depth: int | None = None
    grid: str = "full"
    threads: int = 1  # torch intra-op threads of every training (0: torch's default)

    def __post_init__(self) -> None:
        if isinstance(self.seeds, int) and not isinstance(self.seeds, bool) and self.seeds > 0:
            self.seeds = seed_list(self.seeds)

    def protocol(self) -> Protocol:
        return Protocol.for_arch(self.arch, epochs=self.epochs, width=self.width,
                                 depth=self.depth, grid=self.grid, threads=self.threads)

    def validate(self) -> None:
        for name in ("source", "target"):
            if getattr(self, name) not in TASKS:
                raise ConfigError(f"{name}: unknown task {getattr(self, name)!r}; expected "
                                  f"one of {', '.join(TASKS)}")
        if self.source == self.target:
            raise ConfigError("transfer: source and target must differ")
        self.seeds = seed_list(self.seeds)
        if self.per_class < 1:
            raise ConfigError(f"transfer: per_class must be >= 1, got {self.per_class}")
        if "sgd" not in self.optimizers:
            raise ConfigError("transfer: the optimisers must include sgd (the baseline)")
        for o in self.optimizers:
            if o not in OPTIMIZER_REGISTRY:
                raise ConfigError(f"optimizer: unknown {o!r}")
        self.protocol().validate()


def transfer_specs(cfg: TransferConfig, choices: dict, store: Path) -> list[tuple[str, object]]:
    """(group, spec): pretrainings ("pretrain"), fine-tunings (the optimiser's name; after
    their pretraining) and the from-scratch baseline ("scratch")."""
    protocol = cfg.protocol()
    specs = []
    for s in cfg.seeds:
        pre_cfg = replace(with_choice(protocol.base(), choices["sgd"]), task=cfg.source,
                          seed=s)
        pre = stored(store, f"{cfg.arch}-pretrain-{cfg.source}", pre_cfg)
        specs.append(("pretrain", pre))
        target = replace(protocol.base(), task=cfg.target, per_class=cfg.per_class, seed=s)
        for opt in cfg.optimizers:
            ft = replace(with_choice(target, choices[opt]),
                         init_from=str(pre.out / "checkpoint.pt"))
            specs.append((opt, stored(store, f"{cfg.arch}-finetune-{opt}", ft,
                                      after=(pre.name,))))
        specs.append(("scratch", stored(store, f"{cfg.arch}-scratch-sgd",
                                        with_choice(target, choices["sgd"]))))
    return specs


COLUMNS = ["optimizer", "train_acc", "test_acc", "vs_sgd", "vs_best_flatness"]


def run_transfer(cfg: TransferConfig, out: str | Path, *, store: str | Path | None = None,
                 resume: bool = False, progress_bar: bool | None = None) -> dict:
    """Search (shared), pretrain, fine-tune every optimiser; table and plot (resumable)."""
    cfg.validate()
    store = Path(store) if store else default_store(out)
    run = RunDir(out, {"command": "optim transfer", **asdict(cfg), "store": str(store)},
                 resume=resume)
    log = StudyLog(run)
    protocol = cfg.protocol()
    choices = run_search(protocol, cfg.optimizers, store, log, progress_bar=progress_bar)
    grouped = transfer_specs(cfg, choices, store)
    records = execute([spec for _, spec in grouped], log, progress_bar=progress_bar,
                      name="transfer")
    groups: dict[str, list[dict]] = {}
    for key, spec in grouped:
        groups.setdefault(key, []).append(records[spec.name])
    stats = {k: mean_std([r.get("test_acc") for r in rs]) for k, rs in groups.items()}
    flat_best = max((o for o in FLATNESS if o in stats), key=lambda o: stats[o][0],
                    default=None)
    rows = []
    for opt in cfg.optimizers:
        rows.append({"optimizer": opt, "test_acc": pct(*stats[opt]), "test_mean": stats[opt][0],
                     "test_std": stats[opt][1],
                     "train_acc": pct(*mean_std([r.get("train_acc") for r in groups[opt]])),
                     "vs_sgd": "-" if opt == "sgd" else verdict(stats[opt], stats["sgd"]),
                     "vs_best_flatness": ("-" if flat_best is None or opt in FLATNESS else
                                          f"{verdict(stats[opt], stats[flat_best])} "
                                          f"({flat_best})")})
    target = task_data(cfg.target, "holdout", data_seed=protocol.data_seed,
                       per_class=cfg.per_class)
    sanity = [
        {"optimizer": "pretraining on the source (SGD), its source test accuracy",
         "test_acc": pct(*stats["pretrain"])},
        {"optimizer": "SGD from scratch on the target images (no pretraining)",
         "test_acc": pct(*stats["scratch"]), "test_mean": stats["scratch"][0],
         "vs_sgd": verdict(stats["scratch"], stats["sgd"])},
        {"optimizer": "constant predictor (majority class)",
         "test_acc": pct(majority_accuracy(target))},
    ]
    _plot(run, rows, stats["scratch"])
    (run.path / "table.md").write_text(markdown_table(rows + sanity, COLUMNS))
    summary = {"rows": rows, "sanity": sanity, "choices": choices, "seeds": cfg.seeds,
               "target_train_images": len(target.fit), "store": str(store)}
    run.write_summary(summary)
    return summary


def _plot(run: RunDir, rows: list[dict], scratch: tuple[float, float]) -> None:
    fig, axes = figure(width=5.0, height=3.4)
    ax = axes[0][0]
    names = [r["optimizer"] for r in rows]
    means = [r["test_mean"] for r in rows]
    stds = [r["test_std"] for r in rows]
    ax.bar(range(len(names)), means, yerr=stds, capsize=3, color="tab:green")
    ax.axhline(scratch[0], color="k", ls="--", lw=0.8, label="SGD from scratch")
    ax.set_xticks(range(len(names)), names, rotation=40, ha="right", fontsize=8)
    ax.set(ylim=(max(0.0, min(means) - max(stds) - 3), 100),
           ylabel="target test accuracy (%)", title="fine-tuned (mean ± std over seeds)")
    ax.legend(fontsize=7)
    run.save_figure(fig, "transfer.png")
