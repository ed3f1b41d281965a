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
(``pretrained``; nothing is downloaded). Every other option of `gaze train` is an option of
the protocol too (derived from its declarations), given to every run, except MoEGaze's design
(``--grouping``, ``--router-input``, ``--shared-expert``: its MoEGaze runs only) and
``--subject-fraction`` (the compared runs only: the reference trains on every subject of its
half). Runs are independent specs (genlab.gaze.studies.runs): a rerun skips finished runs and
resumes interrupted ones.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from genlab.core.errors import ConfigError, DataError
from genlab.core.options import (
    Options,
    check_options,
    option,
    option_like,
    seed_text,
    takes_options,
)
from genlab.core.runs import write_json
from genlab.core.studies import Study, markdown_report, register_study
from genlab.core.sweep import RunSpec
from genlab.gaze.config import DESIGN, design_of
from genlab.gaze.models.registry import MODELS
from genlab.gaze.studies.runs import (
    run_study,
    train_spec,
)
from genlab.gaze.studies.tables import BenchRun, study_tables
from genlab.gaze.train import GazeTrainConfig

SOURCES = {"xgaze": ("E", "ETH-XGaze"), "gaze360": ("G", "Gaze360")}
TARGETS = {"mpii": ("M", "MPIIFaceGaze"), "eyediap": ("D", "EyeDiap")}
WORLD = "paper protocol"
#: the options of gaze train that the protocol sets for each run itself
SET_PER_RUN = ("model", "source", "targets", "fraction", "seed", "target_fold", "folds")


def _train(name: str, **changes):
    """The option ``name`` as gaze train declares it, with ``changes``."""
    return option_like(GazeTrainConfig, name, **changes)


@dataclass
@takes_options(GazeTrainConfig, sets=SET_PER_RUN)
class PaperConfig(Options):
    """Data roots, models, shares and seeds of the paper protocol, and every option of gaze
    train but those it sets for each run (:data:`SET_PER_RUN`), at gaze train's defaults
    except the training budget declared here.

    ``seeds``: the seeds of the compared runs; ``reference_seeds``: those of the
    trained-on-target reference (may be empty: no reference). Lists; an int n, as before,
    means seeds 0..n-1.
    """

    xgaze: str | None = option(None, help="ETH-XGaze root (train/subject*.h5).")
    gaze360: str | None = option(None, help="Gaze360 in GazeHub layout (Label/, Image/).")
    mpii: str | None = option(None, help="MPIIFaceGaze in GazeHub layout (Label/p*.label).")
    eyediap: str | None = option(None, help="EyeDiap in GazeHub layout (Label/*.label).")
    models: list[str] = option(factory=lambda: ["baseline", "moegaze"], parse="list",
                               choices=MODELS, help="Models to train.")
    fractions: list[float] = option(factory=lambda: [1.0, 0.1], parse="list", gt=0, le=1,
                                    help="Shares of the source data, in (0, 1].")
    seeds: list[int] = option(factory=lambda: [0, 1, 2], parse="seeds",
                              help="Seeds of the compared runs.")
    reference_seeds: list[int] = option(factory=lambda: [0], parse="seeds", empty=True,
                                        help="Seeds of the trained-on-target reference "
                                             "(\"\": none).")
    steps: int = _train("steps", default=20000)
    warmup_steps: int = _train("warmup_steps", default=500)
    eval_every: int = _train("eval_every", default=1000)
    lr: float = _train("lr", default=1e-4)
    size: list[int] = _train("size", factory=lambda: [224, 224])
    width: int = _train("width", default=64, help="Backbone width (64: ResNet-18).")
    stem: str = _train("stem", default="imagenet")
    input_norm: str = _train("input_norm", default="imagenet")
    pretrained: str | None = _train("pretrained", help="torchvision-layout ResNet-18 "
                                    "state-dict file.")
    device: str = _train("device", default="auto")
    workers: int = _train("workers", default=4)
    threads: int = _train("threads", default=0)
    n_boot: int = option(2000, gt=0, help="Bootstrap resamples of the intervals.")

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
        check_options(self)  # types, choices (models), limits (fractions in (0, 1]); seeds
        if not self.fractions:
            raise ConfigError("fractions: give at least one share of the source data")
        replace(self.base(), model="moegaze", **design_of(self)).validate()  # gaze train's checks

    def base(self) -> GazeTrainConfig:
        """Every run's options before its own (model, data, share, seed): those taken from
        gaze train, MoEGaze's design left at its defaults."""
        return GazeTrainConfig(**self.wrapping.values(self, but=DESIGN))


def paper_specs(cfg: PaperConfig, out: str | Path) -> list[RunSpec]:
    """Every run of the protocol (seed-major)."""
    cfg.validate()
    runs, base, specs = Path(out) / "runs", cfg.base(), []
    sources, targets = cfg.roots(SOURCES), cfg.roots(TARGETS)
    for seed in sorted({*cfg.seeds, *cfg.reference_seeds}):
        for key, ref in sources.items() if seed in cfg.seeds else ():
            for model in cfg.models:
                design = design_of(cfg) if MODELS.canonical(model) == "moegaze" else {}
                for fr in cfg.fractions:
                    name = f"{key}__{model}__f{fr:g}__s{seed}"
                    specs.append(train_spec(name, replace(base, model=model, source=ref,
                                                          targets=list(targets.values()),
                                                          fraction=fr, seed=seed, **design),
                                            runs / name))
        for key, ref in targets.items() if seed in cfg.reference_seeds else ():
            for fold in range(2):
                name = f"{key}__reference__fold{fold}__s{seed}"
                specs.append(train_spec(name, replace(base, model="baseline", source=ref,
                                                      targets=[ref], target_fold=fold, folds=2,
                                                      subject_fraction=1.0, seed=seed),
                                        runs / name))
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


def run_command(cfg: PaperConfig, out: str | Path, *, resume: bool = False) -> dict:
    """`genlab gaze paper`. A rerun in the same folder always resumes (``resume`` is
    accepted and changes nothing)."""
    return run_paper(cfg, out)


STUDY = register_study(Study("paper", PaperConfig, run_command, markdown_report))
