"""Transfer learning where pretraining matters: jittered digits 0-4 -> few jittered 5-9.

Protocol (ours; the reasoning and the measurements behind it in docs/nonuniformity.md):

- domain: *jittered digits* (training/tasks.py ``translate``): every image moved by up to
  ``translate`` pixels per axis, one fixed draw per image. On plain 8 x 8 digits a few
  images per class suffice (a linear model on the pixels reaches 95% from 5 per class of
  5-9) and features pretrained on 0-4 are worse than the pixels, so fine-tuning cannot
  beat training from scratch; the jitter is what few images cannot teach and many can.
- pretraining: SGD on the fit set of ``source`` (``source_copies`` shifted copies), its
  learning rate searched on the source's validation set (the SGD grid, seed 0);
- fine-tuning: every optimiser starts from the pretrained network (classifier head
  re-initialised, every weight trained) on ``per_class`` images per class of ``target``,
  with its learning rate and radius searched *for fine-tuning* on the target's validation
  set (the same 9-training budget as every other search, from the seed-0 pretraining),
  scored on ``val_copies`` shifted copies of its validation images (one draw of 179
  images flattered scratch by ~7 points in the first ±2 run),
  each for ``target_steps`` optimiser steps (the protocol's 30 epochs would be 30 steps on
  50 images: too few for any learning rate of the grid to fit them);
- sanity rows: SGD from scratch on the same few images with its own learning-rate search
  on the target's validation set (the transfer rows are read only if fine-tuned SGD beats
  it, paired by seed through genlab.core.stats: "better" under the paired sign-flip test,
  which needs at least six seeds to reach p < 0.05), the pretraining's source accuracy,
  the constant predictor;
- comparisons: each guided optimiser minus SAM and minus SGD after fine-tuning, paired by
  seed, Holm over the study's comparisons (stats.py:
  :func:`~genlab.optim.studies.stats.compare`).

Test data choose nothing. Seeds 0..n-1: pretraining, fine-tuning and scratch share each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from genlab.core.errors import ConfigError
from genlab.core.options import check_options, option
from genlab.core.report import figure, markdown_table
from genlab.core.runs import RunDir, write_json
from genlab.core.stats import judge, paired_difference
from genlab.optim.studies import Study, register_study
from genlab.optim.studies.grid import StudyLog, execute, open_study, stored
from genlab.optim.studies.results import transfer_results, write_study_results
from genlab.optim.studies.search import (
    SEARCH_GRIDS,
    ComparisonOptions,
    Protocol,
    choose,
    require_baseline,
    with_choice,
)
from genlab.optim.studies.stats import (
    TEST,
    compare,
    comparison_block,
    comparison_markdown,
    mean_std,
    pct,
    per_seed,
)
from genlab.optim.training.models import ARCHS
from genlab.optim.training.tasks import TASKS, check_translation, majority_accuracy, task_data


@dataclass
class TransferConfig(ComparisonOptions):
    """The options of `genlab optim transfer`."""

    arch: str = option("cnn", help="Architecture.", choices=ARCHS)
    source: str = option("digits0-4", help="Pretraining task.", choices=TASKS)
    target: str = option("digits5-9", help="Fine-tuning task.", choices=TASKS)
    per_class: int = option(10, help="Fine-tuning images per class.", ge=1)
    translate: int = option(2, help="Jitter of both domains: every image shifted by up to this "
                            "many pixels per axis (0: plain digits, where pretraining does not "
                            "help).", ge=0)
    source_copies: int = option(8, help="Shifted copies of the source's images for "
                                "pretraining.", ge=1)
    val_copies: int = option(4, help="Shifted copies of the target's validation images that "
                             "score the fine-tuning and scratch searches.", ge=1)
    target_steps: int = option(300, help="Optimiser steps of every fine-tuning (and scratch) "
                               "training.", ge=1)
    seeds: list[int] = option(factory=lambda: list(range(5)), parse="seeds", help="Seeds.")

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
        if self.per_class < 1:
            raise ConfigError(f"transfer: per_class must be >= 1, got {self.per_class}")
        check_translation(self.translate, self._copies(self.source_copies))
        check_translation(self.translate, self._copies(self.val_copies), "val_copies")
        if self.val_copies < 1:
            raise ConfigError(f"transfer: val_copies must be >= 1, got {self.val_copies}")
        if self.source_copies < 1:
            raise ConfigError(f"transfer: source_copies must be >= 1, got {self.source_copies}")
        if self.target_steps < 1:
            raise ConfigError(f"transfer: target_steps must be >= 1, got {self.target_steps}")
        require_baseline(self.optimizers, "transfer")
        check_options(self)  # types, choices, limits; seeds: integers >= 0, no repeat
        self.protocol().validate()

    def _copies(self, copies: int) -> int:
        """``copies`` shifted copies of a set when the domains are jittered; of plain digits
        the one set (copies of unshifted images would be the same images)."""
        return copies if self.translate else 1

    def source_base(self):
        """The pretraining's TrainConfig (SGD; lr and seed set by the caller)."""
        return self.protocol().base(optimizer="sgd", task=self.source,
                                    translate=self.translate,
                                    translate_copies=self._copies(self.source_copies))

    def target_base(self):
        """The fine-tuning's (and scratch's) TrainConfig on the target's few images: as many
        epochs as ``target_steps`` takes (50 images at batch 64 are one step per epoch)."""
        protocol = self.protocol()
        images = len(task_data(self.target, "holdout", data_seed=protocol.data_seed,
                               per_class=self.per_class).fit)
        epochs = math.ceil(self.target_steps / math.ceil(images / protocol.batch_size))
        return protocol.base(task=self.target, per_class=self.per_class,
                             translate=self.translate, epochs=epochs,
                             val_copies=self._copies(self.val_copies))


