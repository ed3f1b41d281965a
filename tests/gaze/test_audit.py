"""`genlab gaze audit`: the subject subsets, the per-cluster bias, a tiny audit that resumes."""

import json
import math

import numpy as np
import pytest
import torch

from genlab.cli import main
from genlab.core.errors import ConfigError
from genlab.gaze.config import GazeTrainConfig
from genlab.gaze.protocol import load_task_data
from genlab.gaze.studies.audit import AuditConfig, audit_plan, signed_means, subject_subsets

# subject -> cluster; 4 and 5 are held out
CLUSTER_OF = {1: 0, 2: 0, 3: 1, 4: 0, 5: 1, 6: 2, 7: 0, 8: 1, 9: 2, 10: 1}
HELD_OUT = [4, 5]
TRAIN = {1, 2, 3, 6, 7, 8, 9, 10}


def test_subsets_similar_is_the_clusters_training_subjects_random_is_seeded_same_size():
    draws = []
    for seed in range(8):
        sub = subject_subsets(CLUSTER_OF, HELD_OUT, 0, seed)
        assert sub["similar"] == [1, 2, 7]  # cluster 0 without the held-out subject 4
        rnd = sub["random"]
        assert len(rnd) == 3 and len(set(rnd)) == 3 and rnd == sorted(rnd)
        assert set(rnd) <= TRAIN  # never a held-out subject
        assert subject_subsets(CLUSTER_OF, HELD_OUT, 0, seed)["random"] == rnd  # seeded
        draws.append(tuple(rnd))
    assert len(set(draws)) > 1  # the seed changes the draw
    # cluster 1 has training subjects 3, 8, 10 (5 is held out)
    assert subject_subsets(CLUSTER_OF, HELD_OUT, 1, 0)["similar"] == [3, 8, 10]
    with pytest.raises(ConfigError, match="cluster 3"):
        subject_subsets(CLUSTER_OF, HELD_OUT, 3, 0)


def test_signed_means_hand_computed():
    # prediction - truth in degrees: (1, -2), (3, 4) in group 0; (-5, 0.5) in group 7
    true_deg = torch.tensor([[10.0, -20.0], [0.0, 5.0], [-3.0, 2.0]])
    diff_deg = torch.tensor([[1.0, -2.0], [3.0, 4.0], [-5.0, 0.5]])
    pred, true = torch.deg2rad(true_deg + diff_deg), torch.deg2rad(true_deg)
    got = signed_means(pred, true, torch.tensor([0, 0, 7]))
    assert set(got) == {"0", "7"}
    assert got["0"] == pytest.approx([2.0, 1.0, 2])
    assert got["7"] == pytest.approx([-5.0, 0.5, 1])


def test_train_subjects_keeps_exactly_those_and_refuses_held_out_ones():
    cfg = GazeTrainConfig(source="app-e", targets=["app-m"], train_count=240, test_count=20,
                          size=[16, 24])
    full = load_task_data(cfg)
    train_ids = sorted(set(full.train.labels.subject.tolist()))
    held = sorted(set(full.val.labels.subject.tolist()))
    keep = train_ids[::5]
    data = load_task_data(GazeTrainConfig(**{**cfg.__dict__, "train_subjects": keep}))
    assert sorted(set(data.train.labels.subject.tolist())) == keep
    want = int(np.isin(full.train.labels.subject.numpy(), keep).sum())
    assert len(data.train) == want
    assert sorted(set(data.val.labels.subject.tolist())) == held  # test sets unchanged
    with pytest.raises(ConfigError, match=str(held[0])):
        load_task_data(GazeTrainConfig(**{**cfg.__dict__, "train_subjects": [held[0]]}))


TINY = ["--world", "appearance", "--sources", "app-e", "--seeds", "0,1", "--reference-seeds",
        "0", "--steps", "2", "--batch-size", "16", "--train-count", "320", "--test-count", "80",
        "--size", "16x24", "--width", "2", "--min-subjects", "12", "--workers", "1",
        "--n-boot", "50"]


