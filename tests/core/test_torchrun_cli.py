"""`genlab nas train` under `torchrun --nproc_per_node 2` (gloo): one run folder, written once."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from ddp_cases import ARCH

from genlab.core.runs import load_checkpoint

TORCHRUN = Path(sys.executable).parent / "torchrun"
GENLAB = Path(sys.executable).parent / "genlab"
pytestmark = pytest.mark.skipif(not TORCHRUN.exists(), reason="torchrun not in the venv")


def _command(out: Path, *extra: str) -> list[str]:
    return [str(TORCHRUN), "--standalone", "--nproc_per_node", "2", str(GENLAB), "nas", "train",
            ARCH, "--out", str(out), "-C", "4", "--epochs", "3", *extra]


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (torchrun starts its workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "GENLAB_QUIET": "1"}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("torchrun") / "ddp"
    proc = subprocess.run(_command(out), env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out, proc


def test_torchrun_writes_the_run_folder_once(uninterrupted):
    out, proc = uninterrupted
    assert proc.stdout.count("test accuracy") == 1  # rank 1 stays silent
    metrics = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(m)["epoch"] for m in metrics] == [0, 1, 2]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["processes"] == 2
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "checkpoint.pt", "curves.png"} <= names
    assert "checkpoint.prev.pt" not in names and ".lock" not in names  # finished: one checkpoint
    assert not list(out.glob(".*.tmp"))


@pytest.mark.slow
def test_torchrun_killed_then_resumed_equals_uninterrupted(uninterrupted, tmp_path):
    reference, _ = uninterrupted
    out = tmp_path / "ddp"
    proc = subprocess.Popen(_command(out), env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (out / "checkpoint.pt").exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    victims = [*_descendants(proc.pid), proc.pid]  # both workers and torchrun, mid-run
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    while any(Path(f"/proc/{pid}").exists() for pid in victims[:-1]):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert not (out / "summary.json").exists()
    resumed = subprocess.run(_command(out, "--resume"), env=_env(), capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a = load_checkpoint(reference / "checkpoint.pt")["model"]
    b = load_checkpoint(out / "checkpoint.pt")["model"]
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert (reference / "metrics.jsonl").read_text() == (out / "metrics.jsonl").read_text()
