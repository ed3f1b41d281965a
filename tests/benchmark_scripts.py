"""The benchmark scripts (benchmarks/ is a folder of scripts, not a package) as modules, and a
stand-in for an authors' checkout that benchmarks/nas_side_by_side.py loads."""

import importlib
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name: str):
    """Import benchmarks/<name>.py (its own imports of its neighbours resolve too)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


FAKE_AUTODL = '''import torch
from torch import nn
from ..cell_operations import SearchSpaceNames


class TinyNetworkDarts(nn.Module):
    def __init__(self, C, N, max_nodes, num_classes, search_space, affine, track_running_stats):
        super().__init__()
        assert search_space == SearchSpaceNames["nas-bench-201"]
        self.args = (C, N, max_nodes, num_classes, affine, track_running_stats)
        self.conv = nn.Conv2d(3, C, 3, padding=1)
        self.classifier = nn.Linear(C, num_classes)
        self.arch_parameters = nn.Parameter(1e-3 * torch.randn(6, len(search_space)))

    def get_weights(self):
        return list(self.conv.parameters()) + list(self.classifier.parameters())

    def get_alphas(self):
        return [self.arch_parameters]

    def forward(self, x):
        out = self.conv(x).mean((2, 3)) * self.arch_parameters.softmax(-1)[0, 0]
        return out, self.classifier(out)
'''


def fake_autodl(root: Path, package: str = "xautodl") -> Path:
    """A stand-in AutoDL-Projects checkout: ``xautodl/`` (the current layout) or ``lib/``."""
    models = root / package / "models" if package == "xautodl" else root / "lib" / "models"
    (models / "cell_searchs").mkdir(parents=True)
    if package == "xautodl":
        (root / "xautodl" / "__init__.py").write_text("")
    (models / "__init__.py").write_text("")
    (models / "cell_operations.py").write_text(
        "SearchSpaceNames = {'nas-bench-201': ['none', 'skip_connect', 'nor_conv_3x3']}\n")
    (models / "cell_searchs" / "__init__.py").write_text("")
    (models / "cell_searchs" / "search_model_darts.py").write_text(FAKE_AUTODL)
    return root
