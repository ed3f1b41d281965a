"""scikit-learn's digits (embedded, no download), resized and split as the package doc says."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from genlab.core.data.images import ImageData, inference_record
from genlab.core.data.splits import (
    TEST_FRACTION,
    Split,
    search_fractions,
    standardise,
    stratified_split,
)
from genlab.core.errors import ConfigError, require_positive


def digit_splits(size: int, seed: int, test_fraction: float = TEST_FRACTION
                 ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Digits in [0, 1] at ``size`` and labels, split train / val / test (not standardised)."""
    from sklearn.datasets import load_digits

    require_positive("size", size)
    if not 0 < test_fraction < 1:
        raise ConfigError(f"test_fraction must be in (0, 1), got {test_fraction}")
    bunch = load_digits()
    x = torch.from_numpy(bunch.images.astype(np.float32) / 16.0).unsqueeze(1)
    if size != 8:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    y = bunch.target.astype(np.int64)
    parts = stratified_split(y, search_fractions(test_fraction), seed)
    yt = torch.from_numpy(y)
    return [x[p] for p in parts], [yt[p] for p in parts]


def load_digits_data(size: int = 8, seed: int = 0, test_fraction: float = TEST_FRACTION
                     ) -> ImageData:
    """scikit-learn digits, resized to ``size`` and split train/val/test (see module doc)."""
    xs, ys = digit_splits(size, seed, test_fraction)
    mean = xs[0].mean(dim=(0, 2, 3))
    std = xs[0].std(dim=(0, 2, 3)).clamp_min(1e-6)
    xs = standardise(xs)
    # an image file of a digit: light ink on a dark ground, its pixels / 255 as the digits'
    # values / 16
    inference = inference_record([str(d) for d in range(10)], "L", size, mean, std)
    return ImageData(
        "digits", Split(xs[0], ys[0]), Split(xs[1], ys[1]), Split(xs[2], ys[2]), 10, 1, size,
        inference)


