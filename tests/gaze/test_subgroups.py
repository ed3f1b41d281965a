"""Appearance sub-datasets: colour statistics, colour grouping and subject-level
cross-fitting on toy worlds whose right grouping is known by construction, MoEGaze's
training on groups, and a run resumed mid-way through its grouping phase."""

import json

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from genlab.core.errors import ConfigError, DataError
from genlab.gaze.data.gazeset import GazeLabels, GazeSet
from genlab.gaze.metrics import angular_errors
from genlab.gaze.models import MoEGaze, subgroups
from genlab.gaze.models.residual_groups import lookup_groups
from genlab.gaze.models.subgroups import (
    Grouping,
    colour_groups,
    colour_statistics,
    crossfit_groups,
    subject_expert_errors,
    subject_means,
)
from genlab.gaze.protocol import SyntheticCache, load_task_data
from genlab.gaze.train import GazeTrainConfig, train_gaze
from tests.gaze.test_train import TINY


def test_colour_statistics_by_hand():
    # 2x2 image: pure red, pure green, grey and black (counted as grey), 4 bins
    x = torch.tensor([[[1.0, 0.0], [0.5, 0.0]],
                      [[0.0, 1.0], [0.5, 0.0]],
                      [[0.0, 0.0], [0.5, 0.0]]])[None]
    h = colour_statistics(x, bins=4).reshape(4, 4)  # [r bin, g bin]; centres 1/8, 3/8, ...
    want = torch.zeros(4, 4)
    want[3, 0] = 0.25  # red: r = 1 beyond the last centre, g = 0 before the first
    want[0, 3] = 0.25  # green
    # grey and black: r = g = 1/3 lies 5/6 of the way from centre 0 (1/8) to centre 1 (3/8)
    a, b = 1 / 6, 5 / 6
    want[0, 0], want[0, 1], want[1, 0], want[1, 1] = 0.5 * a * a, 0.5 * a * b, 0.5 * b * a, \
        0.5 * b * b
    assert torch.allclose(h, want, atol=1e-6)
    # intensity does not matter, position does not matter
    img = torch.rand(1, 3, 6, 5)
    assert torch.allclose(colour_statistics(img), colour_statistics(0.5 * img))
    assert torch.allclose(colour_statistics(img), colour_statistics(img.flip(2, 3)))
    with pytest.raises(DataError, match="N, 3, H, W"):
        colour_statistics(torch.rand(2, 1, 4, 4))


def _colour_world(per_group=5, images=6, seed=0):
    """Subjects of three tints (reddish, greenish, bluish) under random light and noise."""
    rng = np.random.default_rng(seed)
    tints = np.array([[0.8, 0.3, 0.3], [0.3, 0.8, 0.3], [0.3, 0.3, 0.8]])
    imgs, subject, truth = [], [], []
    for g, tint in enumerate(tints):
        for s in range(per_group):
            own = tint + rng.normal(0, 0.05, 3)
            for _ in range(images):
                light = rng.uniform(0.6, 1.0)
                im = np.clip(light * own[:, None, None] + rng.normal(0, 0.01, (3, 8, 12)), 0, 1)
                imgs.append((im * 255).astype(np.uint8))
                subject.append(10 * g + s)
                truth.append(g)
    gaze = rng.normal(0, 0.2, (len(imgs), 2))
    data = GazeSet(torch.from_numpy(np.stack(imgs)),
                   GazeLabels.build(gaze, subject, truth), "tints")
    return data


