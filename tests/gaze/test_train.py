import json
import math

import pytest
import torch

from genlab.core.errors import ConfigError, DataError
from genlab.gaze import train as train_mod
from genlab.gaze.protocol import (
    TASKS,
    hold_out_subjects,
    synthetic_task,
    take_share,
    task_domains,
    with_fraction,
)
from genlab.gaze.train import GazeSet, GazeTrainConfig, error_stats, router_stats, train_gaze

TINY = {
    "width": 4,
    "appearance_dim": 8,
    "gaze_feat_dim": 8,
    "epochs": 3,
    "batch_size": 32,
    "train_count": 96,
    "test_count": 32,
    "size": [16, 24],
}


@pytest.fixture(scope="module")
def tiny_task():
    return synthetic_task("broad-e", "narrow-m", train_count=96, test_count=32, size=(16, 24))


def test_task_is_subject_disjoint_and_target_unseen(tiny_task):
    tr, va, te = tiny_task.train, tiny_task.val, tiny_task.test
    s_tr, s_va, s_te = (set(x.subject.tolist()) for x in (tr, va, te))
    assert s_tr and s_va and not (s_tr & s_va) and not ((s_tr | s_va) & s_te)
    assert len(tr) + len(va) == 96 and len(te) == 32
    assert tr.images.shape[1:] == (3, 16, 24) and 0 <= tr.images.min() <= tr.images.max() <= 1
    assert task_domains("G->D") == ("broad-g", "narrow-d") and len(TASKS) == 4


def test_fraction_keeps_a_seeded_share(tiny_task):
    part = take_share(tiny_task.train, 0.1, seed=3)
    assert len(part) == round(0.1 * len(tiny_task.train))
    again = take_share(tiny_task.train, 0.1, seed=3)
    assert torch.equal(part.gaze, again.gaze)
    assert with_fraction(tiny_task, 1.0, 0).train is tiny_task.train
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ConfigError, match="fraction"):
            take_share(tiny_task.train, bad, 0)


def test_error_and_router_stats_hand_values():
    true = torch.zeros(3, 2)
    pred = torch.tensor([[0.0, math.radians(10)], [math.radians(-20), 0.0], [0.0, 0.0]])
    stats = error_stats(pred, true)
    assert math.isclose(stats["mean_deg"], 10.0, rel_tol=1e-4)
    assert math.isclose(stats["median_deg"], 10.0, rel_tol=1e-4)
    w = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
    r = router_stats(w, torch.tensor([5, 5, 5, 6]))
    assert r["top1_share"] == [0.5, 0.5]
    assert torch.allclose(torch.tensor(r["load"]), torch.tensor([0.6, 0.4]))
    assert math.isclose(r["subject_purity"], (2 / 3 + 1) / 2)  # subject 5: 2 of 3 on expert 0
    assert math.isclose(r["mean_max_weight"], (0.9 + 0.8 + 0.7 + 0.6) / 4, rel_tol=1e-6)


def test_bad_inputs_raise():
    with pytest.raises(DataError, match="empty"):
        GazeSet(torch.zeros(0, 3, 8, 8), torch.zeros(0, 2), torch.zeros(0, dtype=torch.long), "x")
    with pytest.raises(DataError, match=r"\(N, 3, H, W\)"):
        GazeSet(torch.zeros(2, 1, 8, 8), torch.zeros(2, 2), torch.zeros(2, dtype=torch.long), "x")
    for kw, word in (
        ({"experts": 0}, "experts"),
        ({"temperature": 0.0}, "temperature"),
        ({"fraction": 0.0}, "fraction"),
        ({"routing": "top2"}, "routing"),
    ):
        with pytest.raises(ConfigError, match=word):
            GazeTrainConfig(**kw).validate()
    with pytest.raises(ConfigError, match="different domains"):
        synthetic_task("broad-e", "broad-e", train_count=8, test_count=8)


def test_hold_out_subjects_partitions_by_subject():
    data = GazeSet(torch.rand(20, 3, 8, 8), torch.zeros(20, 2), torch.arange(20) % 5, "s")
    tr, va = hold_out_subjects(data, 0.4, seed=0)
    assert len(set(va.subject.tolist())) == 2 and len(tr) + len(va) == 20
    assert not set(tr.subject.tolist()) & set(va.subject.tolist())


