"""A gaze reader is one module: it registers its data sets, and a data set without what a
reader must give is refused in one line when it is opened."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from genlab.core.errors import DataError
from genlab.gaze.data.realdata import REAL_DATASETS, open_real, register_reader


class Tiny(torch.utils.data.Dataset):
    def __init__(self, size):
        self.size = size
        self.gaze = np.zeros((3, 2), np.float32)
        self.subject = np.array([0, 0, 1])

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return torch.zeros(3, *self.size), torch.from_numpy(self.gaze[i])


@pytest.fixture()
def readers():
    register_reader("toy", "three blank faces", lambda root, size, labels: Tiny(size))
    register_reader("broken", "no subjects", lambda root, size, labels: object())
    yield
    for name in ("toy", "broken"):
        REAL_DATASETS.unregister(name)


def test_a_registered_reader_opens(readers, tmp_path):
    data = open_real(f"toy:{tmp_path}", (8, 8))
    assert len(data) == 3


def test_a_data_set_without_the_interface_is_refused(readers, tmp_path):
    with pytest.raises(DataError, match="the broken reader returned a data set without gaze, "
                                        "subject, __len__, __getitem__"):
        open_real(f"broken:{tmp_path}", (8, 8))