def test_colour_groups_recover_the_tints():
    data = _colour_world()
    ids, groups = colour_groups(data, 3, seed=0)
    truth = (ids // 10).numpy()
    assert adjusted_rand_score(truth, groups.numpy()) == 1.0
    assert subgroups.cluster_agreement(ids, groups, data) == pytest.approx(1.0)


class _OffsetExperts:
    """A stand-in for a fold model: expert k answers the mean gaze offset of the training
    subjects the grouping gave it (so its error on a held-out subject is that subject's
    distance from the group's offset); gaze labels are label = base + subject offset."""

    def __init__(self, rest, grouping, k):
        self.training = False
        sub = rest.labels.subject
        gid = lookup_groups(grouping.ids, grouping.groups, sub)
        self.offsets = torch.zeros(k, 2)
        for j in range(k):
            if bool((gid == j).any()):
                self.offsets[j] = rest.labels.gaze[gid == j].mean(dim=0)

    def eval(self):
        return self

    def train(self, mode=True):
        return self

    def expert_predictions(self, x):
        return self.offsets[None].expand(len(x), -1, -1)


def _offset_world(seed=0):
    """Three groups of subjects, each group with its own gaze offset (small spread)."""
    rng = np.random.default_rng(seed)
    centres = np.radians([[0.0, 0.0], [8.0, -6.0], [-6.0, 9.0]])
    gaze, subject, truth = [], [], []
    for g, c in enumerate(centres):
        for s in range(8):
            own = c + np.radians(rng.normal(0, 0.5, 2))
            for _ in range(5):
                gaze.append(own + np.radians(rng.normal(0, 0.3, 2)))
                subject.append(100 + 10 * g + s)
                truth.append(g)
    images = torch.zeros(len(gaze), 3, 8, 8, dtype=torch.uint8)
    return GazeSet(images, GazeLabels.build(np.array(gaze), subject, truth), "offsets")


def test_crossfitting_converges_to_the_groups_by_construction():
    data = _offset_world()
    ids = torch.unique(data.labels.subject)
    truth = ((ids - 100) // 10)
    # a poor start: a third of the subjects in the wrong group
    start = truth.clone()
    start[::3] = (start[::3] + 1) % 3
    calls = []

    def fit(kind, it, fold, rest, held, grouping):
        calls.append((kind, it, fold))
        assert not set(rest.labels.subject.tolist()) & set(held.labels.subject.tolist())
        return _OffsetExperts(rest, grouping, 3)

    found = crossfit_groups(data, 3, folds=2, iterations=5, seed=0, fit=fit, device="cpu",
                            start=Grouping(ids, start))
    assert adjusted_rand_score(truth.numpy(), found.groups.numpy()) == 1.0
    hist = found.history
    assert hist[0]["moved"] is None and hist[-1]["moved"] == 0  # stopped when stable
    assert hist[0]["group_cluster_nmi"] < 1.0 and hist[-1]["group_cluster_nmi"] == 1.0
    assert calls[:2] == [("experts", 1, 0), ("experts", 1, 1)]
    assert len(calls) == 2 * (len(hist) - 1)


def test_fold_experts_are_matched_by_behaviour():
    data = _offset_world()
    ids = torch.unique(data.labels.subject)
    grouping = Grouping(ids, (ids - 100) // 10)
    a = _OffsetExperts(data, grouping, 3)
    b = _OffsetExperts(data, grouping, 3)
    b.offsets = b.offsets[torch.tensor([2, 0, 1])] + 0.001  # b's expert 0 is a's expert 2
    perm = subgroups.match_experts(a, b, data, "cpu")
    assert perm.tolist() == [1, 2, 0]
    assert torch.allclose(b.offsets[perm], a.offsets + 0.001)


def test_subject_expert_errors_match_a_loop():
    model = MoEGaze(width=4, appearance_dim=8, gaze_feat_dim=8, num_experts=3).eval()
    data = _colour_world(per_group=2, images=3)
    ids, errs = subject_expert_errors(model, data, "cpu", batch_size=5)
    x = data.images.float() / 255
    with torch.no_grad():
        feats = model.backbone(x)
    for k in range(3):
        with torch.no_grad():
            pred = model.head(model.experts.forward_one(feats, k))
        e = angular_errors(pred, data.labels.gaze)
        for i, s in enumerate(ids):
            want = e[data.labels.subject == s].mean()
            assert errs[i, k] == pytest.approx(float(want), rel=1e-5)
    assert torch.equal(subject_means(torch.ones(4, 1), torch.tensor([3, 1, 3, 1]))[0],
                       torch.tensor([1, 3]))


def test_group_training_sends_images_to_their_groups_expert():
    model = MoEGaze(width=4, appearance_dim=8, gaze_feat_dim=8, num_experts=3,
                    router_input="encoder", group_train=True)
    data = _colour_world(per_group=2, images=3)
    x, labels = next(data.load([np.arange(len(data))]))
    model.train()
    with pytest.raises(ConfigError, match="set_groups"):
        model.outputs(x, labels)
    ids = torch.unique(labels.subject)
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    model.set_groups(ids, groups)
    model.prepare(data, "cpu", 0)
    out = model.outputs(x, labels)
    want = torch.nn.functional.one_hot(groups[torch.searchsorted(ids, labels.subject)], 3)
    assert torch.equal(out.router_weights, want.float())
    assert "balance" not in out.losses and "appearance" in out.losses
    model.eval()
    soft = model.outputs(x, labels).router_weights
    assert torch.allclose(soft.sum(dim=1), torch.ones(len(x))) and soft.min() < 1
    with pytest.raises(DataError, match="sorted"):
        model.set_groups(torch.tensor([2, 1]), torch.tensor([0, 1]))
    with pytest.raises(DataError, match="groups must lie"):
        model.set_groups(torch.tensor([1, 2]), torch.tensor([0, 3]))
    with pytest.raises(ConfigError, match="routing 'soft'"):
        MoEGaze(routing="oracle", group_train=True)


@pytest.fixture(scope="module")
def tiny_app():
    cfg = GazeTrainConfig(source="app-e", targets=["app-e"], **{**TINY, "train_count": 160})
    return load_task_data(cfg, SyntheticCache())


def _crossfit_cfg(**kw):
    return GazeTrainConfig(model="moegaze", source="app-e", targets=["app-e"], experts=2,
                           grouping="crossfit", group_iterations=2, router_input="encoder",
                           **{**TINY, "train_count": 160}, **kw)


def test_crossfit_run_killed_in_its_grouping_phase_resumes_equal(tmp_path, tiny_app,
                                                                 monkeypatch):
    cfg = _crossfit_cfg()
    full_model, full = train_gaze(cfg, tiny_app, tmp_path / "full", progress_bar=False)
    recs = [json.loads(x) for x in (tmp_path / "full" / "metrics.jsonl").read_text()
            .splitlines()]
    grouping = [r for r in recs if r.get("phase") == "grouping"]
    assert [r["iteration"] for r in grouping] == list(range(len(grouping)))
    saved = json.loads((tmp_path / "full" / "grouping.json").read_text())
    assert sorted(saved["subjects"]) == torch.unique(tiny_app.train.labels.subject).tolist()
    assert torch.equal(full_model.group_of_id, torch.tensor(saved["groups"]))
    # killed after the first expert fold model of iteration 1 was trained
    real = subgroups.subject_expert_errors
    state = {"calls": 0}

    def dies_once(*a, **k):
        state["calls"] += 1
        if state["calls"] == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(subgroups, "subject_expert_errors", dies_once)
    with pytest.raises(KeyboardInterrupt):
        train_gaze(cfg, tiny_app, tmp_path / "part", progress_bar=False)
    assert not (tmp_path / "part" / "grouping.json").exists()
    assert (tmp_path / "part" / "grouping" / "experts_it1_f1" / "summary.json").is_file()
    part_model, part = train_gaze(cfg, tiny_app, tmp_path / "part", progress_bar=False,
                                  resume=True)
    for (k, a), b in zip(full_model.state_dict().items(), part_model.state_dict().values(),
                         strict=True):
        assert torch.equal(a, b), k
    assert part["val_mean_deg"] == full["val_mean_deg"]
    assert part["router"]["source"] == full["router"]["source"]


def test_grouping_options_are_checked_before_the_folder(tmp_path):
    for bad, match in (({"grouping": "crossfit", "model": "baseline"}, "--model moegaze"),
                       ({"grouping": "kmeans"}, "grouping"),
                       ({"grouping": "crossfit", "group_folds": 1}, "group_folds"),
                       ({"router_input": "pixels"}, "router_input")):
        cfg = GazeTrainConfig(**{**TINY, **bad})
        with pytest.raises(ConfigError, match=match):
            train_gaze(cfg, None, tmp_path / "r")
        assert not (tmp_path / "r").exists()
    with pytest.raises(ConfigError, match="given"):
        train_gaze(GazeTrainConfig(**{**TINY, "grouping": "given"}), None, tmp_path / "r")
