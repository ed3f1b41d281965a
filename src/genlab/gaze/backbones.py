"""A ResNet-18-style convolutional backbone, written here (torchvision is not a dependency).

Shape (He et al., CVPR-16, ResNet-18): a stem, four stages of two BasicBlocks
([2, 2, 2, 2]) with widths w, 2w, 4w, 8w and strides 1, 2, 2, 2, global average
pooling. ``base_width`` 64 with ``stem="imagenet"`` (7x7 stride-2 conv + max-pool)
is the original; genlab's default is ``base_width=16`` and a 3x3 stride-2 stem
(our choice) so eye/face crops of a few dozen pixels train on a CPU. Any input
height and width work. Inputs are RGB in [0, 1]; they are centred at 0.5 inside.
"""

from __future__ import annotations

import torch
from torch import nn

from genlab.core.errors import require_choice, require_positive

STEMS = ("small", "imagenet")


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with an identity (or 1x1 projection) shortcut."""

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNetBackbone(nn.Module):
    """ResNet-18-style feature extractor: image (N,3,H,W) -> features (N, 8*base_width).

    ``forward(x, return_stages=True)`` also returns the four stages' feature maps
    (for branches that read earlier, more appearance-like features).
    """

    def __init__(
        self, base_width: int = 16, blocks=(2, 2, 2, 2), in_channels: int = 3, stem: str = "small"
    ):
        super().__init__()
        require_positive("width", base_width)
        require_choice("stem", stem, STEMS)
        if len(blocks) != 4 or any(b <= 0 for b in blocks):
            from genlab.core.errors import ConfigError

            raise ConfigError(f"blocks must be four positive counts, got {tuple(blocks)}")
        w = base_width
        if stem == "small":
            self.stem = nn.Sequential(
                nn.Conv2d(in_channels, w, 3, 2, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU()
            )
        else:
            self.stem = nn.Sequential(
                nn.Conv2d(in_channels, w, 7, 2, 3, bias=False),
                nn.BatchNorm2d(w),
                nn.ReLU(),
                nn.MaxPool2d(3, 2, 1),
            )
        widths = [w, 2 * w, 4 * w, 8 * w]
        stages, in_ch = [], w
        for i, (width, n) in enumerate(zip(widths, blocks, strict=True)):
            stride = 1 if i == 0 else 2
            layers = [BasicBlock(in_ch, width, stride)]
            layers += [BasicBlock(width, width) for _ in range(n - 1)]
            stages.append(nn.Sequential(*layers))
            in_ch = width
        self.stages = nn.ModuleList(stages)
        self.widths = widths
        self.out_dim = widths[-1]

    def forward(self, x: torch.Tensor, return_stages: bool = False):
        h = self.stem(x.contiguous() - 0.5)  # NCHW: see protocol._to_tensor_images
        maps = []
        for stage in self.stages:
            h = stage(h)
            maps.append(h)
        feats = h.mean(dim=(2, 3))
        return (feats, maps) if return_stages else feats
