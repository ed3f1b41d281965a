"""Groups of training subjects that share an image-to-gaze mapping (residual grouping).

Why: MoEGaze's appearance embedding is learned from subject identity, so it separates
people by every visible trait at once; the router's k-means prototypes then split the
training set along whatever varies most, which need not be what changes the gaze
mapping (in the appearance world the router's top-1 expert carries little of the true
cluster while a linear probe on the same embedding finds it well above chance). What
experts need is a grouping by the *mapping*: people whose eyes turn by another gain or
whose visual axis is offset by another kappa.

How (ours): after part of the training, the current model predicts every training image.
Per subject the residual r = label - prediction (pitch and yaw, degrees) is summarised by
its mean (an offset: kappa) and, per axis, the least-squares slope of r on the label
centred on the subject's own mean (a gain). The four numbers are standardised over
subjects and clustered by k-means into K groups, one per expert. Only source training
labels are used; no cluster label is read.
"""

from __future__ import annotations

import numpy as np
import torch

from genlab.core.errors import DataError
from genlab.gaze.models.routing import kmeans


def subject_residual_features(pred: torch.Tensor, true: torch.Tensor,
                              subject: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sorted subject ids (S,), features (S, 4)): mean residual (pitch, yaw) in degrees
    and the slope of the residual on the centred label, per axis."""
    if not (len(pred) == len(true) == len(subject)) or pred.ndim != 2 or pred.shape[1] != 2:
        raise DataError(f"residual features need (N, 2) predictions and labels and N subject "
                        f"ids, got {tuple(pred.shape)}, {tuple(true.shape)}, "
                        f"{tuple(subject.shape)}")
    res = torch.rad2deg(true.double() - pred.double())
    lab = torch.rad2deg(true.double())
    ids = torch.unique(subject)
    feats = []
    for s in ids:
        sel = subject == s
        r, g = res[sel], lab[sel] - lab[sel].mean(dim=0)
        var = (g * g).sum(dim=0)
        slope = torch.where(var > 0, (g * (r - r.mean(dim=0))).sum(dim=0) / var.clamp_min(1e-12),
                            torch.zeros(2, dtype=torch.float64))
        feats.append(torch.cat([r.mean(dim=0), slope]))
    return ids, torch.stack(feats)


def group_subjects(pred: torch.Tensor, true: torch.Tensor, subject: torch.Tensor, k: int,
                   seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(sorted subject ids, group of each in 0..k-1) by k-means on standardised residual
    features (see the module docstring)."""
    ids, feats = subject_residual_features(pred, true, subject)
    if len(ids) < k:
        raise DataError(f"residual grouping into {k} groups needs at least {k} training "
                        f"subjects, got {len(ids)}")
    z = (feats - feats.mean(dim=0)) / feats.std(dim=0).clamp_min(1e-9)
    centroids = kmeans(z.float(), k, seed=seed)
    groups = torch.cdist(z.float(), centroids).argmin(dim=1)
    return ids, groups


def lookup_groups(ids: torch.Tensor, groups: torch.Tensor,
                  subject: torch.Tensor) -> torch.Tensor:
    """Group of each sample's subject (``ids`` sorted); DataError for an unknown subject."""
    pos = torch.searchsorted(ids, subject).clamp_max(len(ids) - 1)
    known = ids[pos] == subject
    if not bool(known.all()):
        missing = np.unique(subject[~known].cpu().numpy())[:5].tolist()
        raise DataError(f"residual groups know no subject {missing}: groups are fitted on the "
                        "training subjects")
    return groups[pos]
