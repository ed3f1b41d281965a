"""Does the synthetic world reproduce the cross-domain problem? A data sanity check.

Trains one small plain CNN per source domain (broad-e, broad-g) on 80% of its subjects
and reports the angular error on the held-out source subjects and on the two target
domains (narrow-m, narrow-d), and on each target split by appearances that are rare
in the sources (glasses, dark skin). As in-domain references, the same CNN is trained
on each target domain itself (other subjects: a different seed's population) and tested
on the same target images. If the domains are built as intended, cross-domain errors
exceed the in-domain ones, and rare appearances cost extra.

    python experiments/gaze_domain_gap.py --out runs/bench            # ~5 min on 2 cores
    python experiments/gaze_domain_gap.py --out runs/bench --quick    # ~1 min

Writes DIR/gaze_domain_gap.json. The network is deliberately tiny and is not MoEGaze
nor its baseline (see genlab.gaze.models for those).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from genlab.core.runs import write_json
from genlab.core.seeding import seed_everything
from genlab.gaze import SyntheticGaze, subject_split
from genlab.gaze.geometry import angular_error_deg
from genlab.gaze.synth.dataset import APPEARANCE_NAMES


def tiny_cnn() -> nn.Module:
    """Three conv blocks, global pooling, a linear head to (pitch, yaw)."""
    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o),
                             nn.ReLU(inplace=True), nn.MaxPool2d(2))
    return nn.Sequential(block(3, 24), block(24, 48), block(48, 96), block(96, 96),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(96, 2))


def to_tensors(ds: SyntheticGaze, idx=None):
    idx = np.arange(len(ds)) if idx is None else idx
    return ds.images[idx].float() / 255.0, ds.gaze[idx], ds.appearance[idx]


def train(x, y, epochs: int, seed: int) -> nn.Module:
    seed_everything(seed)
    net = tiny_cnn()
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-4)
    steps = epochs * ((len(x) + 127) // 128)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 3e-3, total_steps=steps)
    g = torch.Generator().manual_seed(seed)
    net.train()
    for _ in range(epochs):
        for b in torch.randperm(len(x), generator=g).split(128):
            loss = (net(x[b]) - y[b]).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return net.eval()


@torch.no_grad()
def errors(net, x) -> torch.Tensor:
    return torch.cat([net(c) for c in x.split(512)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    n_train, n_test, epochs = (2000, 600, 4) if args.quick else (6000, 2000, 8)
    size = (32, 48)
    t0 = time.time()
    targets = {d: SyntheticGaze(d, n_test, seed=args.seed + 1, size=size)
               for d in ("narrow-m", "narrow-d")}
    rows = []
    for source in ("broad-e", "broad-g", "narrow-m", "narrow-d"):
        # in-domain references use another population of the target domain (seed + 2)
        data_seed = args.seed + (2 if source in targets else 0)
        src = SyntheticGaze(source, n_train, seed=data_seed, size=size)
        tr, va = subject_split(src.subject, (0.8, 0.2), seed=args.seed)
        x, y, _ = to_tensors(src, tr)
        net = train(x, y, epochs, args.seed)
        xv, yv, _ = to_tensors(src, va)
        row = {"source": source, "within_source_deg": float(
            angular_error_deg(errors(net, xv), yv).mean())}
        for name, ds in targets.items():
            xt, yt, app = to_tensors(ds)
            err = angular_error_deg(errors(net, xt), yt).numpy()
            glasses = app[:, APPEARANCE_NAMES.index("glasses")] > 0.5
            dark = app[:, APPEARANCE_NAMES.index("skin_tone")] > 0.7
            row[f"{name}_deg"] = float(err.mean())
            row[f"{name}_glasses_deg"] = float(err[glasses].mean()) if glasses.any() else None
            row[f"{name}_no_glasses_deg"] = float(err[~glasses].mean())
            row[f"{name}_dark_skin_deg"] = float(err[dark].mean()) if dark.any() else None
            row[f"{name}_light_skin_deg"] = float(err[~dark].mean())
        rows.append(row)
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()})
    result = {"train_images": n_train, "test_images": n_test, "epochs": epochs,
              "size": list(size), "seed": args.seed, "seconds": time.time() - t0, "rows": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "gaze_domain_gap.json", result)
    print(f"wrote {out / 'gaze_domain_gap.json'}")


if __name__ == "__main__":
    main()
