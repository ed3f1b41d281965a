"""A run continued from its folder alone (issue 48), on a folder of PNGs made here: Ctrl-C
says where it stopped and the command that continues; `--out RUN --resume` reads the run's
own options and says where it continues; the resumed search equals an uninterrupted one; a
flag that differs from the run is refused naming it; "bad checkpoint" only for a damaged
checkpoint."""

import json

import pytest
from image_folders import write_folder
from nas_reference import run_cli

import genlab.nas.search as search_mod

SEARCH = ["--steps", "4", "--size", "8", "--batch-size", "4", "-C", "2",
          "--hessian-points", "0"]  # 6 train images: one step per epoch, a checkpoint each


@pytest.fixture
def data(tmp_path, monkeypatch):
    import genlab.core.data.imagefolder as imagefolder

    monkeypatch.setattr(imagefolder, "default_workers", lambda: 0)  # tiny: decoded in-process
    return f"folder:{write_folder(tmp_path / 'pngs')}"


@pytest.fixture
def quiet(monkeypatch):
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)
    monkeypatch.setattr(search_mod, "_plots", lambda run, history, space: None)


def _metrics(run):
    return [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]


def _interrupt_at(monkeypatch, call: int):
    """Ctrl-C during the ``call``-th bilevel step (1-based) of the next search."""
    real, calls = search_mod.bilevel_step, [0]

    def step(*args, **kwargs):
        calls[0] += 1
        if calls[0] == call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(search_mod, "bilevel_step", step)
    return lambda: monkeypatch.setattr(search_mod, "bilevel_step", real)


def test_ctrl_c_then_resume_from_the_folder_alone_equals_an_uninterrupted_search(
        data, tmp_path, capsys, quiet, monkeypatch):
    whole, run = tmp_path / "whole", tmp_path / "search"
    code, _, err = run_cli(["nas", "search", "--dataset", data, *SEARCH, "--out", whole],
                           capsys)
    assert code == 0, err
    restore = _interrupt_at(monkeypatch, 3)  # steps 0 and 1 done and checkpointed
    code, _, err = run_cli(["nas", "search", "--dataset", data, *SEARCH, "--out", run], capsys)
    assert code == 130
    # the data's line when the run opened, then where Ctrl-C stopped it and how to go on
    assert err.splitlines()[0].startswith("genlab: folder:")
    assert err.splitlines()[1:] == [f"genlab: interrupted at step 2 of 4; continue with: "
                                    f"genlab nas search --out {run} --resume"]
    restore()
    code, out, err = run_cli(["nas", "search", "--out", run, "--resume"], capsys)
    assert code == 0, err
    assert "genlab: resuming at step 2 of 4" in err.splitlines()
    assert [(m["step"], m["train_loss"], m["val_loss"]) for m in _metrics(run)] == \
        [(m["step"], m["train_loss"], m["val_loss"]) for m in _metrics(whole)]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["genotype"] == json.loads((whole / "summary.json").read_text())["genotype"]


def test_a_flag_that_differs_from_the_run_is_named_in_one_line(data, tmp_path, capsys, quiet,
                                                                monkeypatch):
    run = tmp_path / "search"
    _interrupt_at(monkeypatch, 2)
    code, _, _ = run_cli(["nas", "search", "--dataset", data, *SEARCH, "--out", run], capsys)
    assert code == 130
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    code, _, err = run_cli(["nas", "search", "--out", run, "--resume", "--steps", "8"], capsys)
    assert code == 2
    assert err.splitlines() == [
        f"genlab: bad option: {run} was run with other options (--steps: 4 -> 8); a resume "
        f"keeps the run's own: leave them out (--out {run} --resume alone continues the run) "
        "or choose another --out"]
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    # a flag equal to the run's and a resume-free one (--device) are taken
    code, _, err = run_cli(["nas", "search", "--out", run, "--resume", "--steps", "4",
                            "--device", "cpu"], capsys)
    assert code == 0, err


def test_bad_checkpoint_only_for_a_damaged_checkpoint(data, tmp_path, capsys, quiet,
                                                      monkeypatch):
    run = tmp_path / "search"
    _interrupt_at(monkeypatch, 2)  # one checkpoint, no previous one to fall back to
    run_cli(["nas", "search", "--dataset", data, *SEARCH, "--out", run], capsys)
    (run / "checkpoint.pt").write_bytes(b"damaged")
    code, _, err = run_cli(["nas", "search", "--out", run, "--resume"], capsys)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("genlab: bad checkpoint: "), err
    assert "checkpoint.pt" in lines[0]


def test_ctrl_c_in_a_training_names_its_epoch(data, tmp_path, capsys, monkeypatch):
    from genlab.core.trainer import Trainer

    run, real, calls = tmp_path / "train", Trainer.step, [0]

    def step(self, x, y):
        calls[0] += 1
        if calls[0] == 2:  # one batch of 12 images an epoch: during the second epoch
            raise KeyboardInterrupt
        return real(self, x, y)

    monkeypatch.setattr(Trainer, "step", step)
    argv = ["optim", "train", "--dataset", data, "--epochs", "3", "--batch-size", "16",
            "--no-measure", "--out", run]
    code, _, err = run_cli(argv, capsys)
    assert code == 130
    assert err.splitlines()[-1] == (f"genlab: interrupted at epoch 1 of 3; continue with: "
                                    f"genlab optim train --out {run} --resume")
    monkeypatch.setattr(Trainer, "step", real)
    code, _, err = run_cli(["optim", "train", "--out", run, "--resume"], capsys)
    assert code == 0, err
    assert "genlab: resuming at epoch 1 of 3" in err.splitlines()
    assert [m["epoch"] for m in _metrics(run)] == [0, 1, 2]
