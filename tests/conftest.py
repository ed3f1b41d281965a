"""Shared fixtures: small thread count, quiet progress, a synthetic NB201 table."""

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("GENLAB_QUIET", "1")
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]

from nb201_world import write_nb201_table  # noqa: E402 - tests/ is on the path


@pytest.fixture(scope="session")
def nb201_table(tmp_path_factory) -> Path:
    """Path of the synthetic NAS-Bench-201 accuracy table (written once per session)."""
    return write_nb201_table(tmp_path_factory.mktemp("nb201") / "nb201_accuracy.csv")
