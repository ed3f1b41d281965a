"""`genlab nas detect` end to end on files in the VOC and COCO layouts (--max-steps 2), Faster
R-CNN and the ResNet-18 reference row, resume after a kill ending as the uninterrupted run,
the protocol's learning-rate schedule by hand, and backbone weights from a checkpoint."""

import json

import pytest
import torch
from detect_fixtures import make_coco, make_voc
from nas_reference import DARTS_V2, run_cli

from genlab.nas.transfer.detection import detect as detect_mod
from genlab.nas.transfer.detection.detect import DetectConfig, detect
from genlab.nas.transfer.detection.training import protocol_lr

SMALL = ["--channels", "8", "--fpn-channels", "16", "--min-size", "64", "--max-size", "96",
         "--batch-size", "2"]


def _run(capsys, data, out, *extra):
    code, stdout, err = run_cli(["nas", "detect", DARTS_V2, "--data", data, *SMALL,
                                 "--max-steps", "2", "--out", out, *extra], capsys)
    assert code == 0, err
    assert f"outputs in {out}" in stdout
    return json.loads((out / "summary.json").read_text())


def test_voc_layout_runs_to_a_summary(tmp_path, capsys):
    s = _run(capsys, f"voc:{make_voc(tmp_path / 'voc')}", tmp_path / "run")
    assert s["data"] == "voc" and s["steps"] == 2 and s["train_images"] == 4
    assert 0 <= s["map"] == s["map50"] <= 1 and len(s["ap"]) == 20
    assert s["ap"]["dog"] is not None and s["ap"]["cow"] is None  # no cow in the test set
    assert s["params"] > 0 and "trivial_map50" in s
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["lr_steps"] == [8, 11] and config["warmup"] == 500  # the protocol
    assert config["lr"] == pytest.approx(0.01 * 2 / 16)
    assert (tmp_path / "run" / "detections.png").stat().st_size > 0


def test_coco_layout_runs_to_a_summary_with_cocoeval(tmp_path, capsys):
    pytest.importorskip("pycocotools")
    s = _run(capsys, f"coco:{make_coco(tmp_path / 'coco')}", tmp_path / "run")
    assert s["data"] == "coco" and {"map", "map50", "map75"} <= set(s)
    assert s["train_images"] == 3 and s["eval_images"] == 2
    if s["map"] > 0:
        assert "Average Precision" in (tmp_path / "run" / "coco_eval.txt").read_text()


@pytest.mark.parametrize("extra", [["--detector", "fasterrcnn"],
                                   ["--backbone", "resnet18"]])
def test_faster_rcnn_and_the_resnet_row(tmp_path, capsys, extra):
    s = _run(capsys, "synthetic:8", tmp_path / "run", *extra)
    assert s["steps"] == 2 and s["map50"] >= 0
    if "resnet18" in extra:
        assert s["params"] > 11e6 * 0.9  # ResNet-18's 11.2 M (less its fc) + FPN + heads


def test_protocol_lr_by_hand():
    kw = {"lr": 0.01, "steps_per_epoch": 100, "milestones": (8, 11), "warmup": 500,
          "warmup_ratio": 0.001}
    assert protocol_lr(0, **kw) == pytest.approx(1e-5)
    assert protocol_lr(250, **kw) == pytest.approx(0.01 * (0.001 + 0.999 * 0.5))
    assert protocol_lr(500, **kw) == pytest.approx(0.01)
    assert protocol_lr(799, **kw) == pytest.approx(0.01)
    assert protocol_lr(800, **kw) == pytest.approx(0.001)
    assert protocol_lr(1100, **kw) == pytest.approx(0.0001)


def _cfg(**kw):
    return DetectConfig(genotype=DARTS_V2, data="synthetic:8", channels=8, fpn_channels=16,
                        min_size=64, max_size=64, batch_size=4, epochs=3, warmup=2,
                        checkpoint_steps=2, lr=0.02, **kw)


def test_resume_after_a_kill_ends_as_the_uninterrupted_run(tmp_path, monkeypatch):
    full = detect(_cfg(), tmp_path / "full", progress_bar=False)
    real, calls = detect_mod.DetectionTrainer.step, {"n": 0}

    def dying(self, x, y):
        calls["n"] += 1
        if calls["n"] == 4:  # after the first checkpoint (2 steps), inside the second segment
            raise KeyboardInterrupt
        return real(self, x, y)

    monkeypatch.setattr(detect_mod.DetectionTrainer, "step", dying)
    with pytest.raises(KeyboardInterrupt):
        detect(_cfg(), tmp_path / "killed", progress_bar=False)
    monkeypatch.setattr(detect_mod.DetectionTrainer, "step", real)
    assert not (tmp_path / "killed" / "summary.json").exists()
    again = detect(_cfg(), tmp_path / "killed", resume=True, progress_bar=False)
    a = [json.loads(x) for x in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in b] == [2, 4, 6]
    assert [r["train_loss"] for r in a] == [r["train_loss"] for r in b]
    wa = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=True)["model"]
    wb = torch.load(tmp_path / "killed" / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert full["map50"] == again["map50"]


def test_backbone_weights_from_a_checkpoint(tmp_path, capsys):
    from genlab.core.storage.checkpoints import save_checkpoint
    from genlab.nas import get_space

    torch.manual_seed(0)
    net = get_space("darts").build_network(DARTS_V2, 10, 3, 8, 14, layout="imagenet")
    save_checkpoint(tmp_path / "net.pt", {"model": net.state_dict()})
    cfg = _cfg(backbone_weights=str(tmp_path / "net.pt"))
    model, _ = detect_mod._model(cfg.resolved(detect_mod.read_data(cfg.data)),
                                 detect_mod.read_data(cfg.data))
    body = model.net.backbone.body.state_dict()
    assert torch.equal(body["stem0.0.weight"], net.state_dict()["stem0.0.weight"])
    wrong = tmp_path / "wrong.pt"
    save_checkpoint(wrong, {"model": {"stem0.0.weight": torch.zeros(1)}})
    code, _, err = run_cli(["nas", "detect", DARTS_V2, "--data", "synthetic:8", *SMALL,
                            "--backbone-weights", wrong, "--out", tmp_path / "r"], capsys)
    assert code == 2 and str(wrong) in err and not (tmp_path / "r").exists()
