import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from genlab.core.errors import ConfigError, DataError
from genlab.gaze.data.gazeset import GazeLabels, GazeSet
from genlab.gaze.data.splits import (
    hold_out_subjects,
    step_batches,
    take_share,
    take_subject_share,
)
from genlab.gaze.metrics import constant_summary, error_stats, router_stats
from genlab.gaze.protocol import (
    TASKS,
    WORLDS,
    SyntheticCache,
    load_task_data,
    task_domains,
)
from genlab.gaze.train import GazeTrainConfig, train_gaze, warmup_cosine
from tests.gaze.conftest import killed_then_resumed, torchvision_resnet18_state

TINY = {
    "width": 4,
    "appearance_dim": 8,
    "gaze_feat_dim": 8,
    "steps": 9,
    "eval_every": 3,
    "warmup_steps": 2,
    "batch_size": 32,
    "train_count": 96,
    "test_count": 32,
    "size": [16, 24],
}


@pytest.fixture(scope="module")
def tiny_task():
    cfg = GazeTrainConfig(source="app-e", targets=["app-m", "app-d"], **TINY)
    return load_task_data(cfg, SyntheticCache())


def test_task_is_subject_disjoint_and_targets_unseen(tiny_task):
    tr, va = tiny_task.train, tiny_task.val
    s_tr, s_va = (set(x.subject.tolist()) for x in (tr, va))
    s_te = set().union(*(set(t.subject.tolist()) for t in tiny_task.targets.values()))
    assert s_tr and s_va and not (s_tr & s_va) and not ((s_tr | s_va) & s_te)
    assert len(tr) + len(va) == 96 and [len(t) for t in tiny_task.targets.values()] == [32, 32]
    assert tr.images.shape[1:] == (3, 16, 24) and tr.images.dtype == torch.uint8
    assert set(tr.cluster.tolist()) <= {0, 1, 2, 3} and len(set(tr.cluster.tolist())) > 1
    assert task_domains("G->D") == ("broad-g", "narrow-d") and len(TASKS) == 4
    assert task_domains("E->M", "appearance") == ("app-e", "app-m")
    assert set(WORLDS) == {"realistic", "appearance", "control", "anatomy"}
    assert task_domains("G->D", "anatomy") == ("ana-g", "ana-d")


def test_fraction_keeps_a_seeded_share(tiny_task):
    part = take_share(tiny_task.train, 0.1, seed=3)
    assert len(part) == round(0.1 * len(tiny_task.train))
    again = take_share(tiny_task.train, 0.1, seed=3)
    assert torch.equal(part.gaze, again.gaze)
    assert take_share(tiny_task.train, 1.0, 0) is tiny_task.train
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ConfigError, match="fraction"):
            take_share(tiny_task.train, bad, 0)


def test_subject_fraction_keeps_every_image_of_a_seeded_share_of_the_subjects(tiny_task):
    train = tiny_task.train
    subjects = train.subject.numpy()
    ids = sorted(set(subjects.tolist()))
    part = take_subject_share(train, 0.25, seed=3)
    kept = sorted(set(part.subject.tolist()))
    assert len(kept) == round(0.25 * len(ids)) and set(kept) <= set(ids)
    # all of each kept subject's images, and no other (a brute-force count)
    assert len(part) == sum(int((subjects == s).sum()) for s in kept)
    again = take_subject_share(train, 0.25, seed=3)
    assert torch.equal(part.gaze, again.gaze)
    assert any(sorted(set(take_subject_share(train, 0.25, seed=s).subject.tolist())) != kept
               for s in range(4, 8))
    assert len(set(take_subject_share(train, 0.01, 0).subject.tolist())) == 1  # at least one
    assert take_subject_share(train, 1.0, 0) is train
    # through the run's config: subjects first, then --fraction of their images
    cfg = GazeTrainConfig(source="app-e", targets=["app-m"], subject_fraction=0.25, seed=3,
                          **TINY)
    data = load_task_data(cfg, SyntheticCache())
    assert sorted(set(data.train.subject.tolist())) == kept and len(data.train) == len(part)
    half = load_task_data(replace(cfg, fraction=0.5), SyntheticCache()).train
    assert set(half.subject.tolist()) <= set(kept) and len(half) == round(0.5 * len(part))
    for bad in (0.0, 1.5):
        with pytest.raises(ConfigError, match="subject_fraction"):
            GazeTrainConfig(subject_fraction=bad).validate()


def test_step_batches_depend_only_on_seed_and_step():
    whole = list(step_batches(10, 4, seed=1, start=0, stop=7))
    assert all(len(b) == 4 for b in whole)  # the incomplete batch of a pass is dropped
    # steps 0,1 are pass 0, steps 2,3 pass 1, ...: each pass is a fresh permutation
    for p in range(3):
        a, b = whole[2 * p], whole[2 * p + 1]
        assert len(set(a) | set(b)) == 8
    assert [b.tolist() for b in step_batches(10, 4, 1, 3, 7)] == [b.tolist() for b in whole[3:]]
    assert [b.tolist() for b in step_batches(10, 4, 2, 0, 2)] != [b.tolist() for b in whole[:2]]
    assert [len(b) for b in step_batches(3, 64, 0, 0, 2)] == [3, 3]  # smaller than a batch


