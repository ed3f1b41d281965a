"""Fault suite of run folders: damaged checkpoints, concurrent commands, full or read-only disks,
non-finite losses. Each failure must end in one clear line and leave earlier files intact."""

import errno
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ddp_cases import ARCH
from torch import nn

from genlab.core.data import Batches, Split, load_digits_data
from genlab.core.errors import CheckpointError, DivergedError, OutputError, RunInUseError
from genlab.core.runs import RunDir
from genlab.core.storage import files
from genlab.core.storage.checkpoints import load_checkpoint, verify_checkpoint
from genlab.core.trainer import Trainer

GENLAB = Path(sys.executable).parent / "genlab"


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "GENLAB_QUIET": "1"}


def _three_checkpoints(folder: Path) -> RunDir:
    run = RunDir(folder, {"seed": 1})
    for epoch in range(3):
        run.log({"epoch": epoch})
        run.save({"epoch": epoch, "w": torch.full((64,), float(epoch))})
    return run


def _flip_byte_in_tensor_data(path: Path) -> None:
    import zipfile

    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename)
    data = bytearray(path.read_bytes())
    data[info.header_offset + 30 + len(info.filename) + info.file_size // 2] ^= 0x40
    path.write_bytes(bytes(data))


# -- checkpoints -------------------------------------------------------------------------

def test_last_two_checkpoints_are_kept(tmp_path):
    _three_checkpoints(tmp_path / "r")
    assert load_checkpoint(tmp_path / "r" / "checkpoint.pt")["epoch"] == 2
    assert load_checkpoint(tmp_path / "r" / "checkpoint.prev.pt")["epoch"] == 1


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_damaged_newest_checkpoint_falls_back_to_previous(tmp_path, capsys, damage):
    _three_checkpoints(tmp_path / "r").close()
    newest = tmp_path / "r" / "checkpoint.pt"
    if damage == "flip":  # torch.load alone would load this silently
        _flip_byte_in_tensor_data(newest)
        assert torch.load(newest, weights_only=True)["epoch"] == 2
    elif damage == "truncate":
        newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    else:  # a kill between the two renames of a save
        newest.unlink()
    if damage != "delete":
        with pytest.raises(CheckpointError, match="checkpoint.pt"):
            verify_checkpoint(newest)
    run = RunDir(tmp_path / "r", {"seed": 1}, resume=True)
    assert run.resumed_state["epoch"] == 1 and run.checkpoint_name == "checkpoint.prev.pt"
    assert torch.equal(run.resumed_state["w"], torch.full((64,), 1.0))
    assert [m["epoch"] for m in run.metrics()] == [0, 1]  # the line of epoch 2 is dropped
    if damage != "delete":
        assert "resuming from checkpoint.prev.pt" in capsys.readouterr().err


def test_both_checkpoints_damaged_is_one_clear_error(tmp_path):
    _three_checkpoints(tmp_path / "r").close()
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        _flip_byte_in_tensor_data(tmp_path / "r" / name)
    with pytest.raises(CheckpointError, match="no usable checkpoint"):
        RunDir(tmp_path / "r", {"seed": 1}, resume=True)


def _digits_trainer(seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(),
                          nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return Trainer(model, opt, nn.CrossEntropyLoss(), seed=seed, progress_bar=False)


def test_resume_from_previous_checkpoint_equals_uninterrupted(tmp_path):
    data = load_digits_data()
    batches = Batches(Split(data.train.images[:300], data.train.labels[:300]), 32, seed=0)
    full = _digits_trainer()
    full.fit(batches.epoch, 4, run=RunDir(tmp_path / "a", {"x": 1}))
    _digits_trainer().fit(batches.epoch, 3, run=RunDir(tmp_path / "b", {"x": 1}))
    _flip_byte_in_tensor_data(tmp_path / "b" / "checkpoint.pt")  # epoch 2 lost: redo it
    run = RunDir(tmp_path / "b", {"x": 1}, resume=True)
    resumed = _digits_trainer(seed=5)
    resumed.fit(batches.epoch, 4, run=run)
    for p, q in zip(full.model.state_dict().values(), resumed.model.state_dict().values(),
                    strict=True):
        assert torch.equal(p, q)
    assert (tmp_path / "a" / "metrics.jsonl").read_text() == \
        (tmp_path / "b" / "metrics.jsonl").read_text()


# -- one writer per folder ---------------------------------------------------------------

HOLDER = """
import sys, time
from genlab.core.runs import RunDir
run = RunDir(sys.argv[1], {"seed": 1}, resume=True)
print("ready", flush=True)
time.sleep(120)
"""


def _hold(folder: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], env=_env(),
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_second_writer_refused_and_dead_holder_lock_released(tmp_path, capsys):
    folder = tmp_path / "r"
    holder = _hold(folder)
    try:
        with pytest.raises(RunInUseError, match=rf"process {holder.pid}\b.*another --out"):
            RunDir(folder, {"seed": 1}, resume=True)
        code, lines = _cli(["nas", "train", ARCH, "--out", str(folder), "--epochs", "1",
                            "-C", "4"], capsys)
        assert code == 2
        assert len(lines) == 1 and lines[0].startswith("genlab: run in use:"), lines
    finally:
        holder.kill()  # SIGKILL: no clean-up code runs in the holder
        holder.wait()
    assert (folder / ".lock").exists()  # the stale file stays, its lock died with the holder
    run = RunDir(folder, {"seed": 1}, resume=True)
    assert json.loads((folder / "config.json").read_text())["seed"] == 1
    run.close()


def test_reopening_in_the_same_process_is_allowed(tmp_path):
    first = RunDir(tmp_path / "r", {"seed": 1})
    second = RunDir(tmp_path / "r", {"seed": 1}, resume=True)  # no RunInUseError
    assert second.config["seed"] == 1 and second.resumed_state is None
    second.close()
    first.log({"epoch": 0})  # the first writer still writes after the second let go
    first.close()
    lines = (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [0]
    assert not (tmp_path / "r" / ".lock").exists()


# -- full disk, read-only folder ---------------------------------------------------------

class _FullDisk:
    """A file object whose writes put half the bytes on disk, then fail with ENOSPC."""

    def __init__(self, fh):
        self.fh = fh

    def write(self, data):
        self.fh.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


def test_full_disk_is_one_clear_error_and_keeps_earlier_files(tmp_path, monkeypatch):
    run = _three_checkpoints(tmp_path / "r")
    before = {p.name: p.read_bytes() for p in (tmp_path / "r").iterdir()}
    real_fdopen, real_open = os.fdopen, open
    monkeypatch.setattr(files.os, "fdopen", lambda *a, **k: _FullDisk(real_fdopen(*a, **k)))
    monkeypatch.setattr(files, "open", lambda *a, **k: _FullDisk(real_open(*a, **k)),
                        raising=False)
    with pytest.raises(OutputError, match=r"checkpoint\.pt: cannot write \(No space left"):
        run.save({"epoch": 3, "w": torch.zeros(64)})
    with pytest.raises(OutputError, match=r"summary\.json: .*files written before are intact"):
        run.write_summary({"x": 1})
    with pytest.raises(OutputError, match="metrics.jsonl"):
        run.log({"epoch": 3})
    monkeypatch.undo()
    after = {p.name: p.read_bytes() for p in (tmp_path / "r").iterdir()}
    assert set(after) == set(before)  # no temporary file left behind
    for name in ("checkpoint.pt", "checkpoint.prev.pt", "config.json"):
        assert after[name] == before[name]
    run.close()
    resumed = RunDir(tmp_path / "r", {"seed": 1}, resume=True)  # the cut metrics line is dropped
    assert [m["epoch"] for m in resumed.metrics()] == [0, 1, 2]
    assert resumed.resumed_state["epoch"] == 2


def test_read_only_file_system_is_one_clear_error(tmp_path, monkeypatch):
    def refuse(*_a, **_k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(files.tempfile, "mkstemp", refuse)
    with pytest.raises(OutputError, match=r"config\.json: cannot write \(Read-only file system"):
        RunDir(tmp_path / "r", {"seed": 1})


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_refused_with_one_line(tmp_path):
    folder = tmp_path / "r"
    _three_checkpoints(folder).close()
    folder.chmod(0o555)
    try:
        with pytest.raises(OutputError, match="cannot"):
            RunDir(folder, {"seed": 1}, resume=True).save({"epoch": 9})
    finally:
        folder.chmod(0o755)


def _limit_file_size(limit: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_cli_file_size_limit_is_one_line_exit_2_and_keeps_earlier_files(tmp_path):
    """A real kernel refusal (RLIMIT_FSIZE: writes past 100 kB fail, as on a full disk)."""
    out = tmp_path / "r"
    cmd = [str(GENLAB), "nas", "train", ARCH, "--out", str(out), "--epochs", "2", "-C", "4"]
    limited = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300,
                             preexec_fn=_limit_file_size(100_000))
    assert limited.returncode == 2
    lines = limited.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("genlab: cannot write:"), limited.stderr
    assert "checkpoint.pt" in lines[0] and "File too large" in lines[0]
    assert json.loads((out / "config.json").read_text())["epochs"] == 2
    assert json.loads((out / "metrics.jsonl").read_text())["epoch"] == 0  # logged before
    assert not list(out.glob(".*.tmp")) and not (out / "checkpoint.pt").exists()
    run = RunDir(out, json.loads((out / "config.json").read_text()), resume=True)
    assert run.resumed_state is None and run.metrics() == []  # resumes from scratch
    run.close()


# -- non-finite losses -------------------------------------------------------------------

def test_nan_after_first_epoch_names_the_kept_checkpoint(tmp_path):
    data = load_digits_data()
    batches = Batches(Split(data.train.images[:200], data.train.labels[:200]), 50)
    t = _digits_trainer()
    calls = {"n": 0}
    ce = nn.CrossEntropyLoss()

    def poisoned(out, y):
        calls["n"] += 1
        return ce(out, y) * (float("nan") if calls["n"] > 2 * len(batches) else 1.0)

    t.loss_fn = poisoned
    run = RunDir(tmp_path / "r", {})
    with pytest.raises(DivergedError, match=r"epoch 2, step 0; the last good checkpoint "
                                            r"\(after epoch 1\) is kept in .*checkpoint\.pt"):
        t.fit(batches.epoch, 5, run=run)
    state = load_checkpoint(tmp_path / "r" / "checkpoint.pt")
    assert state["epoch"] == 1
    assert all(torch.isfinite(v.float()).all() for v in state["model"].values())


def _cli(argv: list[str], capsys) -> tuple[int, list[str]]:
    """genlab's entry point in this process: (exit code, stderr lines)."""
    from genlab.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code, capsys.readouterr().err.strip().splitlines()


def test_cli_divergence_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "r"
    code, lines = _cli(["nas", "train", ARCH, "--out", str(out), "--epochs", "2", "-C", "4",
                        "--lr", "1e12"], capsys)
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("genlab: diverged: non-finite"), lines
    assert "no checkpoint was written yet" in lines[0]
    assert (out / "config.json").exists() and not (out / "summary.json").exists()
