"""Candidate operations of the cell spaces (NB201, DARTS, RobustDARTS) and their registry.

``OPS`` (a core.registry Registry) maps names to ``factory(C_in, C_out, stride, affine)``
(``build_op`` builds one); a space names the ops it offers.
Definitions follow the reference code (sources in the shared spaces specification):

- NAS-Bench-201 (Dong & Yang, ICLR-20; AutoDL-Projects): ``nor_conv_kxk`` = ReLU -> Conv(k x k,
  'same' padding) -> BN, the conv with a bias only when the BN has no affine parameters;
  ``avg_pool_3x3`` = AvgPool(3, padding 1, padding not counted); ``skip_connect`` = identity;
  ``none`` = zero; the residual block between stages (ReLU-Conv3x3(stride 2)-BN,
  ReLU-Conv3x3-BN, shortcut AvgPool2 + Conv1x1).
- DARTS (Liu et al., ICLR-19; quark0/darts operations.py): ``sep_conv_kxk`` = twice
  (ReLU -> depthwise k x k -> pointwise 1x1 -> BN), the stride in the first depthwise conv only;
  ``dil_conv_kxk`` = ReLU -> depthwise k x k dilation 2 -> pointwise -> BN; ``max_pool_3x3``;
  ``skip_connect`` at stride 2 = FactorizedReduce (two 1x1 stride-2 convs, the second on the
  input shifted by one pixel, concatenated, BN). Every conv has no bias.
- RobustDARTS (Zela et al., ICLR-20; automl/RobustDARTS operations.py): ``noise`` = i.i.d.
  N(0, 1) of the (strided) input's shape; it ignores its input, carries no gradient and is
  active in evaluation too.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from genlab.core.errors import ConfigError
from genlab.core.registry import Registry

OpFactory = Callable[[int, int, int, bool], nn.Module]  # (C_in, C_out, stride, affine)
OPS: Registry[OpFactory] = Registry("op")
CONV_KERNELS = {"nor_conv_1x1": 1, "nor_conv_3x3": 3}
# (kernel, dilation) of the DARTS convolutions
SEP_CONVS = {"sep_conv_3x3": 3, "sep_conv_5x5": 5}
DIL_CONVS = {"dil_conv_3x3": 3, "dil_conv_5x5": 5}
POOLS = ("max_pool_3x3", "avg_pool_3x3")
PARAM_FREE_OPS = frozenset({"none", "skip_connect", "avg_pool_3x3", "max_pool_3x3", "noise"})


def register_op(name: str):
    """Decorator: register ``factory(C_in, C_out, stride, affine)`` under ``name``."""

    return OPS.register(name)


def build_op(name: str, c_in: int, c_out: int, stride: int = 1, affine: bool = True) -> nn.Module:
    """One registered op; ConfigError naming the op for unknown names."""
    return OPS.get(name)(c_in, c_out, stride, affine)


# -- building blocks ----------------------------------------------------------------
class ReLUConvBN(nn.Module):
    """ReLU -> Conv2d -> BatchNorm2d. ``bias=None``: a conv bias only without an affine BN."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int = 1,
                 affine: bool = True, track_running_stats: bool = True,
                 bias: bool | None = None):
        super().__init__()
        self.op = nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_out, kernel_size, stride=stride, padding=kernel_size // 2,
                      bias=(not affine) if bias is None else bias),
            nn.BatchNorm2d(c_out, affine=affine, track_running_stats=track_running_stats),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


class Zero(nn.Module):
    """The `none` op: zeros of the (strided) input's shape, ``C_out`` channels."""

    def __init__(self, stride: int = 1, c_out: int | None = None):
        super().__init__()
        self.stride, self.c_out = stride, c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x if self.stride == 1 else x[:, :, ::self.stride, ::self.stride]
        if self.c_out is None or self.c_out == x.shape[1]:
            return x.mul(0.0)
        return x.new_zeros(x.shape[0], self.c_out, *x.shape[2:])


class AvgPool3x3(nn.AvgPool2d):
    """avg_pool_3x3; border windows average only the pixels inside the image."""

    def __init__(self, stride: int = 1):
        super().__init__(3, stride=stride, padding=1, count_include_pad=False)


