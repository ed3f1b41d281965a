"""Candidate operations of the NAS-Bench-201 cell and the blocks of its macro skeleton.

Follows the NB201 reference definitions (Dong & Yang, ICLR-20):
- nor_conv_kxk = ReLU -> Conv(k x k, stride 1, 'same' padding) -> BatchNorm; the conv has a bias
  only when the BN has no affine parameters (a bias before an affine BN is redundant);
- avg_pool_3x3 = AvgPool(3, stride 1, padding 1, padding not counted);
- skip_connect = identity, none = zero;
- residual block = ReLU-Conv3x3(stride 2)-BN, ReLU-Conv3x3-BN, plus shortcut AvgPool2 + Conv1x1.
"""

from __future__ import annotations

import torch
from torch import nn

from genlab.core.errors import ConfigError

CONV_KERNELS = {"nor_conv_1x1": 1, "nor_conv_3x3": 3}


class ReLUConvBN(nn.Module):
    """ReLU -> Conv2d -> BatchNorm2d (NB201's nor_conv_kxk and the residual block's halves)."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int = 1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__()
        self.op = nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_out, kernel_size, stride=stride, padding=kernel_size // 2,
                      bias=not affine),
            nn.BatchNorm2d(c_out, affine=affine, track_running_stats=track_running_stats),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


class Zero(nn.Module):
    """The `none` op: a zero tensor of the input's shape."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul(0.0)


class AvgPool3x3(nn.AvgPool2d):
    """avg_pool_3x3 at stride 1; border windows average only the pixels inside the image."""

    def __init__(self):
        super().__init__(3, stride=1, padding=1, count_include_pad=False)


def make_op(name: str, channels: int, affine: bool = True,
            track_running_stats: bool = True) -> nn.Module:
    """One NB201 candidate op at stride 1 with ``channels`` in and out."""
    if name == "none":
        return Zero()
    if name == "skip_connect":
        return nn.Identity()
    if name == "avg_pool_3x3":
        return AvgPool3x3()
    if name in CONV_KERNELS:
        return ReLUConvBN(channels, channels, CONV_KERNELS[name], 1, affine, track_running_stats)
    raise ConfigError(f"unknown NB201 op {name!r}; expected one of: none, skip_connect, "
                      f"{', '.join(CONV_KERNELS)}, avg_pool_3x3")


class ResidualBlock(nn.Module):
    """NB201's stride-2 residual block between stages (doubles the channels)."""

    def __init__(self, c_in: int, c_out: int, stride: int = 2):
        super().__init__()
        self.conv_a = ReLUConvBN(c_in, c_out, 3, stride)
        self.conv_b = ReLUConvBN(c_out, c_out, 3, 1)
        if stride == 2:
            self.downsample = nn.Sequential(nn.AvgPool2d(2, stride=2, padding=0),
                                            nn.Conv2d(c_in, c_out, 1, bias=False))
        elif c_in != c_out:
            self.downsample = ReLUConvBN(c_in, c_out, 1, 1)
        else:
            self.downsample = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv_b(self.conv_a(x))
        shortcut = x if self.downsample is None else self.downsample(x)
        return shortcut + out


class Stem(nn.Sequential):
    """conv3x3 (in_channels -> C, no bias) + BatchNorm."""

    def __init__(self, in_channels: int, channels: int):
        super().__init__(nn.Conv2d(in_channels, channels, 3, padding=1, bias=False),
                         nn.BatchNorm2d(channels))


class Head(nn.Module):
    """BN-ReLU, global average pool, linear classifier."""

    def __init__(self, channels: int, num_classes: int):
        super().__init__()
        self.lastact = nn.Sequential(nn.BatchNorm2d(channels), nn.ReLU(inplace=True))
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.lastact(x).mean(dim=(2, 3)))


def stage_channels(C: int, N: int) -> list[tuple[int, bool]]:
    """(channels, is_residual_block) of each macro layer after the stem: N cells, res, N, res, N."""
    layers = [(C, False)] * N + [(2 * C, True)] + [(2 * C, False)] * N
    return layers + [(4 * C, True)] + [(4 * C, False)] * N
