"""genlab.core.data.shapes: the rendered objects-with-parts data set (and its NAS entry)."""

import pytest
import torch

from genlab.core.data.shapes import (
    CLASS_NAMES,
    NUM_CLASSES,
    TEMPLATES,
    hsv_to_rgb,
    render_class,
    render_shapes,
)
from genlab.core.errors import ConfigError
from genlab.core.seeding import make_generator


def test_deterministic_per_seed_balanced_and_in_range():
    x, y = render_shapes(12, size=16, seed=3)
    assert x.shape == (120, 3, 16, 16) and x.dtype == torch.float32
    assert torch.equal(torch.bincount(y), torch.full((NUM_CLASSES,), 12))
    assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0
    again, _ = render_shapes(12, size=16, seed=3)
    other, _ = render_shapes(12, size=16, seed=4)
    assert torch.equal(x, again)
    assert not torch.equal(x, other)
    assert len(CLASS_NAMES) == len(TEMPLATES) == NUM_CLASSES


def test_hsv_to_rgb_at_the_primaries_and_grey():
    h = torch.tensor([0.0, 1 / 3, 2 / 3, 0.5])
    rgb = hsv_to_rgb(h, torch.tensor([1.0, 1.0, 1.0, 0.0]), torch.tensor([1.0, 1.0, 1.0, 0.4]))
    expected = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [0.4, 0.4, 0.4]])
    assert torch.allclose(rgb, expected, atol=1e-6)


def test_the_class_is_in_the_shape_not_only_in_the_colour():
    # the same generator stream renders two classes: their pixels differ where the parts
    # differ; the mean colour of two classes a hue step apart overlaps within one class's
    # spread (a colour histogram alone cannot separate them)
    a = render_class(0, 200, 16, make_generator(0, 1))
    b = render_class(1, 200, 16, make_generator(0, 1))
    assert (a - b).abs().mean() > 0.01
    mean_a, mean_b = a.mean(dim=(2, 3)), b.mean(dim=(2, 3))
    gap = (mean_a.mean(0) - mean_b.mean(0)).norm()
    assert gap < mean_a.std(0).norm()


def test_bad_sizes_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="--size 12 or more"):
        render_shapes(2, size=8)
    with pytest.raises(ConfigError):
        render_shapes(0)


def test_a_splits_first_rows_hold_every_class():
    from genlab.core.data.shapes import load_shapes_data

    data = load_shapes_data(12, seed=1, per_class=40)
    for split in (data.train, data.val):
        assert len(set(split.labels[:64].tolist())) == NUM_CLASSES
    assert torch.equal(torch.bincount(data.test.labels), torch.full((NUM_CLASSES,), 8))