def _trials(cfg: TransferConfig, optimizer: str) -> list[dict]:
    return SEARCH_GRIDS.get(cfg.protocol().grid).trials(optimizer)


def pretrain_spec(cfg: TransferConfig, store: Path, lr: float, seed: int):
    return stored(store, f"{cfg.arch}-pretrain-{cfg.source}",
                  replace(cfg.source_base(), lr=lr, seed=seed))


def finetune_spec(cfg: TransferConfig, store: Path, config, pre):
    """``config`` (a target_base with optimiser, lr, radius and seed set) started from the
    pretraining ``pre``."""
    return stored(store, f"{cfg.arch}-finetune-{config.optimizer}",
                  replace(config, init_from=str(pre.out / "checkpoint.pt")), after=(pre.name,))


def scratch_spec(cfg: TransferConfig, store: Path, config):
    return stored(store, f"{cfg.arch}-scratch-sgd", config)


def _search(cfg: TransferConfig, store: Path, log: StudyLog, progress_bar) -> dict:
    """Pretraining lr (source validation), then fine-tuning and scratch choices (target
    validation); every trial at seed 0. {"pretrain", "scratch", "finetune": {opt: choice}}."""
    pre_specs = [pretrain_spec(cfg, store, t["lr"], 0) for t in _trials(cfg, "sgd")]
    pre_records = execute(pre_specs, log, progress_bar=progress_bar, name="pretrain search")
    pre_choice = choose(pre_specs, pre_records)["sgd"]
    pre = pretrain_spec(cfg, store, pre_choice["lr"], 0)
    target = cfg.target_base()  # a search trial is TrainConfig fields, as in search_specs
    ft_specs = [finetune_spec(cfg, store, replace(target, optimizer=opt, **t), pre)
                for opt in cfg.optimizers for t in _trials(cfg, opt)]
    sc_specs = [scratch_spec(cfg, store, replace(target, optimizer="sgd", **t))
                for t in _trials(cfg, "sgd")]
    # pre is finished by now: execute reads its record back
    records = execute([pre] + ft_specs + sc_specs, log, progress_bar=progress_bar,
                      name="fine-tuning search")
    choices = {"pretrain": pre_choice, "finetune": choose(ft_specs, records),
               "scratch": choose(sc_specs, records)["sgd"]}
    trials = [{k: records[s.name].get(k) for k in ("name", "optimizer", "lr", "rho", "lam",
                                                    "val_acc", "val_loss", "train_acc")}
              for s in ft_specs + sc_specs]
    write_json(log.run.path / f"search_transfer_{cfg.arch}.json",
               {"selection": "highest validation accuracy (ties: lower validation loss) on "
                             "the source (pretraining) or target (fine-tuning, scratch) "
                             "validation set; test data never used",
                "budget_per_optimizer": {o: len(_trials(cfg, o)) for o in cfg.optimizers},
                "choices": choices, "records": trials,
                "pretrain_records": [{k: pre_records[s.name].get(k) for k in
                                      ("name", "lr", "val_acc", "val_loss")}
                                     for s in pre_specs]})
    return choices


def transfer_specs(cfg: TransferConfig, choices: dict, store: Path
                   ) -> list[tuple[str, object]]:
    """(group, spec) per seed: pretraining ("pretrain"), fine-tunings (the optimiser's name;
    after their pretraining) and the from-scratch baseline ("scratch")."""
    target = cfg.target_base()
    specs = []
    for s in cfg.seeds:
        pre = pretrain_spec(cfg, store, choices["pretrain"]["lr"], s)
        specs.append(("pretrain", pre))
        for opt in cfg.optimizers:
            config = replace(with_choice(target, choices["finetune"][opt]), seed=s)
            specs.append((opt, finetune_spec(cfg, store, config, pre)))
        specs.append(("scratch", scratch_spec(
            cfg, store, replace(with_choice(target, choices["scratch"]), seed=s))))
    return specs


COLUMNS = ["optimizer", "train_acc", "test_acc"]
#: what the comparisons table compares
COMPARED = "target test accuracy after fine-tuning (points)"


def run_transfer(cfg: TransferConfig, out: str | Path, *, store: str | Path | None = None,
                 resume: bool = False, progress_bar: bool | None = None) -> dict:
    """Searches, pretrain, fine-tune every optimiser, scratch; table and plot (resumable)."""
    run, log, store = open_study("optim transfer", cfg, out, store, resume=resume)
    choices = _search(cfg, store, log, progress_bar)
    grouped = transfer_specs(cfg, choices, store)
    records = execute([spec for _, spec in grouped], log, progress_bar=progress_bar,
                      name="transfer")
    groups: dict[str, list[dict]] = {}
    for key, spec in grouped:
        groups.setdefault(key, []).append(records[spec.name])
    return _report(cfg, run, groups, choices, store)


