"""`genlab gaze paper`: the paper's cross-domain protocol on the real data sets.

Sources ETH-XGaze (E, the train split's h5 files) and Gaze360 (G, GazeHub format) are
each trained on and tested on every target, MPIIFaceGaze (M, p00-p14) and EyeDiap (D),
with the baseline and MoEGaze, on 100% and 10% of the source images, for every seed:
E->M and E->D share the E model. 20% of the source subjects are held out for the
source table. The reference "trained on target" is a baseline trained on half of a
target's subjects and tested on the other half, both ways (2 subject folds), so that
it covers every target subject. Faces are read from disk by a DataLoader (bounded
memory), resized to 224x224, standardised with ImageNet statistics inside a ResNet-18
(width 64, ImageNet stem) that starts from a user-supplied torchvision-layout state dict
(``pretrained``; nothing is downloaded). Runs are independent specs
(genlab.gaze.studies.runs): a rerun skips finished runs and resumes interrupted ones.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from genlab.core.errors import ConfigError, DataError, require_positive
from genlab.core.runs import write_json
from genlab.core.sweep import RunSpec
from genlab.gaze.models.registry import MODELS
from genlab.gaze.studies.runs import (
    as_seed_list,
    check_seeds,
    run_study,
    seed_text,
    train_spec,
)
from genlab.gaze.studies.tables import BenchRun, study_tables
from genlab.gaze.train import GazeTrainConfig

SOURCES = {"xgaze": ("E", "ETH-XGaze"), "gaze360": ("G", "Gaze360")}
TARGETS = {"mpii": ("M", "MPIIFaceGaze"), "eyediap": ("D", "EyeDiap")}
WORLD = "paper protocol"


@dataclass
class PaperConfig:
    """Data roots and the training budget of the paper protocol.

    ``seeds``: the seeds of the compared runs; ``reference_seeds``: those of the
    trained-on-target reference (may be empty: no reference). Lists; an int n, as before,
    means seeds 0..n-1.
    """

    xgaze: str | None = None
    gaze360: str | None = None
    mpii: str | None = None
    eyediap: str | None = None
    models: list[str] = field(default_factory=lambda: ["baseline", "moegaze"])
    fractions: list[float] = field(default_factory=lambda: [1.0, 0.1])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    reference_seeds: list[int] = field(default_factory=lambda: [0])
    steps: int = 20000
    warmup_steps: int = 500
    eval_every: int = 1000
    batch_size: int = 64
    eval_batch_size: int = 256
    lr: float = 1e-4
    weight_decay: float = 1e-4
    size: list[int] = field(default_factory=lambda: [224, 224])
    width: int = 64
    stem: str = "imagenet"
    pretrained: str | None = None
    experts: int = 4
    device: str = "auto"
    workers: int = 4
    threads: int = 0
    data_seed: int = 0
    n_boot: int = 2000

    def __post_init__(self) -> None:
        self.seeds = as_seed_list(self.seeds)
        self.reference_seeds = as_seed_list(self.reference_seeds)

    def roots(self, table: dict) -> dict[str, str]:
        """{data set name: "name:ROOT"} of the given roots among ``table``'s names."""
        return {k: f"{k}:{getattr(self, k)}" for k in table if getattr(self, k)}

    def validate(self) -> None:
        if not self.roots(SOURCES) or not self.roots(TARGETS):
            raise ConfigError("the paper protocol needs a source (--xgaze and/or --gaze360) "
                              "and a target (--mpii and/or --eyediap)")
        for name in (*SOURCES, *TARGETS):
            root = getattr(self, name)
            if root and not Path(root).is_dir():
                raise DataError(f"--{name} {root}: no such folder")
        if self.pretrained and not Path(self.pretrained).is_file():
            raise DataError(f"--pretrained {self.pretrained}: no such file")
        for m in self.models:
            MODELS.canonical(m)
        if not self.fractions or any(not 0 < f <= 1 for f in self.fractions):
            raise ConfigError(f"fractions must lie in (0, 1], got {self.fractions}")
        check_seeds("seeds", self.seeds)
        check_seeds("reference_seeds", self.reference_seeds, allow_empty=True)
        for name in ("steps", "batch_size", "width", "n_boot"):
            require_positive(name, getattr(self, name))
        require_positive("threads", self.threads, allow_zero=True)

    def base(self) -> GazeTrainConfig:
        return GazeTrainConfig(
            steps=self.steps, warmup_steps=self.warmup_steps, eval_every=self.eval_every,
            batch_size=self.batch_size, eval_batch_size=self.eval_batch_size, lr=self.lr,
            weight_decay=self.weight_decay,
            size=list(self.size), width=self.width, stem=self.stem, input_norm="imagenet",
            pretrained=self.pretrained, experts=self.experts, device=self.device,
            workers=self.workers, threads=self.threads, data_seed=self.data_seed,
        )


