"""Why digits 0-4 -> 5-9 shows no transfer, and what the jitter changes.

Two questions, on plain digits (translate 0) and on jittered digits (translate 1 and 2,
the transfer study's default), CNN of the standard protocol, seeds 0-2:

1. Are the pretrained features worth more than the pixels? Logistic regression on the
   pixels of the few target images against logistic regression on the frozen features of
   the network pretrained on digits 0-4 (its input to the classifier head); each with its
   inverse regularisation C chosen on the target's validation set, at 5, 10 and 20
   images per class.
2. Is it the learning rate that erases transfer? Fine-tuning (new head, every weight
   trained) against training from scratch on 10 images per class, at learning rates
   0.003-0.1 (300 steps, SGD momentum 0.9, cosine), with the relative distance the
   fine-tuning moved the pretrained backbone, ||w - w_pre|| / ||w_pre||.

Pretraining: SGD at lr 0.1 (every pretraining lr >= 0.05 of the study's search ties on
the source's validation set) on the source's fit set (jittered: 4 shifted copies per
pixel of jitter, the study's 8 at 2 pixels).

    python experiments/optim_transfer_probe.py --out runs/bench

Writes DIR/optim_transfer_probe.json (and the trainings under DIR/optim_transfer_probe/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from torch import nn

from genlab.core.storage.checkpoints import load_checkpoint
from genlab.optim.studies.transfer import TransferConfig
from genlab.optim.training.models import HEAD
from genlab.optim.training.tasks import task_data
from genlab.optim.training.train import load_trained, train_digits

PRETRAIN_LR = 0.1
LRS = (0.003, 0.01, 0.03, 0.1)
PER_CLASS = (5, 10, 20)
CS = (0.01, 0.1, 1.0, 10.0, 100.0)


def logistic(train, val, test) -> float:
    """Test accuracy (%) of logistic regression with C chosen on validation accuracy."""
    best = None
    for c in CS:
        clf = LogisticRegression(C=c, max_iter=5000).fit(*train)
        score = clf.score(*val)
        if best is None or score > best[0]:
            best = (score, clf)
    return 100.0 * best[1].score(*test)


@torch.no_grad()
def features(model: nn.Module, images: torch.Tensor) -> np.ndarray:
    model.eval()
    head = getattr(model, HEAD)
    setattr(model, HEAD, nn.Identity())
    out = model(images).reshape(len(images), -1).numpy()
    setattr(model, HEAD, head)
    return out


def backbone_distance(pre: Path, tuned: Path) -> float:
    a, b = load_checkpoint(pre)["model"], load_checkpoint(tuned)["model"]
    keys = [k for k in a if not k.startswith(HEAD + ".") and a[k].is_floating_point()
            and "running" not in k]
    diff = sum(float((b[k] - a[k]).pow(2).sum()) for k in keys) ** 0.5
    return diff / sum(float(a[k].pow(2).sum()) for k in keys) ** 0.5


def probe(translate: int, seeds: list[int], root: Path) -> dict:
    cfg = TransferConfig(translate=translate, source_copies=max(1, 4 * translate),
                         target_steps=300)
    cfg.validate()
    data_seed = cfg.protocol().data_seed
    pres = {}
    for s in seeds:
        out = root / f"pretrain_t{translate}_s{s}"
        train_digits(replace(cfg.source_base(), lr=PRETRAIN_LR, seed=s, measure=False), out,
                     resume=out.exists(), progress_bar=False)
        pres[s] = out / "checkpoint.pt"
    linear = []
    for pc in PER_CLASS:
        data = task_data(cfg.target, "holdout", data_seed=data_seed, per_class=pc,
                         translate=translate)

        def flat(split):
            return split.images.reshape(len(split), -1).numpy(), split.labels.numpy()

        pixels = logistic(flat(data.fit), flat(data.val), flat(data.test))
        frozen = []
        for s in seeds:
            model, _ = load_trained(pres[s])
            frozen.append(logistic(*[(features(model, sp.images), sp.labels.numpy())
                                     for sp in (data.fit, data.val, data.test)]))
        linear.append({"per_class": pc, "pixels_logistic": pixels,
                       "frozen_features_logistic": statistics.fmean(frozen),
                       "frozen_features_std": statistics.pstdev(frozen)})
    sweep = []
    base = replace(cfg.target_base(), measure=False)  # 10 images per class, 300 steps
    for lr in LRS:
        row = {"lr": lr, "finetune": [], "scratch": [], "distance": []}
        for s in seeds:
            ft_out = root / f"ft_t{translate}_lr{lr:g}_s{s}"
            sc_out = root / f"scratch_t{translate}_lr{lr:g}_s{s}"
            ft = train_digits(replace(base, lr=lr, seed=s, init_from=str(pres[s])), ft_out,
                              resume=ft_out.exists(), progress_bar=False)
            sc = train_digits(replace(base, lr=lr, seed=s), sc_out, resume=sc_out.exists(),
                              progress_bar=False)
            row["finetune"].append(ft["test_acc"])
            row["scratch"].append(sc["test_acc"])
            row["distance"].append(backbone_distance(pres[s], ft_out / "checkpoint.pt"))
        sweep.append(row)
    return {"translate": translate, "linear": linear, "lr_sweep": sweep}


def mean_std(values) -> str:
    return f"{statistics.fmean(values):.1f} ± {statistics.pstdev(values):.1f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--translates", default="0,1,2")
    args = p.parse_args()
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    root = args.out / "optim_transfer_probe"
    results = []
    for t in (int(v) for v in args.translates.split(",")):
        r = probe(t, seeds, root)
        results.append(r)
        print(f"translate {t}: logistic regression, target test accuracy (%)")
        for row in r["linear"]:
            print(f"  {row['per_class']:2d}/class  pixels {row['pixels_logistic']:5.1f}   "
                  f"frozen pretrained features {row['frozen_features_logistic']:5.1f} ± "
                  f"{row['frozen_features_std']:.1f}")
        print(f"translate {t}: 10/class, 300 steps: fine-tune vs scratch (test %), backbone "
              "moved")
        for row in r["lr_sweep"]:
            print(f"  lr {row['lr']:<6g} fine-tune {mean_std(row['finetune'])}   scratch "
                  f"{mean_std(row['scratch'])}   ||w - w_pre|| / ||w_pre|| "
                  f"{statistics.fmean(row['distance']):.3f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "optim_transfer_probe.json").write_text(json.dumps(
        {"command": " ".join(sys.argv), "pretrain_lr": PRETRAIN_LR, "seeds": seeds,
         "results": results}, indent=1))


if __name__ == "__main__":
    main()
