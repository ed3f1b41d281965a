import json

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from genlab.core.errors import DataError
from genlab.gaze.models import MoEGaze
from genlab.gaze.models.residual_groups import (
    group_subjects,
    lookup_groups,
    subject_residual_features,
)
from genlab.gaze.protocol import SyntheticCache, load_task_data
from genlab.gaze.train import GazeTrainConfig, train_gaze
from tests.gaze.conftest import killed_then_resumed
from tests.gaze.test_train import TINY


@pytest.fixture(scope="module")
def tiny_task():
    cfg = GazeTrainConfig(source="app-e", targets=["app-m"], **TINY)
    return load_task_data(cfg, SyntheticCache())


def _residual_world(offsets, gains, per_group=6, images=30, seed=0):
    """Labels and predictions whose residual is the group's offset plus (gain - 1) times
    the centred label, in degrees; subject ids 100, 101, ..."""
    rng = np.random.default_rng(seed)
    true, pred, subject, group = [], [], [], []
    for g, (off, gain) in enumerate(zip(offsets, gains, strict=True)):
        for s in range(per_group):
            sid = 100 + g * per_group + s
            lab = rng.normal(0.0, 15.0, (images, 2))
            res = np.asarray(off) + (gain - 1.0) * (lab - lab.mean(axis=0))
            res += rng.normal(0.0, 0.3, res.shape)
            true.append(lab)
            pred.append(lab - res)
            subject += [sid] * images
            group += [g] * images
    rad = lambda a: torch.as_tensor(np.radians(np.concatenate(a)))  # noqa: E731
    return rad(pred), rad(true), torch.tensor(subject), np.array(group)


def test_residual_features_recover_offset_and_gain_by_hand():
    lab = torch.tensor([[-10.0, 0.0], [0.0, 20.0], [10.0, 40.0]])
    res = torch.tensor([3.0, -5.0]) + torch.tensor([0.2, -0.5]) * (lab - lab.mean(dim=0))
    pred, true = torch.deg2rad(lab - res), torch.deg2rad(lab)
    ids, feats = subject_residual_features(pred, true, torch.tensor([7, 7, 7]))
    assert ids.tolist() == [7]
    assert torch.allclose(feats[0], torch.tensor([3.0, -5.0, 0.2, -0.5], dtype=torch.float64),
                          atol=1e-9)


def test_groups_recover_subjects_that_share_a_mapping():
    pred, true, subject, group = _residual_world(
        offsets=[(0, 0), (3, -5), (-3, 5), (4, 7)], gains=[1.0, 0.8, 1.2, 1.35])
    ids, groups = group_subjects(pred, true, subject, k=4, seed=0)
    per_sample = lookup_groups(ids, groups, subject)
    assert adjusted_rand_score(group, per_sample.numpy()) == 1.0


def test_grouping_bad_inputs():
    pred, true, subject, _ = _residual_world([(0, 0)], [1.0], per_group=2)
    with pytest.raises(DataError, match="at least 4 training subjects"):
        group_subjects(pred, true, subject, k=4)
    with pytest.raises(DataError, match="N subject ids"):
        group_subjects(pred, true, subject[:-1], k=1)
    ids, groups = group_subjects(pred, true, subject, k=2)
    with pytest.raises(DataError, match="know no subject"):
        lookup_groups(ids, groups, torch.tensor([999]))


def test_router_is_trained_against_the_groups_after_regroup(tiny_task):
    model = MoEGaze(width=4, appearance_dim=8, gaze_feat_dim=8)
    model.prepare(tiny_task.train, "cpu", 0)
    x, labels = next(tiny_task.train.load([np.arange(16)]))
    assert "appearance" in model.outputs(x, labels).losses  # subject-contrastive before
    stats = model.regroup(tiny_task.train, "cpu", 0)
    assert sum(stats["group_sizes"]) == len(torch.unique(tiny_task.train.labels.subject))
    assert 0.0 <= stats["group_cluster_nmi"] <= 1.0
    group = lookup_groups(model.group_ids, model.group_of_id, labels.subject)
    sims = model.embed(x) @ torch.nn.functional.normalize(model.prototypes, dim=1).T
    want = torch.nn.functional.cross_entropy(sims / model.temperature, group)
    model.train()
    assert torch.allclose(model.outputs(x, labels).losses["appearance"], want)


def test_regrouped_run_resumed_equals_uninterrupted(tmp_path, tiny_task, monkeypatch):
    cfg = GazeTrainConfig(model="moegaze", source="app-e", targets=["app-m"],
                          group_router_at=0.3, **TINY)
    full_model, full = train_gaze(cfg, tiny_task, tmp_path / "full", progress_bar=False)
    recs = [json.loads(x) for x in (tmp_path / "full" / "metrics.jsonl").read_text()
            .splitlines()]
    assert ["group_sizes" in r for r in recs] == [True, False, False]  # step 3 of 9
    # killed at step 5, in the second chunk, after the regrouping
    resumed_model, resumed = killed_then_resumed(monkeypatch, cfg, tiny_task, tmp_path / "part")
    assert len(resumed_model.group_ids) > 0
    for (k, a), b in zip(full_model.state_dict().items(),
                         resumed_model.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    assert resumed["val_mean_deg"] == full["val_mean_deg"]


def test_checkpoints_without_residual_groups_still_load():
    old = MoEGaze(width=4, appearance_dim=8, gaze_feat_dim=8).state_dict()
    del old["group_ids"], old["group_of_id"]
    model = MoEGaze(width=4, appearance_dim=8, gaze_feat_dim=8)
    model.load_state_dict(old)  # strict
    assert len(model.group_ids) == 0
