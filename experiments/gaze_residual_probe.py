"""Can training residuals find the appearance clusters? A probe of trained variant runs.

For finished runs of experiments/gaze_moe_variants.py (appearance world), predicts every
training image with the run's final model and summarises each training subject's
residual as genlab.gaze.models.residual_groups does (mean offset per axis, slope per axis).
Reports, per feature, the between-cluster over within-cluster variance across subjects
(how well the true cluster shows in it), the mean offset per true cluster, and the NMI
between the residual k-means groups and the true clusters.

    python experiments/gaze_residual_probe.py --variants runs/bench/gaze_moe_variants \
        --data runs/bench/gaze_moe_variants_data --runs 0_s0,1_s0,9_s0 --out runs/bench

Writes DIR/gaze_residual_probe.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import normalized_mutual_info_score as nmi

from genlab.core.runs import write_json
from genlab.gaze.metrics import predict
from genlab.gaze.models.residual_groups import group_subjects, subject_residual_features
from genlab.gaze.predict import load_run
from genlab.gaze.protocol import SyntheticCache, load_task_data
from genlab.gaze.train import config_from_dict

FEATURES = ("offset pitch", "offset yaw", "slope pitch", "slope yaw")


def probe(folder: Path, cache: Path, k: int = 4) -> dict:
    cfg = config_from_dict(json.loads((folder / "config.json").read_text()))
    train = load_task_data(cfg, SyntheticCache(cache)).train
    model, _ = load_run(folder)
    pred, lab = predict(model, train, "cpu", 256).gaze, train.labels
    ids, feats = subject_residual_features(pred, lab.gaze, lab.subject)
    cl = np.array([int(lab.cluster[lab.subject == s][0]) for s in ids])
    f, present = feats.numpy(), np.unique(cl)
    grand = f.mean(axis=0)
    between = sum((cl == c).sum() * (f[cl == c].mean(axis=0) - grand) ** 2 for c in present)
    within = sum(((f[cl == c] - f[cl == c].mean(axis=0)) ** 2).sum(axis=0) for c in present)
    _, groups = group_subjects(pred, lab.gaze, lab.subject, k, cfg.seed)
    return {
        "between_over_within": dict(zip(FEATURES, (between / within).tolist(), strict=True)),
        "offset_deg_per_cluster": {int(c): f[cl == c, :2].mean(axis=0).tolist()
                                   for c in present},
        "offset_std_within_deg": np.sqrt(within[:2] / len(f)).tolist(),
        "subjects_per_cluster": np.bincount(cl, minlength=k).tolist(),
        "group_sizes": np.bincount(groups.numpy(), minlength=k).tolist(),
        "group_cluster_nmi": float(nmi(cl, groups.numpy())),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--runs", default="0_s0,1_s0,9_s0")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    result = {}
    for run in args.runs.split(","):
        result[run] = probe(args.variants / run, args.data)
        print(run, json.dumps(result[run]))
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "gaze_residual_probe.json", result)


if __name__ == "__main__":
    main()
