"""Shared fixtures: small thread count, quiet progress, the shared NB201 table if present."""

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("GENLAB_QUIET", "1")
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
_TABLE_CANDIDATES = [
    os.environ.get("GENLAB_NB201_TABLE", ""),
    str(REPO.parent / "shared" / "data" / "nb201_accuracy.csv"),
]


@pytest.fixture(scope="session")
def nb201_table() -> Path:
    """Path of the NAS-Bench-201 accuracy table; tests needing it skip when it is absent."""
    for cand in _TABLE_CANDIDATES:
        if cand and Path(cand).is_file():
            return Path(cand)
    pytest.skip("NB201 accuracy table not available (set GENLAB_NB201_TABLE)")