def test_warmup_cosine_schedule_values():
    f = warmup_cosine(100, 10)
    assert math.isclose(f(0), 0.1 * 0.5 * (1 + math.cos(0.0)))
    assert math.isclose(f(9), 0.5 * (1 + math.cos(math.pi * 9 / 100)))
    assert math.isclose(f(50), 0.5) and f(99) < 0.001


def test_error_router_and_constant_stats_hand_values():
    true = torch.zeros(3, 2)
    pred = torch.tensor([[0.0, math.radians(10)], [math.radians(-20), 0.0], [0.0, 0.0]])
    stats = error_stats(pred, true)
    assert math.isclose(stats["mean_deg"], 10.0, rel_tol=1e-6)
    assert math.isclose(stats["median_deg"], 10.0, rel_tol=1e-6)
    w = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
    r = router_stats(w, torch.tensor([5, 5, 5, 6]), torch.tensor([0, 0, 1, 1]))
    assert r["top1_share"] == [0.5, 0.5]
    assert torch.allclose(torch.tensor(r["load"]), torch.tensor([0.6, 0.4]))
    assert math.isclose(r["subject_purity"], (2 / 3 + 1) / 2)  # subject 5: 2 of 3 on expert 0
    assert math.isclose(r["mean_max_weight"], (0.9 + 0.8 + 0.7 + 0.6) / 4, rel_tol=1e-6)
    assert r["cluster_purity"] == 1.0 and math.isclose(r["expert_cluster_nmi"], 1.0)
    labels = GazeLabels.build(np.radians([[0.0, 10.0], [0.0, -10.0], [20.0, 0.0]]), [1, 1, 2])
    const = constant_summary(torch.zeros(2), labels)
    assert math.isclose(const["mean_deg"], 40 / 3, rel_tol=1e-6)
    assert const["per_subject"] == {"1": [pytest.approx(10.0), 2], "2": [pytest.approx(20.0), 1]}


def test_bad_inputs_raise():
    labels = GazeLabels.build(np.zeros((2, 2)), [0, 1])
    with pytest.raises(DataError, match="empty"):
        GazeSet(torch.zeros(0, 3, 8, 8, dtype=torch.uint8), labels.index([]), "x")
    with pytest.raises(DataError, match=r"\(N, 3, H, W\)"):
        GazeSet(torch.zeros(2, 1, 8, 8, dtype=torch.uint8), labels, "x")
    with pytest.raises(DataError, match="labels"):
        GazeSet(torch.zeros(3, 3, 8, 8, dtype=torch.uint8), labels, "x")
    for kw, word in (
        ({"experts": 0}, "experts"),
        ({"temperature": 0.0}, "temperature"),
        ({"fraction": 0.0}, "fraction"),
        ({"routing": "top2"}, "routing"),
        ({"steps": 0}, "steps"),
        ({"targets": []}, "target"),
        ({"stem": "huge"}, "stem"),
    ):
        with pytest.raises(ConfigError, match=word):
            GazeTrainConfig(**kw).validate()
    with pytest.raises(ConfigError, match="domain"):
        load_task_data(GazeTrainConfig(source="nowhere", **TINY))
    with pytest.raises(ConfigError, match="target_fold"):
        load_task_data(GazeTrainConfig(target_fold=0, **TINY))


def test_hold_out_subjects_partitions_by_subject():
    labels = GazeLabels.build(np.zeros((20, 2)), np.arange(20) % 5)
    data = GazeSet(torch.zeros(20, 3, 8, 8, dtype=torch.uint8), labels, "s")
    tr, va = hold_out_subjects(data, 0.4, seed=0)
    assert len(set(va.subject.tolist())) == 2 and len(tr) + len(va) == 20
    assert not set(tr.subject.tolist()) & set(va.subject.tolist())


def test_training_writes_run_folder_with_references(tmp_path, tiny_task):
    cfg = GazeTrainConfig(model="moegaze", source="app-e", targets=["app-m", "app-d"], **TINY)
    _, summary = train_gaze(cfg, tiny_task, tmp_path / "run", progress_bar=False)
    for name in ("config.json", "metrics.jsonl", "checkpoint.pt", "summary.json",
                 "loss_curves.png", "router_assignment.png", "gaze_arrows.png"):
        assert (tmp_path / "run" / name).is_file(), name
    recs = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [3, 6, 9]
    assert {"train_gaze_l1", "train_balance", "train_appearance", "val_mean_deg"} <= set(recs[0])
    assert set(summary["targets"]) == {"app-m", "app-d"}
    mean = tiny_task.train.gaze.double().mean(0).float()
    for name, res in summary["targets"].items():
        labels = tiny_task.targets[name].labels
        assert res["constant"]["mean_deg"] == pytest.approx(
            constant_summary(mean, labels)["mean_deg"])
        assert sum(n for _, n in res["per_subject"].values()) == 32
        assert set(res["per_cluster"]) <= {"0", "1", "2", "3"}
        assert "expert_cluster_nmi" in res["router"]
    assert summary["constant_target_mean_deg"] == summary["targets"]["app-m"]["constant"][
        "mean_deg"]
    assert summary["constant_val_mean_deg"] == pytest.approx(
        constant_summary(mean, tiny_task.val.labels)["mean_deg"])
    assert math.isfinite(summary["target_mean_deg"]) and summary["target_mean_deg"] > 0


