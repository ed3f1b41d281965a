"""Measuring curvature nonuniformity prints no FutureWarning from torch's forward-mode AD
(torch 2.14 loads its jvp decompositions with the deprecated torch.jit.script)."""

import subprocess
import sys

CODE = """
import torch
from torch import nn
from genlab.optim.measures.hessian import curvature_nonuniformity
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
print(curvature_nonuniformity(model, nn.CrossEntropyLoss(), x, y, iterations=3))
"""


def test_curvature_nonuniformity_in_a_fresh_process_warns_nothing():
    done = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", CODE],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "FutureWarning" not in done.stderr
