"""`genlab nas detect` under `torchrun --nproc_per_node 2` (gloo): the Trainer splits each
global batch over the ranks, the evaluation splits the images and gathers the detections;
one run folder, one summary, printed once."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nas_reference import DARTS_V2

TORCHRUN = Path(sys.executable).parent / "torchrun"
GENLAB = Path(sys.executable).parent / "genlab"
pytestmark = pytest.mark.skipif(not TORCHRUN.exists(), reason="torchrun not in the venv")


def test_two_processes_write_one_summary(tmp_path):
    out = tmp_path / "ddp"
    cmd = [str(TORCHRUN), "--standalone", "--nproc_per_node", "2", str(GENLAB), "nas", "detect",
           DARTS_V2, "--data", "synthetic:8", "--channels", "8", "--cells", "5",
           "--fpn-channels", "16", "--batch-size", "4", "--max-steps", "2", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GENLAB_QUIET": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("trivial mAP@0.5") == 1  # rank 1 stays silent
    s = json.loads((out / "summary.json").read_text())
    assert s["processes"] == 2 and s["steps"] == 2 and s["eval_images"] == 16
    assert [json.loads(m)["iteration"] for m in
            (out / "metrics.jsonl").read_text().splitlines()] == [2]
