"""--tensorboard: metrics records mirrored as TensorBoard scalars, read back from the events."""

import pytest

from genlab.core.runs import RunDir
from genlab.core.storage.tensorboard import record_step, scalars

pytest.importorskip("tensorboard")


def _events(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder / "tensorboard"))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_records_become_scalars_and_resume_purges_the_lost_steps(tmp_path):
    run = RunDir(tmp_path / "r", {"seed": 0}, tensorboard=True)
    for epoch in range(3):
        run.log({"epoch": epoch, "train_loss": 1.0 / (epoch + 1), "name": "x",
                 "router": {"load": 0.5 + epoch, "curve": [1, 2]}, "bad": float("nan")})
        if epoch < 2:
            run.save({"epoch": epoch})
    run.close()
    events = _events(tmp_path / "r")
    assert events["train_loss"] == [(0, 1.0), (1, 0.5), (2, pytest.approx(1 / 3))]
    assert events["router/load"] == [(0, 0.5), (1, 1.5), (2, 2.5)]
    assert set(events) == {"train_loss", "router/load"}  # strings, lists, NaN, the x axis: no

    resumed = RunDir(tmp_path / "r", {"seed": 0}, resume=True, tensorboard=True)
    assert [m["epoch"] for m in resumed.metrics()] == [0, 1]  # epoch 2 came after the checkpoint
    resumed.log({"epoch": 2, "train_loss": 0.25})
    resumed.close()
    assert _events(tmp_path / "r")["train_loss"] == [(0, 1.0), (1, 0.5), (2, 0.25)]


def test_environment_switch_and_step_rules(tmp_path, monkeypatch):
    monkeypatch.setenv("GENLAB_TENSORBOARD", "1")
    run = RunDir(tmp_path / "r", {})
    run.log({"step": 40, "epoch": 1, "val_acc": 90.0})
    run.close()
    assert _events(tmp_path / "r") == {"epoch": [(40, 1.0)], "val_acc": [(40, 90.0)]}
    assert record_step({"loss": 1.0}, 7) == 7 and record_step({"epoch": True}, 2) == 2
    assert scalars({"a": {"b": {"c": 2}}, "flag": True}) == {"a/b/c": 2.0}


def test_cli_flag_writes_events_for_a_command(tmp_path, monkeypatch):
    from genlab.cli import main

    monkeypatch.setenv("GENLAB_TENSORBOARD", "0")  # restored after the test: main sets it

    arch = "|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|avg_pool_3x3~0|none~1|none~2|"
    with pytest.raises(SystemExit) as exit_info:
        main(["--tensorboard", "nas", "train", arch, "--out", str(tmp_path / "r"), "-C", "4",
              "--epochs", "2"])
    assert exit_info.value.code in (0, None)
    events = _events(tmp_path / "r")
    assert [s for s, _ in events["test_acc"]] == [0, 1] and "train_loss" in events