def test_training_writes_run_folder_and_learns(tmp_path, tiny_task):
    cfg = GazeTrainConfig(model="moegaze", **TINY)
    _, summary = train_gaze(cfg, tiny_task, tmp_path / "run", progress_bar=False)
    for name in (
        "config.json",
        "metrics.jsonl",
        "checkpoint.pt",
        "summary.json",
        "loss_curves.png",
        "router_assignment.png",
        "gaze_arrows.png",
    ):
        assert (tmp_path / "run" / name).is_file(), name
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    assert [r["epoch"] for r in recs] == [0, 1, 2]
    assert {"train_gaze_l1", "train_balance", "train_appearance", "val_mean_deg"} <= set(recs[0])
    assert math.isfinite(summary["target_mean_deg"]) and summary["target_mean_deg"] > 0
    assert sum(summary["router"]["source"]["top1_share"]) == pytest.approx(1.0)


def test_interrupted_run_resumed_equals_uninterrupted(tmp_path, tiny_task, monkeypatch):
    cfg = GazeTrainConfig(model="moegaze", balance="rebalance", **TINY)
    full_model, full = train_gaze(cfg, tiny_task, tmp_path / "full", progress_bar=False)

    real_step, calls = train_mod.GazeTrainer.step, {"n": 0}

    def dying_step(self, x, y):  # killed in the middle of epoch 1 (3 steps per epoch)
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return real_step(self, x, y)

    monkeypatch.setattr(train_mod.GazeTrainer, "step", dying_step)
    with pytest.raises(KeyboardInterrupt):
        train_gaze(cfg, tiny_task, tmp_path / "part", progress_bar=False)
    monkeypatch.setattr(train_mod.GazeTrainer, "step", real_step)
    assert not (tmp_path / "part" / "summary.json").exists()
    resumed_model, resumed = train_gaze(
        cfg, tiny_task, tmp_path / "part", resume=True, progress_bar=False
    )
    for (k, a), b in zip(
        full_model.state_dict().items(), resumed_model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), k
    assert resumed["target_mean_deg"] == full["target_mean_deg"]
    lines = (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()
    metrics = [json.loads(x) for x in lines]
    assert [m["epoch"] for m in metrics] == [0, 1, 2]


def test_bench_plan_and_tables_hand_values():
    from genlab.gaze.bench import BenchConfig, bench_runs, tables

    cfg = BenchConfig(
        tasks=["E->M", "G->D"],
        seeds=2,
        ablation_experts=[1, 4],
        ablation_routings=["soft", "hard"],
        ablation_seeds=1,
    )
    runs = bench_runs(cfg)
    names = [n for n, _, _ in runs]
    assert len(names) == len(set(names))
    # 2 tasks x 2 seeds x 2 models x 2 fractions + K=1 + hard (K=4 soft is a main run)
    assert len(runs) == 16 + 2 + 2  # + temperatures 0.02 and 1.0
    assert all(c.source == "broad-e" for _, t, c in runs if t == "E->M")
    rows = []
    for _, task, c in runs:
        err = {"baseline": 10.0, "moegaze": 8.0}[c.model] + (1.0 if c.fraction < 1 else 0.0)
        err += 100.0 * (c.temperature != 0.1)  # temperature runs must stay out of other cells
        rows.append(
            {
                "task": task,
                "model": c.model,
                "experts": c.experts,
                "routing": c.routing,
                "temperature": c.temperature,
                "fraction": c.fraction,
                "seed": c.seed,
                "target_mean_deg": err + c.seed,
            }
        )
    t = tables(rows, cfg)
    assert t["main"][0]["baseline 100%"] == "10.50 ± 0.71"  # seeds 0, 1 -> 10, 11
    assert t["main"][0]["MoEGaze vs baseline"] == "+19.0%"  # (10.5 - 8.5) / 10.5
    assert t["average_improvement_pct"] == pytest.approx(100 * 2 / 10.5)
    assert t["temperature"][0]["target error (deg)"] == "108.00 ± 0.00"  # T=0.02, seed 0
    assert t["experts"][0]["K"] == 1 and t["experts"][0]["target error (deg)"] == "8.00 ± 0.00"
