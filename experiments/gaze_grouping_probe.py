"""What can group app-e's training subjects into their appearance clusters (measured before
the sub-dataset candidates ran; docs/moegaze.md, "Routing by appearance sub-datasets").

On app-e (3000 images, data seed 0, 20% of the subjects held out) it measures:

1. colour and texture statistics of each image (six blocks, 102 numbers): a per-image
   linear probe of the true cluster on held-out subjects, and k-means (K = 4, three
   k-means seeds) of the training subjects' mean statistics, per block and all together;
   a label-free choice of statistics by intra-class correlation over subjects; and the
   candidate's own colour grouping (genlab.gaze.models.subgroups.colour_groups);
2. the held-out residual grouping: a baseline per half of the training subjects predicts
   the other half; k-means on the held-out residual features;
3. oracle-routed MoEGaze per half, every held-out subject through each expert: how often
   the lowest-error expert is the subject's own cluster.

    python experiments/gaze_grouping_probe.py --out runs/bench   # ~2 CPU-minutes

With ``--crossfit-run RUN`` (a finished ``--grouping crossfit`` run on app-e, e.g. a run
folder of experiments/gaze_moe_variants.py) it instead reads that run's fold models and
prints, per iteration and fold, the held-out subjects' mean error through each expert per
true cluster, and the median gap between a subject's best and second-best expert.

Writes DIR/gaze_grouping_probe.json (and the fold models in DIR/gaze_grouping_probe/).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import normalized_mutual_info_score as nmi

from genlab.core.storage.files import write_json
from genlab.gaze.data.splits import hold_out_subjects
from genlab.gaze.metrics import predict
from genlab.gaze.models.residual_groups import subject_residual_features
from genlab.gaze.models.subgroups import (
    colour_groups,
    colour_statistics,
    subject_expert_errors,
    subject_folds,
)
from genlab.gaze.protocol import SyntheticCache, TaskData
from genlab.gaze.train import GazeTrainConfig, train_gaze


def image_statistics(images: torch.Tensor) -> dict[str, np.ndarray]:
    """Blocks of hand-made statistics of uint8 images (N, 3, H, W)."""
    x = images.float().numpy() / 255.0
    gray = x.mean(axis=1)
    value = np.clip((x.max(axis=1) * 8).astype(int), 0, 7)
    gy, gx = np.gradient(gray, axis=(1, 2))
    mag, ang = np.hypot(gx, gy), np.arctan2(gy, gx) % np.pi
    abin = np.clip((ang / np.pi * 8).astype(int), 0, 7)
    orient = np.stack([(mag * (abin == k)).sum((1, 2)) for k in range(8)], 1)
    return {
        "rg-chromaticity": colour_statistics(torch.from_numpy(x)).numpy(),
        "brightness histogram": np.stack([(value == k).mean((1, 2)) for k in range(8)], 1),
        "channel mean, std": np.concatenate([x.mean((2, 3)), x.std((2, 3))], 1),
        "gradient orientations": orient / (mag.sum((1, 2))[:, None] + 1e-9),
        "row profile": gray.mean(2),
        "column profile": gray.mean(1)[:, ::4],
    }


def subject_table(values: np.ndarray, subject: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return np.stack([values[subject == s].mean(0) for s in ids])


def kmeans_nmi(feats: np.ndarray, truth: np.ndarray, k: int = 4) -> list[float]:
    z = (feats - feats.mean(0)) / (feats.std(0) + 1e-9)
    return [round(float(nmi(truth, KMeans(k, n_init=10, random_state=s).fit(z).labels_)), 3)
            for s in range(3)]


def colour_probe(train, val) -> dict:
    st = train.subject.numpy()
    ct, cv = train.cluster.numpy(), val.cluster.numpy()
    ids = np.unique(st)
    truth = np.array([ct[st == s][0] for s in ids])
    bt, bv = image_statistics(train.images), image_statistics(val.images)
    bt["all"] = np.concatenate(list(bt.values()), 1)
    bv["all"] = np.concatenate(list(bv.values()), 1)
    rows = []
    for name in bt:
        mu, sd = bt[name].mean(0), bt[name].std(0) + 1e-9
        probe = LogisticRegression(max_iter=3000).fit((bt[name] - mu) / sd, ct)
        rows.append({"statistics": name, "numbers": bt[name].shape[1],
                     "per-image probe (held-out)": float(probe.score((bv[name] - mu) / sd, cv)),
                     "subject k-means NMI (3 seeds)": kmeans_nmi(
                         subject_table(bt[name], st, ids), truth)})
    allt = bt["all"]
    within = np.sqrt(np.mean([allt[st == s].var(0) for s in ids], 0))
    between = subject_table(allt, st, ids).std(0)
    icc = between ** 2 / (between ** 2 + within ** 2 + 1e-18)
    keep = icc >= 0.5
    rows.append({"statistics": "all with ICC >= 0.5 (label-free)", "numbers": int(keep.sum()),
                 "per-image probe (held-out)": None,
                 "subject k-means NMI (3 seeds)": kmeans_nmi(
                     subject_table(allt[:, keep], st, ids), truth)})
    own = []
    for seed in range(3):
        gid, groups = colour_groups(train, 4, seed)
        own.append(round(float(nmi([int(ct[st == s][0]) for s in gid.numpy()],
                                   groups.numpy())), 3))
    return {"rows": rows, "colour_groups_nmi": own, "chance": float(np.bincount(cv).max()
                                                                      / len(cv))}


def fold_models(train, out: Path, model: str, routing: str, steps: int):
    parts = subject_folds(train, 2, 0)
    for f, (rest, held) in enumerate(parts):
        cfg = GazeTrainConfig(model=model, routing=routing, source="app-e",
                              targets=["app-e"], steps=steps, seed=0)
        folder = out / f"{model}_{routing}_f{f}"
        m, _ = train_gaze(cfg, TaskData(rest, held, {"app-e": held}), folder, plots=False,
                          progress_bar=False, resume=(folder / "config.json").is_file())
        yield m, held


def cluster_of(data, ids: torch.Tensor) -> np.ndarray:
    return np.array([int(data.cluster[data.subject == s][0]) for s in ids])


def residual_probe(train, out: Path, steps: int) -> dict:
    feats, truth = [], []
    for m, held in fold_models(train, out, "baseline", "soft", steps):
        ids, f = subject_residual_features(predict(m, held, "cpu").gaze, held.gaze, held.subject)
        feats.append(f.numpy())
        truth.append(cluster_of(held, ids))
    feats, truth = np.concatenate(feats), np.concatenate(truth)
    means = {str(c): feats[truth == c].mean(0).round(2).tolist() for c in np.unique(truth)}
    return {"held_out_residual_nmi": kmeans_nmi(feats, truth),
            "mean_residual_features_per_cluster": means}


def oracle_probe(train, out: Path, steps: int) -> dict:
    folds = []
    for m, held in fold_models(train, out, "moegaze", "oracle", steps):
        ids, errors = subject_expert_errors(m, held, "cpu")
        truth = cluster_of(held, ids)
        best = errors.argmin(dim=1).numpy()
        folds.append({"subjects": len(ids), "own_expert_best": int((best == truth).sum()),
                      "nmi": float(nmi(truth, best)),
                      "mean_error_per_true_cluster_and_expert": {
                          str(c): errors[torch.from_numpy(truth == c)].mean(0).round(
                              decimals=2).tolist() for c in np.unique(truth)}})
    return {"folds": folds}


def crossfit_fold_probe(run: Path, train) -> list[dict]:
    from genlab.gaze.train import config_from_dict, trained_model

    cfg = config_from_dict(json.loads((run / "config.json").read_text()))
    parts = subject_folds(train, cfg.group_folds, cfg.seed)
    rows = []
    for sub in sorted((run / "grouping").glob("experts_it*_f*")):
        it, fold = (int(x) for x in sub.name[len("experts_it"):].split("_f"))
        held = parts[fold][1]
        ids, errors = subject_expert_errors(trained_model(sub), held, "cpu")
        truth = cluster_of(held, ids)
        best2 = errors.sort(dim=1).values
        rows.append({"iteration": it, "fold": fold,
                     "median best-second gap (deg)": round(float(
                         (best2[:, 1] - best2[:, 0]).median()), 2),
                     **{f"cluster {c} through experts 0..K-1": errors[
                         torch.from_numpy(truth == c)].mean(0).numpy().round(1).tolist()
                        for c in np.unique(truth)}})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--crossfit-run", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = SyntheticCache(args.out / "gaze_moe_variants_data").get("app-e", 3000, 0, (32, 48))
    train, val = hold_out_subjects(data, 0.2, 0)
    if args.crossfit_run is not None:
        rows = crossfit_fold_probe(args.crossfit_run, train)
        for row in rows:
            print(row)
        write_json(args.out / f"gaze_crossfit_probe_{args.crossfit_run.name}.json", rows)
        return
    folder = args.out / "gaze_grouping_probe"
    result = {"colour": colour_probe(train, val),
              "residual": residual_probe(train, folder, args.steps),
              "oracle": oracle_probe(train, folder, args.steps)}
    for row in result["colour"]["rows"]:
        print(row)
    print("colour_groups NMI (3 seeds):", result["colour"]["colour_groups_nmi"])
    print("held-out residual grouping:", result["residual"])
    print("oracle experts per fold:", result["oracle"])
    write_json(args.out / "gaze_grouping_probe.json", result)


if __name__ == "__main__":
    main()
