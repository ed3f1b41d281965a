"""`genlab optim` commands end to end at tiny sizes; bad input exits 2 with one line."""

import json

import pytest
import torch

from genlab.cli import main


def run_cli(args):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


def read_summary(folder):
    return json.loads((folder / "summary.json").read_text())


def test_toy_cli(tmp_path):
    assert run_cli(["optim", "toy", "--out", str(tmp_path / "t"), "--seeds", "3",
                    "--iterations", "300"]) in (0, None)
    assert read_summary(tmp_path / "t")["gd_escaped"] is False


TINY = ["--width", "8", "--depth", "1", "--epochs", "1", "--measure-samples", "32",
        "--measure-iterations", "3", "--measure-probes", "2"]


def test_train_then_measure_and_wrong_architecture(tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(["optim", "train", "--out", str(run), *TINY]) in (0, None)
    summary = read_summary(run)
    assert 0 <= summary["test_acc"] <= 1 and "trace_sigma" in summary["measures"]
    assert (run / "checkpoint.pt").exists() and (run / "curves.png").exists()
    meas = tmp_path / "meas"
    assert run_cli(["optim", "measure", str(run / "checkpoint.pt"), "--out", str(meas),
                    "--samples", "32", "--iterations", "3", "--probes", "2"]) in (0, None)
    again = read_summary(meas)
    assert again["test_acc"] == pytest.approx(summary["test_acc"])
    # a checkpoint of another architecture, described by the MLP's config -> CheckpointError
    cnn = tmp_path / "cnn"
    assert run_cli(["optim", "train", "--out", str(cnn), "--arch", "cnn", *TINY,
                    "--no-measure"]) in (0, None)
    capsys.readouterr()
    code = run_cli(["optim", "measure", str(cnn / "checkpoint.pt"), "--config",
                    str(run / "config.json"), "--out", str(tmp_path / "bad")])
    err = capsys.readouterr().err
    assert code == 2 and "bad checkpoint" in err and "mlp" in err
    # a corrupt checkpoint
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "checkpoint.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "junk" / "config.json").write_text((run / "config.json").read_text())
    assert run_cli(["optim", "measure", str(tmp_path / "junk"), "--out",
                    str(tmp_path / "bad2")]) == 2
    torch.load(run / "checkpoint.pt", weights_only=True)  # what we wrote stays loadable


def test_bad_options_exit_2(tmp_path, capsys):
    assert run_cli(["optim", "train", "--out", str(tmp_path / "x"), "--lr", "-1"]) == 2
    assert "lr" in capsys.readouterr().err
    assert run_cli(["optim", "toy", "--out", str(tmp_path / "y"), "--seeds", "0"]) == 2