class FactorizedReduce(nn.Module):
    """Halve the resolution: ReLU, two 1x1 stride-2 convs (one on the shifted input), cat, BN."""

    def __init__(self, c_in: int, c_out: int, affine: bool = True):
        super().__init__()
        if c_out % 2:
            raise ConfigError(f"FactorizedReduce needs an even number of output channels, "
                              f"got {c_out}")
        self.relu = nn.ReLU(inplace=False)
        self.conv_1 = nn.Conv2d(c_in, c_out // 2, 1, stride=2, bias=False)
        self.conv_2 = nn.Conv2d(c_in, c_out // 2, 1, stride=2, bias=False)
        self.bn = nn.BatchNorm2d(c_out, affine=affine)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(x)
        return self.bn(torch.cat([self.conv_1(x), self.conv_2(shifted(x))], dim=1))


def shifted(x: torch.Tensor) -> torch.Tensor:
    """x[:, :, 1:, 1:], zero-padded back to even size for odd inputs (same output size)."""
    y = x[:, :, 1:, 1:]
    pad_h, pad_w = x.shape[2] % 2, x.shape[3] % 2
    if pad_h or pad_w:
        y = nn.functional.pad(y, (0, pad_w, 0, pad_h))
    return y


class SepConv(nn.Module):
    """DARTS separable conv: (ReLU, depthwise k x k, pointwise, BN) twice; stride in the first."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, affine: bool = True):
        super().__init__()
        pad = kernel // 2
        self.op = nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_in, kernel, stride, pad, groups=c_in, bias=False),
            nn.Conv2d(c_in, c_in, 1, bias=False),
            nn.BatchNorm2d(c_in, affine=affine),
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_in, kernel, 1, pad, groups=c_in, bias=False),
            nn.Conv2d(c_in, c_out, 1, bias=False),
            nn.BatchNorm2d(c_out, affine=affine),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


class DilConv(nn.Module):
    """DARTS dilated conv: ReLU, depthwise k x k with dilation 2, pointwise, BN."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, affine: bool = True):
        super().__init__()
        self.op = nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_in, kernel, stride, 2 * (kernel // 2), dilation=2, groups=c_in,
                      bias=False),
            nn.Conv2d(c_in, c_out, 1, bias=False),
            nn.BatchNorm2d(c_out, affine=affine),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


def draw_noise(shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """i.i.d. N(0, 1) of ``shape`` from the global generator (one place to replace in tests)."""
    return torch.randn(shape, dtype=like.dtype, device=like.device)


class Noise(nn.Module):
    """RobustDARTS `noise`: N(0, 1) of the strided input's shape, no gradient, also in eval."""

    def __init__(self, stride: int = 1, c_out: int | None = None):
        super().__init__()
        self.stride, self.c_out = stride, c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        s = self.stride
        shape = (n, self.c_out or c, (h + s - 1) // s, (w + s - 1) // s)
        return draw_noise(shape, x)


# -- the registry -----------------------------------------------------------------------
def _same_shape(name: str, c_in: int, c_out: int, stride: int) -> None:
    if c_in != c_out or stride != 1:
        raise ConfigError(f"op {name} keeps the shape: needs C_in == C_out and stride 1, got "
                          f"C_in {c_in}, C_out {c_out}, stride {stride}")


register_op("none")(lambda c_in, c_out, stride, affine: Zero(stride, c_out))
register_op("noise")(lambda c_in, c_out, stride, affine: Noise(stride, c_out))


@register_op("skip_connect")
def _skip(c_in: int, c_out: int, stride: int, affine: bool) -> nn.Module:
    if stride == 1 and c_in == c_out:
        return nn.Identity()
    if stride == 2:
        return FactorizedReduce(c_in, c_out, affine)
    raise ConfigError(f"skip_connect from {c_in} to {c_out} channels at stride {stride}")


@register_op("avg_pool_3x3")
def _avg_pool(c_in: int, c_out: int, stride: int, affine: bool) -> nn.Module:
    if c_in != c_out:  # NB201: a 1x1 projection first when the widths differ
        return nn.Sequential(ReLUConvBN(c_in, c_out, 1, 1, affine), AvgPool3x3(stride))
    return AvgPool3x3(stride)


@register_op("max_pool_3x3")
def _max_pool(c_in: int, c_out: int, stride: int, affine: bool) -> nn.Module:
    _same_shape("max_pool_3x3", c_in, c_out, 1)
    return nn.MaxPool2d(3, stride=stride, padding=1)


def _register_convs() -> None:
    for name, k in CONV_KERNELS.items():
        register_op(name)(lambda c_in, c_out, stride, affine, k=k:
                          ReLUConvBN(c_in, c_out, k, stride, affine))
    for name, k in SEP_CONVS.items():
        register_op(name)(lambda c_in, c_out, stride, affine, k=k:
                          SepConv(c_in, c_out, k, stride, affine))
    for name, k in DIL_CONVS.items():
        register_op(name)(lambda c_in, c_out, stride, affine, k=k:
                          DilConv(c_in, c_out, k, stride, affine))


_register_convs()


def make_op(name: str, channels: int, affine: bool = True,
            track_running_stats: bool = True) -> nn.Module:
    """One NB201 candidate op at stride 1 with ``channels`` in and out."""
    nb201 = ("none", "skip_connect", *CONV_KERNELS, "avg_pool_3x3")
    if name not in nb201:
        raise ConfigError(f"unknown NB201 op {name!r}; expected one of: {', '.join(nb201)}")
    if name in CONV_KERNELS:
        return ReLUConvBN(channels, channels, CONV_KERNELS[name], 1, affine, track_running_stats)
    return build_op(name, channels, channels, 1, affine)


# -- the NB201 macro skeleton ----------------------------------------------------------
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
