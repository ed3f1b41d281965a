"""A fixed torch thread count for the duration of a run, restored afterwards."""

import pytest
import torch

from genlab.core.errors import ConfigError
from genlab.core.seeding import fixed_threads


def test_fixed_threads_sets_and_restores():
    before = torch.get_num_threads()
    with fixed_threads(2):
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), fixed_threads(3):  # restored on errors too
        assert torch.get_num_threads() == 3
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_fixed_threads_refuses_negative_and_non_integers(bad):
    with pytest.raises(ConfigError, match="threads"), fixed_threads(bad):
        pass


def test_fixed_threads_zero_leaves_torchs_default():
    before = torch.get_num_threads()
    with fixed_threads(0):
        assert torch.get_num_threads() == before
    assert torch.get_num_threads() == before
