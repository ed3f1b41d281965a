"""Evaluation of gaze models: predictions, angular errors by subject and cluster, routers.

Angular error in degrees (:func:`genlab.gaze.geometry.angular_error_deg`). Besides the
mean and median, every evaluation keeps the mean error and image count of each subject
and each appearance cluster, so that tables can bootstrap over subjects and seeds.

Router statistics (models that route): load per expert (mean weight), top-1 share,
sharpness (mean max weight), subject purity (mean share of a subject's images sent to
that subject's most used expert) and, where the data know each sample's appearance
cluster, the router's selectivity for it: cluster purity (mean share of a cluster's
images on its most used expert) and the normalised mutual information between top-1
expert and cluster (0: unrelated, 1: one expert per cluster).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from sklearn.metrics import normalized_mutual_info_score

from genlab.gaze.data.splits import ordered_batches
from genlab.gaze.geometry import angular_error_deg


@dataclass
class Prediction:
    """Predictions (N, 2) pitch-yaw radians and router weights (N, K) or None."""

    gaze: torch.Tensor
    weights: torch.Tensor | None


@torch.no_grad()
def predict(model, data, device, batch_size: int = 256) -> Prediction:
    """Eval-mode predictions of a whole data set, in its order."""
    was_training = model.training
    model.eval()
    preds, weights = [], []
    for x, labels in data.load(ordered_batches(len(data), batch_size)):
        out = model.outputs(x.to(device), labels.to(device))
        preds.append(out.gaze.float().cpu())
        if out.router_weights is not None:
            weights.append(out.router_weights.float().cpu())
    model.train(was_training)
    return Prediction(torch.cat(preds), torch.cat(weights) if weights else None)


def angular_errors(pred: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
    """Per-sample angular error in degrees (float64)."""
    return torch.as_tensor(angular_error_deg(pred.double(), true.double()))


def error_stats(pred: torch.Tensor, true: torch.Tensor) -> dict:
    """Mean and median angular error (degrees) between pitch-yaw predictions and labels."""
    err = angular_errors(pred, true)
    return {"mean_deg": float(err.mean()), "median_deg": float(err.median())}


def group_means(err: torch.Tensor, groups: torch.Tensor) -> dict[str, list[float]]:
    """{group id: [mean error, count]} over the groups present (ids as strings, sorted)."""
    out = {}
    for g in torch.unique(groups).tolist():
        sel = err[groups == g]
        out[str(int(g))] = [float(sel.mean()), int(len(sel))]
    return out


def router_stats(weights: torch.Tensor | None, subject: torch.Tensor,
                 cluster: torch.Tensor | None = None) -> dict:
    """Load, top-1 share, sharpness, subject purity and (with clusters) selectivity."""
    if weights is None:
        return {}
    k = weights.shape[1]
    top = weights.argmax(dim=1)
    share = torch.bincount(top, minlength=k).float() / len(top)
    stats = {
        "load": weights.mean(dim=0).tolist(),
        "top1_share": share.tolist(),
        "mean_max_weight": float(weights.max(dim=1).values.mean()),
        "subject_purity": _purity(top, subject, k),
    }
    if cluster is not None and bool((cluster >= 0).all()):
        stats["cluster_purity"] = _purity(top, cluster, k)
        stats["expert_cluster_nmi"] = float(normalized_mutual_info_score(
            cluster.numpy(), top.numpy()))
    return stats


def _purity(top: torch.Tensor, groups: torch.Tensor, k: int) -> float:
    """Mean over groups of the share of the group's samples on its most used expert."""
    shares = []
    for g in groups.unique():
        counts = torch.bincount(top[groups == g], minlength=k)
        shares.append(float(counts.max()) / float(counts.sum()))
    return sum(shares) / len(shares)


def summarise(pred: Prediction, labels) -> dict:
    """Errors (overall, per subject, per cluster) and router statistics of predictions."""
    err = angular_errors(pred.gaze, labels.gaze)
    known = labels.cluster >= 0
    return {
        "mean_deg": float(err.mean()),
        "median_deg": float(err.median()),
        "per_subject": group_means(err, labels.subject),
        "per_cluster": group_means(err[known], labels.cluster[known]) if known.any() else {},
        "router": router_stats(pred.weights, labels.subject,
                               labels.cluster if known.all() else None),
    }


def constant_summary(mean_gaze: torch.Tensor, labels) -> dict:
    """Errors of the constant predictor that always answers ``mean_gaze`` (pitch, yaw)."""
    const = Prediction(mean_gaze.reshape(1, 2).expand(len(labels), 2).clone(), None)
    out = summarise(const, labels)
    out.pop("router")
    return out
