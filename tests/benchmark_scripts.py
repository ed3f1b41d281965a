"""The benchmark scripts (benchmarks/ is a folder of scripts, not a package) as modules."""

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
