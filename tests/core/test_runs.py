import json

import pytest
import torch

from genlab.core.errors import CheckpointError, ConfigError, RunExistsError
from genlab.core.runs import RunDir, load_checkpoint


def test_new_run_writes_config_and_refuses_overwrite(tmp_path):
    run = RunDir(tmp_path / "r", {"seed": 3, "lr": 0.1})
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    assert cfg["seed"] == 3 and "genlab_version" in cfg
    run.log({"step": 0})
    with pytest.raises(RunExistsError):
        RunDir(tmp_path / "r", {"seed": 3, "lr": 0.1})
    assert (tmp_path / "r" / "metrics.jsonl").read_text().count("\n") == 1


def test_resume_drops_metrics_after_checkpoint_and_checks_config(tmp_path):
    run = RunDir(tmp_path / "r", {"seed": 1})
    run.log({"epoch": 0})
    run.save({"w": torch.ones(2), "epoch": 0})
    run.log({"epoch": 1})  # written after the checkpoint: lost with the kill
    with open(tmp_path / "r" / "metrics.jsonl", "a") as fh:
        fh.write('{"epoch": 2')  # half-written line
    resumed = RunDir(tmp_path / "r", {"seed": 1, "device": "cuda"}, resume=True)
    assert [m["epoch"] for m in resumed.metrics()] == [0]
    assert torch.equal(resumed.resumed_state["w"], torch.ones(2))
    with pytest.raises(ConfigError, match="seed: 1 -> 2"):
        RunDir(tmp_path / "r", {"seed": 2}, resume=True)


def test_checkpoint_is_atomic_and_weights_only(tmp_path):
    run = RunDir(tmp_path / "r", {})
    run.save({"x": torch.arange(3)})
    leftovers = [p.name for p in (tmp_path / "r").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="bad.pt"):
        load_checkpoint(tmp_path / "bad.pt")
    assert torch.equal(load_checkpoint(tmp_path / "r" / "checkpoint.pt")["x"], torch.arange(3))
