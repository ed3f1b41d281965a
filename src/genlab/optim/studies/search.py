"""The hyper-parameter search every optimiser comparison uses: same budget, validation only.

Protocol (ours; stated in docs/nonuniformity.md):
- data: the digits hold-out split (fit 1,079 / validation 359 images, data seed 0;
  genlab.optim.training.tasks); the 359 test images are never read for a choice;
- training: the study's architecture, seed 0, batch 64, SGD momentum 0.9 as the base of
  every optimiser, weight decay 5e-4, cosine learning rate to 0 over the epochs of
  ``ARCH_DEFAULTS``;
- budget: 9 trainings per optimiser. SGD: 9 learning rates; every other optimiser: 3
  learning rates x 3 values of its radius (rho for SAM and ASAM, rho1 = rho2 for the CSAM
  family, the penalty weight lambda for COV), ``SEARCH_GRIDS.get("full")``;
- choice: the highest validation accuracy, ties broken by the lower validation loss.

The choices are written to ``search.json`` in the study's folder and used by every study
(standard, transfer, sensitivity, label noise). Search trainings live in the shared store
(grid.py), so every study that needs them runs them once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

from genlab.core.errors import ConfigError
from genlab.core.options import Options, option
from genlab.core.registry import Registry
from genlab.core.runs import write_json
from genlab.core.sweep import RunSpec
from genlab.optim.optimizers.registry import (
    OPTIMIZER_REGISTRY,
    OPTIMIZERS,
    STANDARD_OPTIMIZERS,  # noqa: F401 - the studies import it from here
)
from genlab.optim.studies.grid import StudyLog, execute, stored
from genlab.optim.training.train import TrainConfig


def radius_field(optimizer: str) -> str | None:
    """TrainConfig field of an optimiser's radius (its registry entry; None: lr only)."""
    return OPTIMIZER_REGISTRY.get(optimizer).radius


@dataclass(frozen=True)
class SearchGrid:
    """Learning rates and radii tried; every optimiser gets len(sgd_lrs) == |lrs| x |radii|."""

    sgd_lrs: tuple[float, ...]
    lrs: tuple[float, ...]
    radii: dict  # optimiser -> tuple of radius values

    def trials(self, optimizer: str) -> list[dict]:
        field = radius_field(optimizer)
        if field is None:
            return [{"lr": lr} for lr in self.sgd_lrs]
        return [{"lr": lr, field: r} for lr in self.lrs for r in self.radii[optimizer]]


SEARCH_GRIDS: Registry[SearchGrid] = Registry("search grid")
# each optimiser's radii: its registry entry's search_radii
SEARCH_GRIDS.register("full", SearchGrid(
    sgd_lrs=(0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2),
    lrs=(0.01, 0.03, 0.1),
    radii={o: e.search_radii for o, e in OPTIMIZER_REGISTRY.items() if e.radius}))
# two trials each: for smoke tests of the commands, not for results
SEARCH_GRIDS.register("tiny", SearchGrid(sgd_lrs=(0.02, 0.1), lrs=(0.05,),
                                  radii={o: (0.05, 0.1) for o in OPTIMIZERS if radius_field(o)}))

@dataclass
class ComparisonOptions(Options):
    """The options every optimiser comparison shares (standard, transfer, sensitivity,
    label noise): the optimisers, the protocol's overrides, the grid, threads, the store."""

    optimizers: list[str] = option(factory=lambda: list(STANDARD_OPTIMIZERS), parse="list",
                                   choices=OPTIMIZER_REGISTRY,
                                   help="Optimisers to compare (sgd is the baseline).")
    epochs: int | None = option(None, help="Epochs (default per architecture: cnn 30, "
                                "transformer 40, mlp 30).", gt=0)
    width: int | None = option(None, help="Width (default per architecture: 32; mlp 128).",
                               gt=0)
    depth: int | None = option(None, help="Depth (default per architecture: 2).", gt=0)
    grid: str = option("full", help="Search grid: full (9 trainings per optimiser) or tiny "
                       "(2; smoke tests only).", choices="genlab.optim.studies.search:SEARCH_GRIDS")
    threads: int = option(1, help="torch CPU threads of every training (0: torch's default).",
                          ge=0)
    store: str | None = option(None, help="Folder of the trainings, shared by the studies "
                               "(default: 'trainings' next to --out).")


def require_baseline(optimizers, study: str) -> None:
    """A comparison's optimisers include SGD, the baseline every table is read against."""
    if "sgd" not in optimizers:
        raise ConfigError(f"{study}: the optimisers must include sgd (the baseline)")


