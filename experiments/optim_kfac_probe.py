"""Why the K-FAC CSAM stays at chance on the Transformer at rho >= 0.05.

CSAM's second perturbation is e2 = rho2 F^-1 v / sqrt(v^T F^-1 v). Its Euclidean length
is rho2 ||F^-1 v|| / sqrt(v^T F^-1 v): for v in an eigendirection of F with eigenvalue
lambda that is rho2 / sqrt(lambda), so the damped factors (lambda >= damping = 1e-3) can
stretch e2 up to 1/sqrt(1e-3) ~ 32 times the radius the grid names, where SAM's and
CSAM_Identity's perturbations have length rho exactly. Scaling the factors by c is the
same as dividing the damping by c and e2's length by sqrt(c), so damping and factor
scaling are one axis. The hypothesis: at rho >= 0.05 the stretched e2 (Euclidean
length ~1 and more) throws the Transformer's weights too far for its gradient to mean
anything, so it never trains.

The probe trains the Transformer of the standard protocol (width 32, 2 blocks, batch 64,
SGD momentum 0.9 with weight decay 5e-4, cosine learning rate, lr 0.1: the K-FAC CSAM's
own search choice) with the K-FAC CSAM at the grid's radii and three changes, one at a
time: a larger damping (1e-1, 1), and a Euclidean normalisation of the same direction,
e2 = rho2 F^-1 v / ||F^-1 v|| (K-FAC's direction, SAM's length). Every step it logs the
stretch ||e2|| / rho2 and the share of ||e2||^2 on the layers K-FAC preconditions (the
attention's fused input projection and the embeddings get the identity).

    python experiments/optim_kfac_probe.py --out runs/bench

Writes DIR/optim_kfac_probe.json and prints one row per variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

from genlab.core.data import Batches
from genlab.optim.optimizers.csam import CSAM
from genlab.optim.optimizers.perturb import global_norm
from genlab.optim.studies.search import Protocol
from genlab.optim.training.train import prepare, split_scores

#: (name, rho, damping, normalisation): "fisher" is CSAM's, "euclid" SAM's length
VARIANTS = (
    ("default damping, rho 0.01", 0.01, 1e-3, "fisher"),
    ("default damping, rho 0.05", 0.05, 1e-3, "fisher"),
    ("default damping, rho 0.25", 0.25, 1e-3, "fisher"),
    ("damping 0.1, rho 0.05", 0.05, 1e-1, "fisher"),
    ("damping 0.1, rho 0.25", 0.25, 1e-1, "fisher"),
    ("damping 1, rho 0.25", 0.25, 1.0, "fisher"),
    ("Euclidean length, rho 0.05", 0.05, 1e-3, "euclid"),
    ("Euclidean length, rho 0.25", 0.25, 1e-3, "euclid"),
)


class ProbedCSAM(CSAM):
    """The K-FAC CSAM, logging e2's stretch; ``euclid``: e2 rescaled to length rho2."""

    def __init__(self, *args, euclid: bool = False, **kw):
        super().__init__(*args, **kw)
        self.euclid, self.log = euclid, []
        self.kfac_params = {p for m in self.kfac.layers for p in (m.weight, m.bias)
                            if p is not None}

    def _direction(self, params, v):
        e2 = super()._direction(params, v)
        rho2 = self.param_groups[0]["rho2"]
        norm = float(global_norm(e2))
        on_kfac = sum(float((e * e).sum()) for p, e in zip(params, e2, strict=True)
                      if p in self.kfac_params)
        self.log.append({"stretch": norm / rho2,
                         "kfac_share": on_kfac / norm ** 2 if norm > 0 else 0.0})
        if self.euclid and norm > 0:
            e2 = [e * (rho2 / norm) for e in e2]
        return e2


def train(rho: float, damping: float, normalisation: str, epochs: int, seed: int) -> dict:
    cfg = Protocol.for_arch("transformer", epochs=epochs).base(optimizer="csam", lr=0.1,
                                                                rho=rho, seed=seed)
    data, model = prepare(cfg)
    torch.manual_seed(seed)
    opt = ProbedCSAM(model.parameters(), torch.optim.SGD, rho1=rho, rho2=rho, model=model,
                     damping=damping, euclid=normalisation == "euclid", lr=cfg.lr,
                     momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loss_fn = nn.CrossEntropyLoss()
    batches = Batches(data.fit, cfg.batch_size, seed=seed)
    start, first_epoch_loss = time.perf_counter(), None
    for epoch in range(epochs):
        model.train()
        losses = []
        for x, y in batches.epoch(epoch):
            def closure(x=x, y=y):
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                return loss
            losses.append(float(opt.step(closure).detach()))
        sched.step()
        if first_epoch_loss is None:
            first_epoch_loss = statistics.fmean(losses)
    stretch = [r["stretch"] for r in opt.log]
    share = [r["kfac_share"] for r in opt.log]
    return {"first_epoch_loss": first_epoch_loss, "last_epoch_loss": statistics.fmean(losses),
            "train_acc": split_scores(model, data.fit, "cpu")["acc"],
            "val_acc": split_scores(model, data.val, "cpu")["acc"],
            "test_acc": split_scores(model, data.test, "cpu")["acc"],
            "stretch_median": statistics.median(stretch), "stretch_max": max(stretch),
            "stretch_median_first_100": statistics.median(stretch[:100]),
            "kfac_share_median": statistics.median(share), "steps": len(stretch),
            "seconds": time.perf_counter() - start}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--epochs", type=int, default=40,
                   help="Epochs per training (40: the standard protocol's, as in the "
                        "sensitivity grid)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variants", default="all", help="Comma-separated indices (0-7) or all.")
    args = p.parse_args()
    torch.set_num_threads(1)
    chosen = (range(len(VARIANTS)) if args.variants == "all"
              else [int(i) for i in args.variants.split(",")])
    rows = []
    print(f"{'variant':30} {'stretch med':>11} {'max':>7} {'K-FAC share':>11} "
          f"{'loss 1st':>8} {'last':>6} {'train':>6} {'val':>6} {'test':>6}")
    for i in chosen:
        name, rho, damping, norm = VARIANTS[i]
        row = {"variant": name, "rho": rho, "damping": damping, "normalisation": norm,
               **train(rho, damping, norm, args.epochs, args.seed)}
        rows.append(row)
        print(f"{name:30} {row['stretch_median']:11.2f} {row['stretch_max']:7.2f} "
              f"{row['kfac_share_median']:11.3f} {row['first_epoch_loss']:8.3f} "
              f"{row['last_epoch_loss']:6.3f} {row['train_acc']:6.1f} {row['val_acc']:6.1f} "
              f"{row['test_acc']:6.1f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "optim_kfac_probe.json").write_text(json.dumps(
        {"command": " ".join(sys.argv), "epochs": args.epochs, "seed": args.seed,
         "lr": 0.1, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
