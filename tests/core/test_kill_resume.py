"""SIGKILL `genlab nas train` at random points, resume until it finishes: the run folder
must equal an uninterrupted run's (weights bit for bit, metrics line for line).

Kill points (seeded): the first attempt dies at a uniform time after its run folder
appears (often before any checkpoint); every later one once it has logged a new epoch,
plus a uniform fraction of an epoch, so the kills land in training steps, evaluations,
checkpoint writes and between the two renames of a save. The fast test kills twice in
4 epochs; the slow one up to eight times in 10 epochs.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from ddp_cases import ARCH

from genlab.core.runs import load_checkpoint

GENLAB = Path(sys.executable).parent / "genlab"
def _command(out: Path, epochs: int, resume: bool) -> list[str]:
    return [str(GENLAB), "nas", "train", ARCH, "--out", str(out), "-C", "4", "--epochs",
            str(epochs), "--seed", "2", *(["--resume"] if resume else [])]


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "GENLAB_QUIET": "1"}


def _uninterrupted(out: Path, epochs: int) -> tuple[float, float]:
    """The reference run, in this process (one thread, like the commands); its time spans.

    Returns (seconds from config.json to the summary, seconds per training epoch).
    """
    from genlab.nas.retrain import RetrainConfig, retrain

    t0 = time.monotonic()
    summary = retrain(RetrainConfig(arch=ARCH, channels=4, epochs=epochs, seed=2), out,
                      progress_bar=False)
    return time.monotonic() - t0, summary["train_seconds"] / epochs


def _lines(out: Path) -> int:
    path = out / "metrics.jsonl"
    return path.read_text().count("\n") if path.exists() else 0


def _killed_then_resumed(out: Path, epochs: int, kills: int, spans: tuple, seed: int) -> list:
    """Kill ``kills`` attempts (see module doc), then resume to the end; the lines at each kill."""
    rng = random.Random(seed)
    after_config, per_epoch = spans
    seen = []
    for attempt in range(kills):
        before = _lines(out)
        proc = subprocess.Popen(_command(out, epochs, attempt > 0), env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if attempt == 0:
            while not (out / "config.json").exists() and proc.poll() is None:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, after_config / 2))
        else:
            while _lines(out) <= before and proc.poll() is None:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, per_epoch))
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
        assert proc.returncode in (-signal.SIGKILL, 0), err
        seen.append(_lines(out))
        if proc.returncode == 0:
            break
    finish = subprocess.run(_command(out, epochs, True), env=_env(), capture_output=True,
                            text=True, timeout=600)
    assert finish.returncode == 0, (seen, finish.stderr)
    return seen


def _assert_same_run(a: Path, b: Path) -> None:
    sa, sb = load_checkpoint(a / "checkpoint.pt"), load_checkpoint(b / "checkpoint.pt")
    for k in sa["model"]:
        assert torch.equal(sa["model"][k], sb["model"][k]), k
    assert (a / "metrics.jsonl").read_text() == (b / "metrics.jsonl").read_text()
    ja, jb = (json.loads((p / "summary.json").read_text()) for p in (a, b))
    for s in (ja, jb):
        s.pop("train_seconds")
    assert ja == jb


def test_sigkill_twice_then_resume_equals_uninterrupted(tmp_path):
    spans = _uninterrupted(tmp_path / "ref", 4)
    seen = _killed_then_resumed(tmp_path / "r", 4, 2, spans, seed=0)
    assert seen[-1] < 4, seen  # killed before the end at least once
    _assert_same_run(tmp_path / "ref", tmp_path / "r")


@pytest.mark.slow
def test_sigkill_eight_times_then_resume_equals_uninterrupted(tmp_path):
    spans = _uninterrupted(tmp_path / "ref", 10)
    seen = _killed_then_resumed(tmp_path / "r", 10, 8, spans, seed=1)
    assert len(seen) >= 5 and seen[-1] < 10, seen
    _assert_same_run(tmp_path / "ref", tmp_path / "r")