def paper_specs(cfg: PaperConfig, out: str | Path) -> list[RunSpec]:
    """Every run of the protocol (seed-major)."""
    cfg.validate()
    runs, base, specs = Path(out) / "runs", cfg.base(), []
    sources, targets = cfg.roots(SOURCES), cfg.roots(TARGETS)
    for seed in sorted({*cfg.seeds, *cfg.reference_seeds}):
        for key, ref in sources.items() if seed in cfg.seeds else ():
            for model in cfg.models:
                for fr in cfg.fractions:
                    name = f"{key}__{model}__f{fr:g}__s{seed}"
                    specs.append(train_spec(name, replace(base, model=model, source=ref,
                                                          targets=list(targets.values()),
                                                          fraction=fr, seed=seed), runs / name))
        for key, ref in targets.items() if seed in cfg.reference_seeds else ():
            for fold in range(2):
                name = f"{key}__reference__fold{fold}__s{seed}"
                specs.append(train_spec(name, replace(base, model="baseline", source=ref,
                                                      targets=[ref], target_fold=fold, folds=2,
                                                      seed=seed), runs / name))
    return specs


def paper_runs(specs, results: dict[str, dict]) -> list[BenchRun]:
    """Bench-style runs; the two folds of a reference merge into one run per seed."""
    runs, folds = [], {}
    for spec in specs:
        parts = spec.name.split("__")
        summary = results[spec.name]
        if parts[1] == "reference":
            ref = spec.config.source
            merged = folds.setdefault((ref, spec.config.seed), {})
            merged.update(summary["targets"][ref]["per_subject"])
            continue
        runs.append(BenchRun(WORLD, spec.config.source, parts[1], spec.config.fraction,
                             spec.config.seed, summary))
    for (ref, seed), per_subject in folds.items():
        runs.append(BenchRun(WORLD, ref, "reference", 1.0, seed,
                             {"targets": {ref: {"per_subject": per_subject}}}))
    return runs


def paper_tasks(cfg: PaperConfig) -> dict[str, tuple[str, str]]:
    sources, targets = cfg.roots(SOURCES), cfg.roots(TARGETS)
    return {f"{SOURCES[s][0]}->{TARGETS[t][0]}": (sref, tref)
            for s, sref in sources.items() for t, tref in targets.items()}


def run_paper(cfg: PaperConfig, out: str | Path, *, progress_bar: bool | None = None) -> dict:
    """Run (or resume) the protocol; write paper.json and paper.md; return the tables."""
    out = Path(out)
    specs = paper_specs(cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "paper_config.json", asdict(cfg))
    t0 = time.perf_counter()
    results = run_study(specs, progress_bar=progress_bar, description="gaze paper")
    names = {ref: SOURCES.get(k, TARGETS.get(k, ("", k)))[1]
             for table in (SOURCES, TARGETS) for k, ref in cfg.roots(table).items()}
    header = (f"Real data, the paper's protocol: angular error in degrees, mean over "
              f"{len(cfg.seeds)} seeds ({seed_text(cfg.seeds)}), [95% bootstrap interval over "
              "seeds and test subjects]; "
              f"{cfg.steps} steps of batch {cfg.batch_size}; negative differences = MoEGaze "
              "better.\n")
    small = min(cfg.fractions)
    tables = study_tables(paper_runs(specs, results), {WORLD: paper_tasks(cfg)},
                          n_boot=cfg.n_boot, small_fraction=small, header=header,
                          label=lambda ref: names.get(ref, ref))
    write_json(out / "paper.json", {"config": asdict(cfg),
                                    "tables": {k: v for k, v in tables.items()
                                               if k != "markdown"},
                                    "wall_seconds_this_invocation": time.perf_counter() - t0})
    (out / "paper.md").write_text(tables["markdown"])
    return tables
