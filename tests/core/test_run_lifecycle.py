"""What a run leaves behind and what it counts: no lock file after a normal exit or a
SIGTERM, one checkpoint once finished, training time summed over resumed segments, and a
word when --resume finds no run."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from ddp_cases import ARCH

from genlab.core.data import Batches, load_digits_data
from genlab.core.errors import ConfigError
from genlab.core.runs import RunDir, config_differences
from genlab.core.trainer import Trainer

GENLAB = Path(sys.executable).parent / "genlab"


def test_a_closed_run_leaves_no_lock_and_a_finished_one_one_checkpoint(tmp_path):
    run = RunDir(tmp_path / "r", {"x": 1})
    assert (tmp_path / "r" / ".lock").exists()
    run.save({"step": 0})
    run.save({"step": 1})
    assert (tmp_path / "r" / "checkpoint.prev.pt").exists()
    run.write_summary({"done": True})
    run.close()
    names = {p.name for p in (tmp_path / "r").iterdir()}
    assert names == {"config.json", "checkpoint.pt", "summary.json"}
    again = RunDir(tmp_path / "r", {"x": 1}, resume=True)  # the folder can be taken again
    assert (tmp_path / "r" / ".lock").exists()
    again.close()
    assert not (tmp_path / "r" / ".lock").exists()


def test_writing_the_summary_releases_the_folder_while_the_object_lives(tmp_path):
    """A library caller that keeps the RunDir (or a reference cycle that delays its
    collection) leaves no .lock once the run is finished; a second writer can take it."""
    run = RunDir(tmp_path / "r", {"x": 1})
    run.save({"step": 0})
    run.write_summary({"done": True})
    assert not (tmp_path / "r" / ".lock").exists()
    other = RunDir(tmp_path / "r", {"x": 1}, resume=True)
    assert (tmp_path / "r" / ".lock").exists()
    other.close()
    run.close()  # a second close is harmless
    assert not (tmp_path / "r" / ".lock").exists()


def test_a_lock_file_removed_under_a_waiting_opener_is_not_trusted(tmp_path, monkeypatch):
    """acquire() locks again when the file it locked is no longer the folder's lock file."""
    from genlab.core.storage import locks

    folder = tmp_path / "f"
    folder.mkdir()
    real_flock, calls = locks.fcntl.flock, {"n": 0}

    def flock_after_replacement(fd, op):
        calls["n"] += 1
        if calls["n"] == 1:  # a releasing holder removes the file, a new one appears
            os.unlink(folder / locks.LOCK_FILE)
            (folder / locks.LOCK_FILE).write_text("")
        return real_flock(fd, op)

    monkeypatch.setattr(locks.fcntl, "flock", flock_after_replacement)
    key = locks.acquire(folder)
    fd = locks._held[key][0]
    assert calls["n"] == 2  # the first lock was on the removed file
    assert os.fstat(fd).st_ino == os.stat(folder / locks.LOCK_FILE).st_ino
    locks.release(key)
    assert not (folder / locks.LOCK_FILE).exists()


def test_resume_of_a_folder_without_a_run_says_so(tmp_path, capsys):
    RunDir(tmp_path / "new", {"x": 1}, resume=True).close()
    assert "holds no run to resume; starting a new one" in capsys.readouterr().err
    assert (tmp_path / "new" / "config.json").exists()


def _fit(out: Path, epochs: int, resume: bool):
    torch.manual_seed(0)
    data = load_digits_data()
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    run = RunDir(out, {"epochs_total": 3}, resume=resume)
    trainer = Trainer(model, opt, torch.nn.functional.cross_entropy, progress_bar=False)
    batches = Batches(data.train, 64, seed=0)
    try:
        return trainer.fit(batches.epoch, epochs, run=run)
    finally:
        run.close()


def test_training_time_is_summed_over_resumed_segments(tmp_path):
    first = _fit(tmp_path / "r", 1, resume=False)  # stands for a run killed after epoch 0
    assert len(first.segments) == 1 and first.seconds == first.segments[0] > 0
    second = _fit(tmp_path / "r", 3, resume=True)
    assert len(second.segments) == 2
    assert 0 < second.segments[0] <= first.segments[0]  # as of its last checkpoint
    assert second.seconds == sum(second.segments) > first.seconds
    finished = _fit(tmp_path / "r", 3, resume=True)  # nothing left to train
    assert len(finished.segments) == 3 and finished.segments[0] == second.segments[0]
    assert 0 < finished.segments[1] <= second.segments[1]  # up to its last checkpoint


def test_sigterm_leaves_no_lock_and_no_temporary_file(tmp_path):
    out = tmp_path / "t"
    cmd = [str(GENLAB), "nas", "train", ARCH, "--out", str(out), "-C", "4", "--epochs", "50",
           "--seed", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GENLAB_QUIET": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not (out / "checkpoint.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (out / ".lock").exists()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert not (out / ".lock").exists()
    assert not list(out.glob(".*.tmp"))
    assert (out / "checkpoint.pt").exists() and not (out / "summary.json").exists()


def test_a_stale_lock_file_of_a_killed_holder_is_taken_over(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / ".lock").write_text("12345 elsewhere\n")  # what a SIGKILLed holder leaves
    run = RunDir(folder, {"x": 1})
    run.close()
    assert not (folder / ".lock").exists()


def test_options_newer_than_a_run_compare_as_their_defaults(tmp_path):
    old = {"lr": 0.1}
    assert config_differences(old, {"lr": 0.1, "grouping": "none"}) == ["grouping"]
    assert config_differences(old, {"lr": 0.1, "grouping": "none"},
                              defaults={"grouping": "none"}) == []
    assert config_differences(old, {"lr": 0.1, "grouping": "crossfit"},
                              defaults={"grouping": "none"}) == ["grouping"]
    RunDir(tmp_path / "r", old).close()  # a run started before "grouping" existed
    RunDir(tmp_path / "r", {"lr": 0.1, "grouping": "none"}, resume=True,
           defaults={"grouping": "none"}).close()
    with pytest.raises(ConfigError, match="grouping"):
        RunDir(tmp_path / "r", {"lr": 0.1, "grouping": "crossfit"}, resume=True,
               defaults={"grouping": "none"})


def test_a_nested_template_compares_option_by_option(tmp_path):
    # a bench's search template: an option added to it since the run started compares as its
    # default, a free one (``outer.inner``) is not compared, another change is named in full
    old = {"seeds": [0], "search": {"lr": 0.1, "table": "a.csv", "params": {}}}
    new = {"seeds": [0], "search": {"lr": 0.1, "table": "b.csv", "params": {}, "ckpt": False}}
    defaults = {"search": {"ckpt": False}}
    assert config_differences(old, new, ["search.table"], defaults) == []
    assert config_differences(old, new, [], defaults) == ["search.table"]
    assert config_differences(old, new, ["search.table"]) == ["search.ckpt"]
    changed = {**new, "search": {**new["search"], "lr": 0.2, "params": {"k": 1}}}
    assert config_differences(old, changed, ["search.table"], defaults) == [
        "search.lr", "search.params.k"]
    RunDir(tmp_path / "r", old).close()
    RunDir(tmp_path / "r", new, resume=True, resume_free=["search.table"],
           defaults=defaults).close()
    with pytest.raises(ConfigError, match=r"search\.lr: 0\.1 -> 0\.2"):
        RunDir(tmp_path / "r", changed, resume=True, resume_free=["search.table"],
               defaults=defaults)
