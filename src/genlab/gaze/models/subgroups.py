"""Appearance sub-datasets: groups of training subjects fixed before MoEGaze's gaze training.

The MoEGaze abstract trains each expert on "a specific subset of appearances", "easier
training on sub-datasets with smaller appearance variations". Here (ours) the K
sub-datasets are groups of *training subjects* (a person's images stay together), found
from source training data only, in one of two ways:

* ``colour``: every image's rg-chromaticity histogram (r/(r+g+b), g/(r+g+b) in 8 x 8
  bins): a colour description that ignores the light's intensity and where in the
  crop the iris sits, so it changes little across one person's images. The subjects'
  mean histograms are centred, each bin divided by its typical spread within one
  subject's images (a bin that marks people consistently, such as the iris colour on a
  few pixels, weighs more than a bin that flickers with noise), reduced to their first K
  principal components and clustered by k-means into K groups.
* ``crossfit`` (subject-level cross-fitting, an EM reading): the training subjects are
  split into folds; a model trained on the other folds predicts each held-out subject,
  whose grouping is then read from how that *held-out* error behaves. Start: the
  held-out residual features (mean offset and gain per axis, genlab.gaze.models.
  residual_groups) of a baseline per fold, clustered into K groups (or the ``colour``
  groups). Step: per fold, a MoEGaze whose experts are trained on the current groups
  (each training image sent to its subject's group's expert) predicts every held-out
  subject through each expert in turn; the subject joins the expert with the lowest
  mean error. Steps repeat until no subject moves or the iterations are spent.

Training then sends each training image to its group's expert (hard, no router in the
way) and trains the router to name the group (cross-entropy of its logits); inference
routes softly by the router (similarity to the groups' prototypes).

The training loops themselves belong to genlab.gaze.train: :func:`crossfit_groups` takes
them as a callback, so this module needs no trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import normalized_mutual_info_score

from genlab.core.errors import ConfigError, DataError
from genlab.gaze.data.splits import ordered_batches, subject_split
from genlab.gaze.metrics import angular_errors, predict
from genlab.gaze.models.residual_groups import subject_residual_features
from genlab.gaze.models.routing import kmeans

CHROMA_BINS = 8
KMEANS_RESTARTS = 10  # groups of a few dozen subjects: Lloyd's local minima are common
GROUPINGS = ("none", "colour", "crossfit")
GROUP_INITS = ("residual", "colour")


def colour_statistics(x: torch.Tensor, bins: int = CHROMA_BINS) -> torch.Tensor:
    """Soft rg-chromaticity histogram (N, bins * bins) of images (N, 3, H, W) in [0, 1]:
    each pixel's (r/(r+g+b), g/(r+g+b)) is shared bilinearly between the four nearest bin
    centres (so a colour near a bin edge does not jump bins); rows sum to one. Black
    pixels (r + g + b = 0) count as grey."""
    if x.ndim != 4 or x.shape[1] != 3:
        raise DataError(f"colour statistics need (N, 3, H, W) images, got {tuple(x.shape)}")
    x = x.double()
    total = x.sum(dim=1)
    grey = total <= 0
    hist = torch.zeros(len(x), bins * bins, dtype=torch.float64)
    parts = []
    for c in (0, 1):
        share = torch.where(grey, 1.0 / 3, x[:, c] / total.clamp_min(1e-12)).flatten(1)
        u = (share * bins - 0.5).clamp(0, bins - 1)  # position among the bin centres
        lo = u.floor().long().clamp_max(bins - 2) if bins > 1 else u.floor().long()
        w = u - lo
        parts.append(((lo, 1 - w), ((lo + 1).clamp_max(bins - 1), w)))
    for ri, rw in parts[0]:
        for gi, gw in parts[1]:
            hist.scatter_add_(1, ri * bins + gi, rw * gw)
    return (hist / x[0, 0].numel()).float()


def subject_means(values: torch.Tensor, subject: torch.Tensor):
    """(sorted subject ids (S,), per-subject mean rows (S, D))."""
    ids, inverse = torch.unique(subject, return_inverse=True)
    sums = torch.zeros(len(ids), values.shape[1], dtype=torch.float64)
    sums.index_add_(0, inverse, values.double())
    counts = torch.bincount(inverse, minlength=len(ids)).double()
    return ids, (sums / counts[:, None]).float()


def _cluster_subjects(feats: torch.Tensor, k: int, seed: int, within: torch.Tensor | None = None,
                      components: int | None = None):
    """k-means groups of subject features, each centred and divided by its spread: over
    subjects, or ``within`` (its typical spread inside one subject's images, so that what
    marks a person consistently weighs most); optionally on the first ``components``
    principal axes."""
    if len(feats) < k:
        raise DataError(f"grouping into {k} sub-datasets needs at least {k} training "
                        f"subjects, got {len(feats)}")
    z = feats.double()
    scale = z.std(dim=0) if within is None else within.double()
    z = (z - z.mean(dim=0)) / scale.clamp_min(1e-9)
    if components is not None:
        _, _, v = torch.linalg.svd(z, full_matrices=False)
        z = z @ v[:components].T
    centroids = kmeans(z.float(), k, seed=seed, restarts=KMEANS_RESTARTS)
    return torch.cdist(z.float(), centroids).argmin(dim=1)


def colour_groups(data, k: int, seed: int, batch_size: int = 256):
    """(sorted subject ids, group of each) from the subjects' mean colour statistics, each
    bin scaled by its spread within a subject's images (see the module docstring)."""
    hist = torch.cat([colour_statistics(x) for x, _ in
                      data.load(ordered_batches(len(data), batch_size))])
    ids, means = subject_means(hist, data.labels.subject)
    _, squares = subject_means(hist.double() ** 2, data.labels.subject)
    within = (squares.double() - means.double() ** 2).clamp_min(0).mean(dim=0).sqrt()
    return ids, _cluster_subjects(means, k, seed, within=within, components=k)