def _report(cfg: TransferConfig, run: RunDir, groups: dict, choices: dict, store: Path) -> dict:
    stats = {k: mean_std([r.get("test_acc") for r in rs]) for k, rs in groups.items()}
    rows = []
    for opt in cfg.optimizers:
        rows.append({"optimizer": opt, "test_acc": pct(*stats[opt]), "test_mean": stats[opt][0],
                     "test_std": stats[opt][1],
                     "train_acc": pct(*mean_std([r.get("train_acc") for r in groups[opt]]))})
    target = task_data(cfg.target, "holdout", data_seed=cfg.protocol().data_seed,
                       per_class=cfg.per_class, translate=cfg.translate)
    values = {opt: per_seed(groups[opt]) for opt in (*cfg.optimizers, "scratch")}
    transfer = transfer_verdict(values["sgd"], values["scratch"])
    transfer_shown = transfer is not None and transfer.kind == "better"
    comparisons = compare({"": {o: values[o] for o in cfg.optimizers}})
    sanity = [
        {"optimizer": "pretraining on the source (SGD), its source test accuracy",
         "test_acc": pct(*stats["pretrain"])},
        {"optimizer": "SGD from scratch on the target images (no pretraining; lr searched "
                      "on target validation)",
         "test_acc": pct(*stats["scratch"]), "test_mean": stats["scratch"][0]},
        {"optimizer": "constant predictor (majority class)",
         "test_acc": pct(majority_accuracy(target))},
    ]
    _plot(run, rows, stats["scratch"])
    (run.path / "table.md").write_text(
        markdown_table(rows + sanity, COLUMNS)
        + f"\nfine-tuned SGD minus SGD from scratch: {_line(transfer)}\n"
        + comparison_markdown(COMPARED, comparisons))
    summary = {"rows": rows, "sanity": sanity, "choices": choices, "seeds": cfg.seeds,
               "transfer_shown": transfer_shown, "transfer": _line(transfer),
               "per_seed": values, "comparisons": comparisons,
               "finetune_minus_scratch": stats["sgd"][0] - stats["scratch"][0],
               "finetune_minus_scratch_per_seed": [  # paired by seed; informative only
                   a.get("test_acc") - b.get("test_acc")
                   for a, b in zip(groups["sgd"], groups["scratch"], strict=True)],
               "target_train_images": len(target.fit), "store": str(store)}
    if not transfer_shown:
        run.sanity_warning(summary, (
            f"fine-tuned SGD ({pct(*stats['sgd'])}) is not shown to beat SGD from scratch "
            f"({pct(*stats['scratch'])}; paired by seed: {_line(transfer)}): the setting "
            "shows no transfer, so the optimisers' rows do not test the transfer claim"))
    run.write_summary(summary)
    write_study_results("genlab optim transfer", cfg, run.path, transfer_results(summary, cfg))
    return summary


def transfer_verdict(finetuned: dict[int, float], scratch: dict[int, float]):
    """Fine-tuned SGD minus SGD from scratch, paired by seed, judged alone (None with fewer
    than two seeds in common)."""
    common = [s for s in finetuned if s in scratch]
    if len(common) < 2:
        return None
    return judge(paired_difference([finetuned[s] for s in common],
                                   [scratch[s] for s in common], test=TEST))


def _line(verdict) -> str:
    return verdict.line() if verdict is not None else "fewer than two seeds in common"


def _plot(run: RunDir, rows: list[dict], scratch: tuple[float, float]) -> None:
    fig, axes = figure(width=5.0, height=3.4)
    ax = axes[0][0]
    names = [r["optimizer"] for r in rows]
    means = [r["test_mean"] for r in rows]
    stds = [r["test_std"] for r in rows]
    ax.bar(range(len(names)), means, yerr=stds, capsize=3, color="tab:green")
    ax.axhline(scratch[0], color="k", ls="--", lw=0.8, label="SGD from scratch")
    ax.set_xticks(range(len(names)), names, rotation=40, ha="right", fontsize=8)
    ax.set(ylim=(max(0.0, min(means + [scratch[0]]) - max(stds) - 3), 100),
           ylabel="target test accuracy (%)", title="fine-tuned (mean ± std over seeds)")
    ax.legend(fontsize=7)
    run.save_figure(fig, "transfer.png")


def report(summary: dict, cfg: TransferConfig) -> list:
    """What `genlab optim transfer` prints: the target's table."""
    seeds = ",".join(map(str, cfg.seeds))
    return [(f"target test accuracy (%) over seeds {seeds}", summary["rows"] + summary["sanity"],
             COLUMNS),
            f"fine-tuned SGD minus SGD from scratch: {summary['transfer']}",
            comparison_block(COMPARED, summary["comparisons"])]


STUDY = register_study(Study("transfer", TransferConfig, run_transfer, report))
