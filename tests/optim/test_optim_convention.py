"""`genlab optim` speaks the shared convention (issue 18): accuracies in percent, seed lists,
--threads, the --resume flag, the sanity warning, the closing line, bounded measure memory."""

import json

import pytest
import torch

from genlab.cli import main

TINY = ["--width", "8", "--depth", "1", "--epochs", "1", "--no-measure"]


def run_cli(args, capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


def read(path):
    return json.loads(path.read_text())


def test_train_accuracies_are_percent_of_a_brute_force_count(tmp_path, capsys):
    from genlab.optim.training.tasks import task_data
    from genlab.optim.training.train import load_trained

    out = tmp_path / "run"
    code, captured = run_cli(["optim", "train", "--out", str(out), *TINY], capsys)
    assert code in (0, None)
    assert captured.out.strip().splitlines()[-1] == f"outputs in {out}"
    assert "|" not in captured.out  # an aligned table, not Markdown
    summary = read(out / "summary.json")
    model, _ = load_trained(out)  # the saved checkpoint, rebuilt from its model record
    data = task_data("digits", "full", data_seed=0)
    with torch.no_grad():
        right = int((model.eval()(data.test.images).argmax(1) == data.test.labels).sum())
        train_right = int((model(data.fit.images).argmax(1) == data.fit.labels).sum())
    assert summary["test_acc"] == pytest.approx(100 * right / len(data.test))
    assert summary["train_acc"] == pytest.approx(100 * train_right / len(data.fit))
    assert summary["gap_acc"] == pytest.approx(summary["train_acc"] - summary["test_acc"])
    assert summary["test_acc"] > 1  # not a fraction: one epoch gets far above 1%
    majority = int(torch.bincount(data.fit.labels).argmax())
    assert summary["constant_test_acc"] == pytest.approx(
        100 * int((data.test.labels == majority).sum()) / len(data.test))
    assert "warning" not in summary  # a normal short run beats the constant predictor
    assert summary["torch_threads"] == 1 and read(out / "config.json")["threads"] == 1
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["test_acc"] == pytest.approx(summary["test_acc"])


def test_lr_0_run_gets_the_sanity_warning(tmp_path, capsys):
    out = tmp_path / "lr0"
    # lr 0 scores the initialisation; at seed 1 it is below the majority class (seeded init)
    code, captured = run_cli(["optim", "train", "--out", str(out), *TINY, "--lr", "0",
                              "--seed", "1"], capsys)
    assert code in (0, None)
    summary = read(out / "summary.json")
    assert summary["test_acc"] <= summary["constant_test_acc"]
    assert "not above the constant predictor" in summary["warning"]
    warnings = [line for line in captured.err.splitlines() if "genlab: warning:" in line]
    assert len(warnings) == 1 and "test accuracy" in warnings[0]
    assert captured.out.strip().splitlines()[-1] == f"outputs in {out}"


def test_threads_0_is_torch_default_and_recorded(tmp_path, capsys):
    before = torch.get_num_threads()
    out = tmp_path / "t0"
    code, _ = run_cli(["optim", "train", "--out", str(out), *TINY, "--threads", "0"], capsys)
    assert code in (0, None)
    assert read(out / "summary.json")["torch_threads"] == before  # 0 leaves the count
    assert torch.get_num_threads() == before
    meas = tmp_path / "m"
    code, captured = run_cli(["optim", "measure", str(out), "--out", str(meas), "--measure-samples",
                              "16", "--measure-iterations", "2", "--measure-probes", "2",
                                  "--threads", "2"],
                             capsys)
    assert code in (0, None)
    assert read(meas / "summary.json")["torch_threads"] == 2
    assert read(meas / "config.json")["threads"] == 2
    assert torch.get_num_threads() == before  # restored after the command
    assert captured.out.strip().splitlines()[-1] == f"outputs in {meas}"


@pytest.mark.parametrize("command", ["train", "measure", "toy", "sparse", "standard",
                                     "transfer", "sensitivity", "labelnoise", "depth-width",
                                     "correlate"])
def test_resume_is_a_flag_and_every_command_has_threads_or_none(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    code, captured = run_cli(["optim", command, "--help"], capsys)
    assert code in (0, None)
    assert "--resume" in captured.out and "--no-resume" not in captured.out
    assert ("--threads" in captured.out) == (command != "toy")  # the toy is numpy and scalars
    code, captured = run_cli(["optim", command, "--no-resume", "--out", "x"], capsys)
    assert code == 2 and "--no-resume" in captured.err


def test_seeds_are_lists(tmp_path, capsys):
    out = tmp_path / "toy"
    code, captured = run_cli(["optim", "toy", "--out", str(out), "--seeds", "0-2",
                              "--iterations", "50"], capsys)
    assert code in (0, None)
    assert read(out / "config.json")["seeds"] == [0, 1, 2]
    assert [r["seed"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
            if r["optimizer"] == "sgd"] == [0, 1, 2]
    assert captured.out.strip().splitlines()[-1] == f"outputs in {out}"
    out = tmp_path / "sparse"
    code, _ = run_cli(["optim", "sparse", "--out", str(out), "--seeds", "3,5", "--epochs", "2",
                       "--n", "20", "--d", "12", "--optimizers", "sgd"], capsys)
    assert code in (0, None)
    assert read(out / "config.json")["seeds"] == [3, 5]
    assert read(out / "summary.json")["table"][0]["seeds"] == 2
    assert read(out / "summary.json")["torch_threads"] == 1
    for bad in ("2-1", "", "0,0", "a"):
        code, captured = run_cli(["optim", "toy", "--out", str(tmp_path / "bad"), "--seeds",
                                  bad], capsys)
        assert code == 2 and len(captured.err.strip().splitlines()) == 1, (bad, captured.err)
        assert "--seeds" in captured.err and not (tmp_path / "bad").exists()


def test_library_callers_passing_a_count_keep_working():
    from genlab.core.errors import ConfigError
    from genlab.optim.studies.correlate import CorrelateConfig
    from genlab.optim.studies.depthwidth import DepthWidthConfig
    from genlab.optim.studies.labelnoise import LabelNoiseConfig
    from genlab.optim.studies.sensitivity import SensitivityConfig
    from genlab.optim.studies.standard import StandardConfig
    from genlab.optim.studies.synthetic.sparse import SparseConfig
    from genlab.optim.studies.synthetic.toy import ToyConfig
    from genlab.optim.studies.transfer import TransferConfig

    assert ToyConfig(seeds=3, seed=5).seeds == [5, 6, 7]
    assert SparseConfig(seeds=2, seed=1).seeds == [1, 2]
    for cls in (StandardConfig, TransferConfig, SensitivityConfig, LabelNoiseConfig,
                DepthWidthConfig):
        assert cls(seeds=2).seeds == [0, 1]
    assert StandardConfig().seeds == [0, 1, 2] and TransferConfig().seeds == [0, 1, 2, 3, 4]
    with pytest.raises(ConfigError, match="seeds"):
        ToyConfig(seeds=0).validate()
    assert CorrelateConfig().resolved().stop_loss == 0.01  # Jiang et al.'s value
    with pytest.raises(ConfigError, match="stop_loss must be >= 0"):
        CorrelateConfig(stop_loss=-1).validate()


def test_correlate_defaults_per_architecture():
    import math

    from genlab.core.errors import ConfigError
    from genlab.optim.studies.correlate import CorrelateConfig
    from genlab.optim.studies.grid import expand

    mlp = CorrelateConfig().resolved()  # unset options: the architecture's defaults
    assert mlp == CorrelateConfig.for_arch("mlp") and mlp.lrs == [0.02, 0.05, 0.1]
    assert (mlp.epochs, mlp.schedule, mlp.weight_decays) == (200, "constant", [0.0, 5e-4])
    assert mlp.base().stop_loss == mlp.stop_loss == 0.01  # every training gets the rule
    assert len(expand(mlp.base(), mlp.axes())) == 3 * 3 * 3 * 3 * 2 * 2 == 324
    assert CorrelateConfig(arch="resnet").resolved().lrs == mlp.lrs  # not listed: the MLP's
    tf = CorrelateConfig.for_arch("transformer")
    assert (tf.epochs, tf.schedule, tf.weight_decays) == (200, "constant", [5e-4, 1e-3])
    assert len(expand(tf.base(), tf.axes())) == math.prod(len(v) for v in tf.axes().values()
                                                          ) == 144
    cnn = CorrelateConfig.for_arch("cnn")
    assert len(expand(cnn.base(), cnn.axes())) == 216 and cnn.base().arch == "cnn"
    given = CorrelateConfig.for_arch("transformer", depths=[2], epochs=None)
    assert given.depths == [2] and given.epochs == 200  # None: the architecture's default
    with pytest.raises(ConfigError):
        CorrelateConfig.for_arch("rnn")


def test_percent_tables_of_the_study_helpers():
    from genlab.optim.studies.grid import in_percent
    from genlab.optim.studies.sensitivity import sensitivity_row
    from genlab.optim.studies.stats import pct

    assert pct(97.25, 0.4) == "97.2 ± 0.4" or pct(97.25, 0.4) == "97.3 ± 0.4"
    row = sensitivity_row("sam", {(0.1, 0.05): 90.0, (0.1, 0.25): 89.5, (0.3, 0.05): 80.0})
    assert (row["best"], row["worst"], row["spread"]) == (90.0, 80.0, 10.0)
    assert row["share_within_1pt"] == pytest.approx(2 / 3)  # a share of the cells
    # a stored training of an earlier genlab (fractions, no constant_test_acc) reads in percent
    old = in_percent({"train_acc": 0.5, "test_acc": 0.25, "gap_acc": 0.25, "test_loss": 0.7})
    assert old == {"train_acc": 50.0, "test_acc": 25.0, "gap_acc": 25.0, "test_loss": 0.7}
    new = {"train_acc": 50.0, "constant_test_acc": 10.0}
    assert in_percent(new) == new


def test_curvature_chunks_shrink_to_the_memory_bound_with_the_same_value(monkeypatch):
    import genlab.optim.measures.per_sample as per_sample
    from genlab.optim.measures import curvature_nonuniformity
    from genlab.optim.measures.per_sample import memory_chunk

    assert memory_chunk(128, 512, 10**8, 4, 8) == 1  # 100M parameters: one sample a chunk
    assert memory_chunk(128, 512, 5_000, 4, 8) == 128  # a small net keeps its chunk
    assert memory_chunk(None, 40, 5_000, 4, 8) == 40
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    x, y = torch.randn(24, 6), torch.randint(0, 3, (24,))
    loss = torch.nn.CrossEntropyLoss()
    whole = curvature_nonuniformity(model, loss, x, y, iterations=20, chunk_size=24)
    d = sum(p.numel() for p in model.parameters())
    monkeypatch.setattr(per_sample, "PER_SAMPLE_BYTES", 5 * 8 * d * 4)  # 5 samples a chunk
    assert memory_chunk(24, 24, d, 4, 8) == 5
    assert curvature_nonuniformity(model, loss, x, y, iterations=20,
                                   chunk_size=24) == pytest.approx(whole, rel=1e-4)