def expert_predictions(model, data, device, batch_size: int = 256) -> torch.Tensor:
    """Eval-mode (pitch, yaw) of every sample of ``data`` through every expert: (N, K, 2)."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = torch.cat([model.expert_predictions(x.to(device)).float().cpu()
                         for x, _ in data.load(ordered_batches(len(data), batch_size))])
    model.train(was_training)
    return out


def subject_expert_errors(model, data, device, batch_size: int = 256):
    """(sorted subject ids, (S, K) mean angular error of each subject through each expert)."""
    pred = expert_predictions(model, data, device, batch_size)
    n, k, _ = pred.shape
    truth = data.labels.gaze[:, None, :].expand(n, k, 2).reshape(-1, 2)
    errors = angular_errors(pred.reshape(-1, 2), truth).reshape(n, k)
    return subject_means(errors, data.labels.subject)


def match_experts(reference, model, data, device, batch_size: int = 256) -> torch.Tensor:
    """For each expert j of ``reference``, the expert of ``model`` that behaves like it:
    the assignment (Hungarian) that minimises the mean angular distance between the two
    experts' predictions on ``data``. Fold models are trained on different subjects, so
    the same group may sit on differently numbered experts' behaviour only by its label;
    without this the folds' labels can swap meaning every iteration."""
    a = expert_predictions(reference, data, device, batch_size)
    b = expert_predictions(model, data, device, batch_size)
    k = a.shape[1]
    cost = torch.zeros(k, k, dtype=torch.float64)
    for j in range(k):
        for m in range(k):
            cost[j, m] = angular_errors(a[:, j], b[:, m]).mean()
    rows, cols = linear_sum_assignment(cost.numpy())
    return torch.as_tensor(cols[np.argsort(rows)], dtype=torch.long)


def subject_folds(data, folds: int, seed: int) -> list[tuple]:
    """[(the subjects outside fold f, the subjects in fold f)] for f < folds."""
    if folds < 2:
        raise ConfigError(f"cross-fitting needs at least 2 folds, got {folds}")
    parts = subject_split(data.labels.subject.numpy(), (1.0 / folds,) * folds, seed)
    out = []
    for f in range(folds):
        rest = np.sort(np.concatenate([p for j, p in enumerate(parts) if j != f]))
        out.append((data.subset(rest), data.subset(parts[f])))
    return out