def test_audit_plan_and_bad_source(tmp_path):
    cfg = AuditConfig(world="appearance", sources=["app-e"], seeds=[0, 1], reference_seeds=[0],
                      train_count=320, size=[16, 24], min_subjects=12)
    plan = audit_plan(cfg, tmp_path)
    (src,) = plan.sources
    assert src.audited == [c for c, n in src.train_subjects.items() if n >= 12] == [0, 1]
    kinds = [s.name.split("__")[1] for s in plan.specs]
    assert kinds.count("similar-c0") == kinds.count("random-c1") == 2
    assert kinds.count("oracle") == kinds.count("wide") == kinds.count("matched") == 2
    assert src.matched_width == 9  # 235,359 parameters against the oracle's 217,642
    assert kinds.count("reference") == 2  # app-m and app-d, seed 0
    for s in plan.specs:
        if s.name.startswith("app-e__similar-c0"):
            assert len(s.config.train_subjects) == src.train_subjects[0]
        if s.name.startswith("app-e__wide"):
            assert s.config.width == 2 * cfg.width
    with pytest.raises(ConfigError, match="broad-e"):
        audit_plan(AuditConfig(world="appearance", sources=["broad-e"]), tmp_path)


def test_tiny_audit_through_the_command_resumes(tmp_path, capsys):
    out = tmp_path / "audit"
    with pytest.raises(SystemExit) as exc:
        main(["gaze", "audit", "--out", str(out), *TINY])
    assert exc.value.code in (0, None), capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "Premise verdict, appearance world" in printed
    summaries = sorted((out / "runs").glob("*/summary.json"))
    # per seed: baseline, wide, oracle, the baseline matched to the oracle's parameters
    # (width 3 of 2..4 here), similar and random of clusters 0 and 1; 2 references
    assert len(summaries) == 2 * (4 + 4) + 2
    stamps = {p: p.stat().st_mtime_ns for p in summaries}
    first = json.loads((out / "audit.json").read_text())
    # the similar runs trained on their cluster's subjects only
    cfg = json.loads((out / "runs" / "app-e__similar-c1__s0" / "config.json").read_text())
    summary = json.loads((out / "runs" / "app-e__similar-c1__s0" / "summary.json").read_text())
    assert cfg["train_subjects"] and summary["train_images"] < 320
    tables = first["tables"]
    assert tables["verdict"].split(" from ")[0] in ("holds", "reversed", "not shown")
    judged = tables["verdicts"]["app-e"]["all held-out subjects"]["judged"]
    assert judged["n"] == 2 and judged["test"] == "paired t, Holm 3"  # the 3 sets scored on
    # the run's own pilot (the next run's --size-from): similar - random and oracle - 1x
    assert set(first["pilot"]) == {"app-e all held-out subjects: similar - random",
                                   "app-e on val: oracle - 1x", "app-e on app-m: oracle - 1x",
                                   "app-e on app-d: oracle - 1x"}
    assert first["own_sizing"]["seeds_run"] == 2 and "Sizing from this run's own" in printed
    assert [r["cluster"] for r in tables["premise"]] == [0, 1]
    params = tables["parameters"]
    assert params["baseline 2x width"] > params["oracle MoEGaze"] > params["baseline 1x"]
    matched = params["baseline at width 3 (matched)"]
    assert abs(matched - params["oracle MoEGaze"]) < params["oracle MoEGaze"] - params[
        "baseline 1x"]
    for row in tables["clusters"]:
        v = row["values"]
        assert math.isclose(v["bias_norm"], math.hypot(v["bias_pitch"], v["bias_yaw"]))
    assert {r["tested on"] for r in tables["capacity"]} == {
        "held-out source subjects", "app-m", "app-d"}
    # a rerun reads every run back: nothing is trained again, the tables are the same
    with pytest.raises(SystemExit) as exc:
        main(["gaze", "audit", "--out", str(out), *TINY])
    assert exc.value.code in (0, None)
    assert {p: p.stat().st_mtime_ns for p in summaries} == stamps
    assert json.loads((out / "audit.json").read_text())["tables"] == tables
