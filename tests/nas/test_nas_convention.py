"""`genlab nas search | train | bench` speak the common convention (docs/cli.md, issue 18):
accuracies in percent (100 x an independent count), --size N or NxN, --threads 0 = torch's
default recorded as torch_threads, --seeds lists and ranges, --resume a flag only, and the
last printed line `outputs in PATH`. In process (genlab.cli.main), at tiny sizes."""

import json

import pytest
import torch
from nas_reference import NB201_CELL as NB201
from nas_reference import run_cli as _run

import genlab
import genlab.nas.retrain as retrain_mod
import genlab.nas.search as search_mod
from genlab.nas.bench import BenchConfig
from genlab.nas.data import load_image_data


def _read(folder, name):
    return json.loads((folder / name).read_text())


def _percent_correct(logits, labels) -> float:
    """100 x (correct predictions) / (predictions), counted one by one."""
    pred = logits.argmax(-1).tolist()
    correct = sum(int(p == t) for p, t in zip(pred, labels.tolist(), strict=True))
    return 100.0 * correct / len(pred)


@pytest.fixture
def quiet(monkeypatch):
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)
    monkeypatch.setattr(search_mod, "_plots", lambda run, history, space: None)
    monkeypatch.setattr(retrain_mod, "_plot_curves", lambda run: None)


def test_search_percent_size_threads_and_closing_line(tmp_path, capsys, quiet):
    out = tmp_path / "s"
    code, stdout, err = _run(["nas", "search", "--out", out, "--size", "8x8", "--threads", "0",
                              "--seed", "1", "-C", "2", "--steps", "2", "--batch-size", "8",
                              "--hessian-points", "0"], capsys)
    assert code == 0, err
    lines = stdout.splitlines()
    assert lines[-1] == f"outputs in {out}"
    config, summary = _read(out, "config.json"), _read(out, "summary.json")
    assert (config["size"], config["threads"]) == (8, 0)  # NxN -> N; 0 accepted and recorded
    assert summary["torch_threads"] == torch.get_num_threads()  # 0 left torch's default
    # supernet_val_acc in percent: 100 x a count on the diagnostic batch, with the final
    # weights rebuilt from the checkpoint (train mode, as the diagnostics run it)
    net = genlab.load(out, kind="nas search").model.train()
    val = load_image_data("digits", None, size=8, seed=1).val
    x, y = val.images[: config["diag_batch"]], val.labels[: config["diag_batch"]]
    with torch.no_grad():
        expected = _percent_correct(net(x), y)
    assert summary["supernet_val_acc"] == pytest.approx(expected, abs=1e-6)
    assert f"supernet val acc {expected:.2f}%" in stdout
    metrics = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["val_acc"] == summary["supernet_val_acc"]
    assert all(0 <= m["val_acc"] <= 100 for m in metrics)


def test_train_size_threads_percent_and_closing_line(tmp_path, capsys, quiet):
    out = tmp_path / "t"
    code, stdout, err = _run(["nas", "train", NB201, "--out", out, "--size", "4x4",
                              "--threads", "0", "-C", "2", "--epochs", "1", "--batch-size",
                              "32"], capsys)
    assert code == 0, err
    assert stdout.splitlines()[-1] == f"outputs in {out}"
    config, summary = _read(out, "config.json"), _read(out, "summary.json")
    assert (config["size"], config["threads"]) == (4, 0)
    assert summary["torch_threads"] == torch.get_num_threads()
    model = genlab.load(out, kind="nas train").model  # eval mode
    test = load_image_data("digits", None, size=4, seed=0).test
    with torch.no_grad():
        expected = _percent_correct(model(test.images), test.labels)
    assert summary["test_acc"] == pytest.approx(expected, abs=1e-3)


def test_bench_seed_range_threads_and_closing_line(tmp_path, capsys, quiet):
    out = tmp_path / "b"
    code, stdout, err = _run(["nas", "bench", "--out", out, "--regs", "none", "--seeds", "0-1",
                              "--steps", "1", "--retrain-epochs", "0", "--no-random-archs",
                              "--threads", "0"], capsys)
    assert code == 0, err
    assert stdout.splitlines()[-1] == f"outputs in {out}"
    config = _read(out, "config.json")
    assert config["seeds"] == [0, 1] and config["search"]["threads"] == 0
    assert sorted(p.name for p in (out / "jobs").iterdir()) == ["none-s0", "none-s1"]
    assert _read(out, "summary.json")["torch_threads"] == torch.get_num_threads()


def test_bench_config_takes_a_seed_count():
    assert BenchConfig(seeds=3).seeds == [0, 1, 2]  # a library caller's count keeps working
    assert BenchConfig(seeds=[4, 7]).seeds == [4, 7]


@pytest.mark.parametrize("command", [["search"], ["train", NB201], ["bench"]])
def test_resume_is_a_flag_only(command, tmp_path, capsys):
    code, stdout, _ = _run(["nas", *command, "--help"], capsys)
    assert code == 0 and "--resume" in stdout and "--no-resume" not in stdout
    code, _, _ = _run(["nas", *command, "--out", tmp_path / "r", "--no-resume"], capsys)
    assert code == 2 and not (tmp_path / "r").exists()
