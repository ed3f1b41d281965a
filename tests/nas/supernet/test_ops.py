"""NB201 candidate ops and blocks against hand computations."""

import pytest
import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError
from genlab.nas.spaces.nb201.supernet import SearchCell
from genlab.nas.supernet.ops import (
    AvgPool3x3,
    ReLUConvBN,
    ResidualBlock,
    Zero,
    make_op,
    stage_channels,
)


def _brute_avg_pool(x):
    """3x3 stride-1 mean over the pixels inside the image, by explicit loops."""
    n, c, h, w = x.shape
    out = torch.empty_like(x)
    for i in range(h):
        for j in range(w):
            win = x[:, :, max(i - 1, 0):i + 2, max(j - 1, 0):j + 2]
            out[:, :, i, j] = win.mean(dim=(2, 3))
    return out


def test_avg_pool_excludes_padding():
    x = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    torch.testing.assert_close(AvgPool3x3()(x), _brute_avg_pool(x))
    ones = torch.ones(1, 1, 4, 4)
    assert torch.equal(AvgPool3x3()(ones), ones)  # corners average 4 pixels, not 9


def test_supernet_pool_path_equals_brute_force():
    cell = SearchCell(3).double()
    x = torch.randn(2, 3, 5, 5, dtype=torch.float64)
    sums = cell._pool_sums(x) * cell._inverse_counts(x)
    torch.testing.assert_close(sums, _brute_avg_pool(x))


def test_zero_identity_and_unknown_op():
    x = torch.randn(2, 3, 4, 4)
    assert torch.equal(Zero()(x), torch.zeros_like(x))
    assert make_op("skip_connect", 3)(x) is x
    with pytest.raises(ConfigError, match="sep_conv_3x3"):
        make_op("sep_conv_3x3", 3)


def test_relu_conv_bn_bias_only_without_affine():
    affine = ReLUConvBN(4, 5, 3)
    plain = ReLUConvBN(4, 5, 1, affine=False)
    assert affine.op[1].bias is None and affine.op[2].weight is not None
    assert plain.op[1].bias is not None and plain.op[2].weight is None
    x = torch.randn(8, 4, 6, 6)
    y = affine(x)
    expected = F.batch_norm(F.conv2d(x.clamp(min=0), affine.op[1].weight, padding=1), None,
                            None, training=True)
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)


def test_residual_block_by_hand():
    torch.manual_seed(0)
    block = ResidualBlock(3, 6, 2).double()
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64)

    def bn(t):
        return F.batch_norm(t, None, None, training=True)

    a = bn(F.conv2d(x.clamp(min=0), block.conv_a.op[1].weight, stride=2, padding=1))
    b = bn(F.conv2d(a.clamp(min=0), block.conv_b.op[1].weight, padding=1))
    shortcut = F.conv2d(F.avg_pool2d(x, 2), block.downsample[1].weight)
    torch.testing.assert_close(block(x), shortcut + b)
    assert block(x).shape == (4, 6, 4, 4)


def test_stage_channels_layout():
    assert stage_channels(16, 2) == [(16, False)] * 2 + [(32, True)] + [(32, False)] * 2 + [
        (64, True)] + [(64, False)] * 2
