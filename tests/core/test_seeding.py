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


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_fixed_threads_refuses_non_positive_integers(bad):
    with pytest.raises(ConfigError, match="threads"), fixed_threads(bad):
        pass
