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
    assert run_cli(["optim", "toy", "--out", str(tmp_path / "t"), "--seeds", "0-2",
                    "--iterations", "300"]) in (0, None)
    assert read_summary(tmp_path / "t")["gd_escaped"] is False


TINY = ["--width", "8", "--depth", "1", "--epochs", "1", "--measure-samples", "32",
        "--measure-iterations", "3", "--measure-probes", "2"]


def test_train_then_measure_and_wrong_architecture(tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(["optim", "train", "--out", str(run), *TINY]) in (0, None)
    summary = read_summary(run)
    assert 0 <= summary["test_acc"] <= 100 and "trace_sigma" in summary["measures"]
    assert (run / "checkpoint.pt").exists() and (run / "curves.png").exists()
    meas = tmp_path / "meas"
    assert run_cli(["optim", "measure", str(run / "checkpoint.pt"), "--out", str(meas),
                    "--measure-samples", "32", "--measure-iterations", "3",
                    "--measure-probes", "2"]) in (0, None)
    again = read_summary(meas)
    assert again["test_acc"] == pytest.approx(summary["test_acc"])
    # a checkpoint of another architecture, described by the MLP's config -> CheckpointError
    cnn = tmp_path / "cnn"
    assert run_cli(["optim", "train", "--out", str(cnn), "--arch", "cnn", *TINY,
                    "--no-measure"]) in (0, None)
    capsys.readouterr()
    code = run_cli(["optim", "measure", str(cnn / "checkpoint.pt"), "--train-config",
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
    assert run_cli(["optim", "toy", "--out", str(tmp_path / "y"), "--seeds", "2-0"]) == 2


def test_sparse_cli_and_resume(tmp_path):
    out = tmp_path / "sp"
    args = ["optim", "sparse", "--out", str(out), "--seeds", "0", "--epochs", "3", "--n", "20",
            "--d", "12", "--optimizers", "sgd,samgcm,cov"]
    assert run_cli(args) in (0, None)
    summary = read_summary(out)
    table = summary["table"]
    assert [r["optimizer"] for r in table] == ["sgd", "samgcm", "cov"]
    # the guided ones against SGD (SAM not run), paired by seed: one seed is not testable
    assert [(r["optimizer"], r["against"], r["kind"]) for r in summary["comparisons"]] == [
        ("samgcm", "sgd", "not testable"), ("cov", "sgd", "not testable")]
    assert summary["beta_l1_per_seed"]["samgcm"]["0"] == pytest.approx(table[1]["beta_l1"])
    assert (out / "sparse_paths.png").exists()
    # resuming a finished run recomputes nothing and gives the same table
    assert run_cli([*args, "--resume"]) in (0, None)
    assert read_summary(out)["table"][0]["test_loss"] == table[0]["test_loss"]
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 3
    assert run_cli(["optim", "sparse", "--out", str(tmp_path / "b"), "--optimizers", "adam"]) == 2


def test_correlate_cli_resumes_a_killed_grid(tmp_path, monkeypatch, capsys):
    out = tmp_path / "corr"
    args = ["optim", "correlate", "--out", str(out), "--lrs", "0.05", "--batch-sizes", "64",
            "--widths", "4", "--depths", "1", "--optimizers", "sgd,sam", "--weight-decays", "0",
            "--epochs", "1",
            "--measure-samples", "16", "--measure-iterations", "2", "--measure-probes", "2"]
    import genlab.optim.studies.grid as grid

    real, calls = grid.train_digits, []

    def killed_after_first(cfg, out_dir, **kw):
        if calls:
            raise KeyboardInterrupt  # the grid is killed during the second training
        calls.append(out_dir)
        return real(cfg, out_dir, **kw)

    monkeypatch.setattr(grid, "train_digits", killed_after_first)
    assert run_cli(args) == 130  # typer reports the interrupt as exit 130
    monkeypatch.setattr(grid, "train_digits", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    capsys.readouterr()
    assert run_cli([*args, "--resume"]) in (0, None)
    printed = capsys.readouterr().out
    assert "|" not in printed and "trace_sigma" in printed  # aligned tables, not Markdown
    assert printed.strip().splitlines()[-1] == f"outputs in {out}"
    assert len(calls) == 2  # only the unfinished training ran again
    summary = read_summary(out)
    assert summary["trainings"] == 2 and summary["hyperparameters"] == ["optimizer"]
    assert {r["measure"] for r in summary["tau"]["gap_acc"]} >= {"trace_sigma", "m_sharpness"}
    assert summary["tau"]["gap_acc"][-1]["measure"] == "random_sanity"  # the sanity row
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    assert (out / "scatter_gap_acc.png").exists()
    table = (out / "table.md").read_text()  # one tau table and one paired table per gap
    assert "### Kendall tau against gap_acc, all 2 models" in table
    assert table.count("| trace_sigma |") == len(summary["tau"]) + sum(
        len([r for r in rows if r["a"] == "trace_sigma"]) for rows in summary["paired"].values())