#: architecture -> (width, depth, epochs) of the comparisons
ARCH_DEFAULTS: Registry[tuple[int, int, int]] = Registry("architecture default")
ARCH_DEFAULTS.register("cnn", (32, 2, 30))
ARCH_DEFAULTS.register("transformer", (32, 2, 40))
ARCH_DEFAULTS.register("mlp", (128, 2, 30))


@dataclass
class Protocol:
    """The training protocol of a comparison (everything but optimiser, lr, radius, seed)."""

    arch: str = "cnn"
    width: int = 32
    depth: int = 2
    epochs: int = 30
    batch_size: int = 64
    momentum: float = 0.9
    weight_decay: float = 5e-4
    schedule: str = "cosine"
    data_seed: int = 0
    grid: str = "full"
    threads: int = 1  # torch intra-op threads of every training (0: torch's default)

    @classmethod
    def for_arch(cls, arch: str, **overrides) -> Protocol:
        width, depth, epochs = ARCH_DEFAULTS.get(arch)
        values = dict(arch=arch, width=width, depth=depth, epochs=epochs)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def validate(self) -> None:
        SEARCH_GRIDS.canonical(self.grid)
        self.base().validate()

    def base(self, **changes) -> TrainConfig:
        cfg = TrainConfig(arch=self.arch, width=self.width, depth=self.depth,
                          epochs=self.epochs, batch_size=self.batch_size,
                          momentum=self.momentum, weight_decay=self.weight_decay,
                          schedule=self.schedule, split="holdout", data_seed=self.data_seed,
                          seed=0, measure=False, threads=self.threads)
        return replace(cfg, **changes)


def search_specs(protocol: Protocol, optimizers, store: Path) -> list[RunSpec]:
    """Every search training (seed 0) of ``optimizers`` under ``protocol``."""
    grid = SEARCH_GRIDS.get(protocol.grid)
    specs = []
    for opt in optimizers:
        OPTIMIZER_REGISTRY.canonical(opt)
        for trial in grid.trials(opt):
            specs.append(stored(store, f"{protocol.arch}-{opt}",
                                protocol.base(optimizer=opt, **trial)))
    return specs


def choose(specs: list[RunSpec], records: dict[str, dict]) -> dict[str, dict]:
    """Per optimiser, the trial with the best validation accuracy (then lowest val loss)."""
    best: dict[str, tuple] = {}
    for spec in specs:
        rec = records[spec.name]
        if rec.get("diverged") or "val_acc" not in rec:
            continue
        cfg = spec.config
        key = (rec["val_acc"], -rec["val_loss"])
        if cfg.optimizer not in best or key > best[cfg.optimizer][0]:
            field = radius_field(cfg.optimizer)
            best[cfg.optimizer] = (key, {
                "optimizer": cfg.optimizer, "lr": cfg.lr, "radius_field": field,
                "radius": getattr(cfg, field) if field else None,
                "val_acc": rec["val_acc"], "val_loss": rec["val_loss"]})
    missing = {s.config.optimizer for s in specs} - set(best)
    if missing:
        raise ConfigError(f"every search training of {sorted(missing)} diverged; widen the grid")
    return {opt: choice for opt, (_, choice) in best.items()}


def with_choice(cfg: TrainConfig, choice: dict) -> TrainConfig:
    """``cfg`` with the chosen optimiser, learning rate and radius."""
    changes = {"optimizer": choice["optimizer"], "lr": choice["lr"]}
    if choice["radius_field"]:
        changes[choice["radius_field"]] = choice["radius"]
    return replace(cfg, **changes)


def describe(protocol: Protocol, optimizers) -> dict:
    """The protocol, grid and budget as written to search.json."""
    grid = SEARCH_GRIDS.get(protocol.grid)
    return {"protocol": asdict(protocol),
            "trials": {opt: grid.trials(opt) for opt in optimizers},
            "budget_per_optimizer": {opt: len(grid.trials(opt)) for opt in optimizers},
            "selection": "highest validation accuracy (ties: lower validation loss); "
                         "test data never used"}


def run_search(protocol: Protocol, optimizers, store: Path, log: StudyLog, *,
               progress_bar: bool | None = None) -> dict[str, dict]:
    """Run (or reuse) the search trainings, choose, write ``search_<arch>.json``; the choices."""
    specs = search_specs(protocol, optimizers, store)
    records = execute(specs, log, progress_bar=progress_bar, name=f"search {protocol.arch}")
    choices = choose(specs, records)
    trials = [{k: records[s.name].get(k) for k in ("optimizer", "lr", "rho", "lam", "val_acc",
                                                    "val_loss", "train_acc", "name")}
              for s in specs]
    write_json(log.run.path / f"search_{protocol.arch}.json",
               {**describe(protocol, optimizers), "choices": choices, "records": trials})
    return choices
