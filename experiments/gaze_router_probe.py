"""Why does MoEGaze's router not follow the appearance clusters? Probes of trained runs.

For trained MoEGaze runs of the appearance world (a bench folder), embeds the held-out
source subjects and measures how much of the true appearance cluster each representation
carries: the router's own top-1 choice (NMI with the cluster), k-means with K = 4 on the
appearance embedding (NMI), and a linear probe (logistic regression fitted on the
training subjects' images, tested on the held-out subjects; chance = the largest
cluster's share there) on the appearance embedding a, on the style statistics it is
computed from, and on the backbone's pooled features that the experts read. As the
upper bound of what the images show, the same backbone is trained (supervised, 300
steps) to classify the cluster and tested on the held-out subjects.

    python experiments/gaze_router_probe.py --bench runs/gaze_bench --out runs/bench

Writes DIR/gaze_router_probe.json and .md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import normalized_mutual_info_score as nmi

from genlab.core.report import markdown_table
from genlab.core.runs import write_json
from genlab.gaze.data.splits import ordered_batches, step_batches
from genlab.gaze.models.backbones import ResNetBackbone
from genlab.gaze.predict import load_run
from genlab.gaze.protocol import SyntheticCache, load_task_data
from genlab.gaze.train import config_from_dict


@torch.no_grad()
def representations(model, data) -> dict[str, np.ndarray]:
    out = {"appearance": [], "style": [], "backbone": [], "router": []}
    for x, _ in data.load(ordered_batches(len(data), 256)):
        feats, maps = model.backbone(x, return_stages=True)
        fmap = maps[model.appearance_stage - 1]
        out["style"].append(torch.cat([fmap.mean((2, 3)), fmap.flatten(2).std(2)], 1))
        out["appearance"].append(model.appearance_embedding(maps))
        out["backbone"].append(feats)
        out["router"].append(model.router_probs(out["appearance"][-1]).argmax(1))
    return {k: torch.cat(v).numpy() for k, v in out.items()}


def probe(x_fit: np.ndarray, c_fit: np.ndarray, x: np.ndarray, c: np.ndarray) -> float:
    """Accuracy on (x, c) of a standardised logistic regression fitted on (x_fit, c_fit)."""
    mu, sd = x_fit.mean(0), x_fit.std(0) + 1e-6
    clf = LogisticRegression(max_iter=3000).fit((x_fit - mu) / sd, c_fit)
    return float(clf.score((x - mu) / sd, c))


def supervised_cluster_accuracy(train, val, seed: int, steps: int = 300) -> float:
    """Held-out accuracy of the backbone + a linear layer trained to predict the cluster."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(ResNetBackbone(8), torch.nn.Linear(64, 4))
    opt = torch.optim.AdamW(net.parameters(), 3e-3)
    for x, labels in train.load(step_batches(len(train), 64, seed, 0, steps)):
        loss = torch.nn.functional.cross_entropy(net(x), labels.cluster)
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        pred = torch.cat([net(x).argmax(1) for x, _ in val.load(ordered_batches(len(val), 256))])
    return float((pred == val.labels.cluster).float().mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--source", default="app-e")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cache = SyntheticCache(args.bench / "data")
    rows = []
    runs = sorted((args.bench / "runs").glob(f"appearance__{args.source}__moegaze__f1__s*"))
    for run in runs:
        model, cfg_dict = load_run(run)
        cfg = config_from_dict(cfg_dict)
        task = load_task_data(cfg, cache)
        val, fit = task.val, task.train.subset(range(0, len(task.train), 2))
        c, c_fit = val.labels.cluster.numpy(), fit.labels.cluster.numpy()
        reps, reps_fit = representations(model, val), representations(model, fit)
        km = KMeans(4, n_init=10, random_state=cfg.seed).fit_predict(reps["appearance"])
        rows.append({
            "run": run.name,
            "router top-1 NMI": float(nmi(c, reps["router"])),
            "k-means(a) NMI": float(nmi(c, km)),
            **{f"probe {k}": probe(reps_fit[k], c_fit, reps[k], c)
               for k in ("appearance", "style", "backbone")},
            "supervised CNN": supervised_cluster_accuracy(task.train, val, cfg.seed),
            "chance": float(np.bincount(c).max() / len(c)),
        })
    mean = {k: float(np.mean([r[k] for r in rows])) for k in rows[0] if k != "run"}
    rows.append({"run": "mean", **mean})
    md = (f"Held-out {args.source} subjects of the trained MoEGaze runs in {args.bench}.\n\n"
          + markdown_table(rows, digits=3))
    print(md)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "gaze_router_probe.json", {"rows": rows})
    (args.out / "gaze_router_probe.md").write_text(md)


if __name__ == "__main__":
    main()