def test_training_learns_well_below_the_constant_predictor(tmp_path):
    cfg = GazeTrainConfig(model="baseline", source="broad-e", targets=["narrow-m"], width=4,
                          steps=150, eval_every=150, warmup_steps=10, batch_size=32,
                          train_count=600, test_count=64, size=[24, 36])
    data = load_task_data(cfg, SyntheticCache())
    _, s = train_gaze(cfg, data, tmp_path / "learn", progress_bar=False, plots=False)
    assert s["val_mean_deg"] < 0.6 * s["constant_val_mean_deg"], s["val_mean_deg"]


def test_interrupted_run_resumed_equals_uninterrupted(tmp_path, tiny_task, monkeypatch):
    cfg = GazeTrainConfig(model="moegaze", balance="rebalance", source="app-e",
                          targets=["app-m", "app-d"], reinit_router_at=0.5, **TINY)
    full_model, full = train_gaze(cfg, tiny_task, tmp_path / "full", progress_bar=False)
    refits = [json.loads(x).get("router_prepared") for x in
              (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert refits == [None, True, None]  # step 5 of 9 falls in the second chunk

    # killed at step 5, in the middle of the second chunk (steps 4-6)
    resumed_model, resumed = killed_then_resumed(monkeypatch, cfg, tiny_task, tmp_path / "part")
    for (k, a), b in zip(
        full_model.state_dict().items(), resumed_model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), k
    assert resumed["target_mean_deg"] == full["target_mean_deg"]
    metrics = [json.loads(x) for x in (tmp_path / "part" / "metrics.jsonl").read_text()
               .splitlines()]
    assert [m["step"] for m in metrics] == [3, 6, 9]


def test_pretrained_backbone_is_loaded_before_training(tmp_path, tiny_task):
    torch.save(torchvision_resnet18_state(width=8), tmp_path / "r18.pth")
    cfg = GazeTrainConfig(model="baseline", source="app-e", targets=["app-m", "app-d"],
                          **{**TINY, "width": 8, "steps": 1, "eval_every": 1},
                          stem="imagenet", input_norm="imagenet",
                          pretrained=str(tmp_path / "r18.pth"), lr=1e-12)
    model, _ = train_gaze(cfg, tiny_task, tmp_path / "pre", progress_bar=False, plots=False)
    ref = torchvision_resnet18_state(width=8)["layer1.0.conv1.weight"]
    assert torch.allclose(model.backbone.layer1[0].conv1.weight, ref, atol=1e-6)


def test_genlab_load_rebuilds_the_trained_model(tiny_task, tmp_path):
    import genlab
    from genlab.core.errors import CheckpointError

    cfg = GazeTrainConfig(model="moegaze", source="app-e", targets=["app-m", "app-d"],
                          **{**TINY, "steps": 3})
    model, _ = train_gaze(cfg, tiny_task, tmp_path / "run", progress_bar=False, plots=False)
    loaded = genlab.load(tmp_path / "run")
    assert loaded.kind == "gaze train" and loaded.config["model"] == "moegaze"
    x = tiny_task.val.preview(8)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(x), model(x), rtol=0, atol=0)
    assert genlab.load(tmp_path / "run", kind="gaze train").summary["steps"] == 3
    with pytest.raises(CheckpointError, match="a nas train run is needed"):
        genlab.load(tmp_path / "run", kind="nas train")


def test_a_run_no_better_than_the_constant_predictor_says_so(tmp_path, tiny_task, capsys):
    cfg = GazeTrainConfig(source="app-e", targets=["app-m", "app-d"],
                          **{**TINY, "steps": 3, "eval_every": 3, "lr": 1e-12})
    _, summary = train_gaze(cfg, tiny_task, tmp_path / "r", plots=False)
    assert summary["val_mean_deg"] >= summary["constant_val_mean_deg"]  # it cannot learn
    assert "not below the constant predictor" in summary["warning"]
    err = capsys.readouterr().err
    assert err.count("genlab: warning: validation error") == 1
    stored = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert stored["warning"] == summary["warning"]
    _, trained = train_gaze(GazeTrainConfig(source="app-e", targets=["app-m", "app-d"], **TINY),
                            tiny_task, tmp_path / "t", plots=False)
    assert ("warning" in trained) == (trained["val_mean_deg"] >= trained["constant_val_mean_deg"])
