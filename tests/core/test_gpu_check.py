"""benchmarks/gpu_check.py: a clear "no GPU" line and exit 0 without CUDA; a CPU dry run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


def _run(*args, timeout=900):
    env = {**os.environ, "GENLAB_QUIET": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_without_a_gpu_it_says_so_and_exits_0():
    proc = _run()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("no GPU:") and len(proc.stdout.strip().splitlines()) == 1


def test_dry_run_on_cpu_of_two_checks(tmp_path):
    proc = _run("--device", "cpu", "--quick", "--only", "gradients_vs_cpu,exact_resume",
                "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = json.loads((tmp_path / "gpu_check.json").read_text())["checks"]
    assert set(checks) == {"gradients_vs_cpu", "exact_resume"}
    assert checks["exact_resume"]["exact"] and checks["gradients_vs_cpu"]["status"] == "PASS"
    assert "2 passed, 0 failed" in proc.stdout


def test_unknown_check_is_refused():
    proc = _run("--device", "cpu", "--only", "warp_drive")
    assert proc.returncode == 2
    assert "unknown check(s) warp_drive" in proc.stderr


@pytest.mark.slow
def test_dry_run_on_cpu_of_every_check(tmp_path):
    proc = _run("--device", "cpu", "--quick", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = json.loads((tmp_path / "gpu_check.json").read_text())["checks"]
    assert all(c["status"] == "PASS" for c in checks.values()), checks


def test_dry_run_of_every_check(tmp_path):
    """Every check runs on the CPU at toy sizes, so that none rots unseen between GPU runs."""
    proc = _run("--device", "cpu", "--quick", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = json.loads((tmp_path / "gpu_check.json").read_text())["checks"]
    assert {name for name, c in checks.items() if c["status"] != "PASS"} == set()
