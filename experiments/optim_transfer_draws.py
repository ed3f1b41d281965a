"""Is the transfer study's fine-tuning lead over scratch a property of one jitter draw?

The study (``genlab optim transfer``) scores every model on fixed jittered copies of the
target's validation images (``val_copies``; the first ±2 run had one) and on one of its test
images. That first run's search saw fine-tuned SGD and scratch level on validation while
the test put fine-tuning ahead; this script asks whether such a lead is the draw's or the
models'. It rescores the final models of the run (every optimiser's
fine-tunings and SGD from scratch at their chosen settings, every seed) on ``--draws``
fresh jittered copies of the same validation and test images (new shifts, same images,
same jitter range) and on the images unshifted, and prints mean ± std over the seeds.

    python experiments/optim_transfer_draws.py runs/optim/transfer --out runs/bench

Writes DIR/optim_transfer_draws.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import torch

from genlab.core.data import Split
from genlab.optim.studies.transfer import TransferConfig, transfer_specs
from genlab.optim.training.tasks import translate_images
from genlab.optim.training.train import load_task, load_trained, split_scores

FRESH_SEED = 50_000  # fresh draws use seeds FRESH_SEED + k: none of the study's


def final_specs(run: Path) -> dict[str, list]:
    """{optimizer: [...], "scratch": [...]}: the specs of the run's final fine-tunings (every
    optimiser at its choice) and of SGD from scratch, one per seed, as the study built them."""
    config = json.loads((run / "config.json").read_text())
    config.setdefault("val_copies", 1)  # a run from before the option scored on one copy
    cfg = TransferConfig(**{k: v for k, v in config.items()
                            if k in TransferConfig.__dataclass_fields__})
    choices = json.loads((run / f"search_transfer_{cfg.arch}.json").read_text())["choices"]
    found: dict[str, list] = {}
    for group, spec in transfer_specs(cfg, choices, Path(config["store"])):
        if group != "pretrain":
            found.setdefault(group, []).append(spec)
    return found


def rescore(folder: Path, sets: dict[str, list[Split]]) -> dict[str, float]:
    model, _ = load_trained(folder / "checkpoint.pt")
    return {name: statistics.fmean(split_scores(model, s, "cpu")["acc"] for s in splits)
            for name, splits in sets.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="the folder of a finished `genlab optim transfer`")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--draws", type=int, default=10)
    args = p.parse_args()
    torch.set_num_threads(1)
    specs = final_specs(args.run)
    study_cfg = specs["scratch"][0].config
    study = load_task(study_cfg)  # the validation and test sets the study scored on
    t = study_cfg.translate
    plain = load_task(replace(study_cfg, translate=0, val_copies=1))
    background = float(plain.fit.images.amin())

    def fresh(split: Split, offset: int) -> list[Split]:
        return [Split(translate_images(split.images, t, FRESH_SEED + offset + k, background),
                      split.labels) for k in range(args.draws)]

    sets = {"val (the study's draws)": [study.val], "test (the study's draw)": [study.test],
            f"val ({args.draws} fresh draws)": fresh(plain.val, 0),
            f"test ({args.draws} fresh draws)": fresh(plain.test, 1000),
            "val unshifted": [plain.val], "test unshifted": [plain.test]}
    result: dict[str, dict] = {}
    for kind, group in specs.items():
        scores = [rescore(spec.out, sets) for spec in group]
        result[kind] = {"trainings": [spec.name for spec in group],
                        **{name: [s[name] for s in scores] for name in sets}}
    names = list(sets)
    print(f"accuracy (%), mean ± std over the seeds ({len(result['scratch']['trainings'])})")
    print(f"{'':16s}" + "".join(f"{n:>26s}" for n in names))
    for kind, r in result.items():
        print(f"{kind:16s}" + "".join(
            f"{statistics.fmean(r[n]):19.1f} ± {statistics.stdev(r[n]):4.1f}" for n in names))
    base = result["sgd"]
    print("fine-tuned SGD minus scratch: " + ", ".join(
        f"{n} {statistics.fmean(base[n]) - statistics.fmean(result['scratch'][n]):+.1f}"
        for n in names))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "optim_transfer_draws.json").write_text(json.dumps(
        {"command": " ".join(sys.argv), "draws": args.draws, "result": result}, indent=1))


if __name__ == "__main__":
    main()