def cluster_agreement(ids: torch.Tensor, groups: torch.Tensor, data) -> float | None:
    """NMI between the subjects' groups and their true appearance clusters (None where
    the data do not know them); one vote per subject."""
    cluster = data.labels.cluster
    if not bool((cluster >= 0).all()):
        return None
    truth = torch.stack([cluster[data.labels.subject == s][0] for s in ids])
    return float(normalized_mutual_info_score(truth.numpy(), groups.numpy()))


@dataclass
class Grouping:
    """The groups of the training subjects and how they were found."""

    ids: torch.Tensor
    groups: torch.Tensor
    history: list[dict] = field(default_factory=list)

    def sizes(self, k: int) -> list[int]:
        return torch.bincount(self.groups, minlength=k).tolist()

    def record(self) -> dict:
        return {"subjects": self.ids.tolist(), "groups": self.groups.tolist(),
                "history": self.history}


# fit(kind, iteration, fold, train, held_out, grouping or None) -> a trained model;
# kind "baseline" (the residual start) or "experts" (experts trained on the groups)
FitFold = Callable[[str, int, int, object, object, "Grouping | None"], object]


def residual_start(folds: list[tuple], k: int, seed: int, fit: FitFold, device) -> Grouping:
    """Groups from the held-out residual features of a baseline trained per fold."""
    ids, feats = [], []
    for f, (rest, held) in enumerate(folds):
        model = fit("baseline", 0, f, rest, held, None)
        pred = predict(model, held, device).gaze
        i, x = subject_residual_features(pred, held.labels.gaze, held.labels.subject)
        ids.append(i)
        feats.append(x)
    ids, feats = torch.cat(ids), torch.cat(feats)
    order = torch.argsort(ids)
    return Grouping(ids[order], _cluster_subjects(feats[order].float(), k, seed))


def crossfit_groups(data, k: int, *, folds: int, iterations: int, seed: int, fit: FitFold,
                    device, start: Grouping | None = None,
                    on_iteration: Callable[[dict], None] | None = None) -> Grouping:
    """Subject-level cross-fitting (see the module docstring); ``start`` None: the
    residual start."""
    if iterations < 1:
        raise ConfigError(f"cross-fitting needs at least 1 iteration, got {iterations}")
    parts = subject_folds(data, folds, seed)
    grouping = start if start is not None else residual_start(parts, k, seed, fit, device)
    history = [iteration_record(0, grouping, None, data, k)]
    if on_iteration:
        on_iteration(history[-1])
    probe = data.subset(np.random.default_rng([seed, 23]).permutation(len(data))[:512])
    for it in range(1, iterations + 1):
        ids, errors, reference = [], [], None
        for f, (rest, held) in enumerate(parts):
            model = fit("experts", it, f, rest, held, grouping)
            i, e = subject_expert_errors(model, held, device)
            if reference is None:
                reference = model
            else:  # name each expert as the first fold's expert that behaves like it
                e = e[:, match_experts(reference, model, probe, device)]
            ids.append(i)
            errors.append(e)
        ids, errors = torch.cat(ids), torch.cat(errors)
        order = torch.argsort(ids)
        if not torch.equal(ids[order], grouping.ids):
            raise DataError("cross-fitting: the folds do not cover the training subjects")
        new = Grouping(grouping.ids, errors[order].argmin(dim=1))
        history.append(iteration_record(it, new, grouping, data, k, errors[order]))
        if on_iteration:
            on_iteration(history[-1])
        moved = history[-1]["moved"]
        grouping = new
        if moved == 0:
            break
    grouping.history = history
    return grouping


def iteration_record(it: int, grouping: Grouping, before: Grouping | None, data, k: int,
                     errors: torch.Tensor | None = None) -> dict:
    """The metrics record of a grouping step: sizes, subjects moved, (cross-fitting) the
    mean held-out error through the chosen experts, NMI with true clusters if known."""
    entry = {"phase": "grouping", "iteration": it, "group_sizes": grouping.sizes(k),
             "moved": None if before is None else int((grouping.groups != before.groups).sum())}
    if errors is not None:  # mean held-out error through the subject's chosen expert
        entry["held_out_error_deg"] = float(errors.min(dim=1).values.mean())
    nmi = cluster_agreement(grouping.ids, grouping.groups, data)
    if nmi is not None:
        entry["group_cluster_nmi"] = nmi
    return entry

