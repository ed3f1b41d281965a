"""A ResNet-18-style backbone built from torchvision's ``BasicBlock``.

Shape (He et al., CVPR-16, ResNet-18): a stem, four stages of two BasicBlocks
([2, 2, 2, 2]) with widths w, 2w, 4w, 8w and strides 1, 2, 2, 2, global average
pooling. The blocks are ``torchvision.models.resnet.BasicBlock`` (torchvision is imported
when a backbone is built, not with this module); the stem and stage skeleton are ours
because torchvision's ``ResNet`` class is fixed at 64 channels and a 7x7 stem. Module
names are torchvision's ``resnet18`` (``conv1``, ``bn1``, ``layer1.0.conv1`` ...
``layer4.1.bn2``, ``layerN.0.downsample.0/1``): with ``width=64`` and ``stem="imagenet"``
the backbone is ``torchvision.models.resnet18(weights=None)`` without ``fc``, so a user's
state-dict file in that layout loads with :meth:`ResNetBackbone.load_pretrained` (its
``fc.*`` classifier is ignored; nothing is ever downloaded).

``width`` 64 with ``stem="imagenet"`` (7x7 stride-2 conv + 3x3 stride-2 max-pool) is
ResNet-18 itself; genlab's synthetic default is ``width=8``-16 with a 3x3 stride-2 stem
(our choice) so eye crops of a few dozen pixels train on a CPU. Inputs are RGB in
[0, 1]; ``input_norm`` centres them inside the model: "half" subtracts 0.5, "imagenet"
standardises with the ImageNet mean and std (what torchvision's pretrained weights expect).
Initialisation is PyTorch's default per layer (not torchvision's ``ResNet`` re-init), in
the order conv1, bn1, conv2, bn2, downsample within each block.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from genlab.core.errors import CheckpointError, ConfigError, require_choice, require_positive

STEMS = ("small", "imagenet")
INPUT_NORMS = ("half", "imagenet")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def basic_block(in_ch: int, out_ch: int, stride: int = 1) -> nn.Module:
    """torchvision's BasicBlock, with a 1x1 conv-BN ``downsample`` when the shape changes.

    The downsample is attached after the block is built (torchvision's ``_make_layer``
    builds it first), so the seeded initialisation draws conv1, bn1, conv2, bn2, then
    the downsample: the order genlab's backbone has always used.
    """
    from torchvision.models.resnet import BasicBlock, conv1x1  # ~3 s import: only when building

    block = BasicBlock(in_ch, out_ch, stride)
    if stride != 1 or in_ch != out_ch:
        block.downsample = nn.Sequential(conv1x1(in_ch, out_ch, stride), nn.BatchNorm2d(out_ch))
    return block


class ResNetBackbone(nn.Module):
    """ResNet-18-style feature extractor: image (N,3,H,W) -> features (N, 8*base_width).

    ``forward(x, return_stages=True)`` also returns the four stages' feature maps
    (for branches that read earlier, more appearance-like features).
    """

    def __init__(self, base_width: int = 16, blocks=(2, 2, 2, 2), in_channels: int = 3,
                 stem: str = "small", input_norm: str = "half"):
        super().__init__()
        require_positive("width", base_width)
        require_choice("stem", stem, STEMS)
        require_choice("input_norm", input_norm, INPUT_NORMS)
        if len(blocks) != 4 or any(b <= 0 for b in blocks):
            raise ConfigError(f"blocks must be four positive counts, got {tuple(blocks)}")
        w = base_width
        kernel, pad = (3, 1) if stem == "small" else (7, 3)
        self.conv1 = nn.Conv2d(in_channels, w, kernel, 2, pad, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.maxpool = nn.MaxPool2d(3, 2, 1) if stem == "imagenet" else nn.Identity()
        widths = [w, 2 * w, 4 * w, 8 * w]
        in_ch = w
        for i, (width, n) in enumerate(zip(widths, blocks, strict=True)):
            layers = [basic_block(in_ch, width, 1 if i == 0 else 2)]
            layers += [basic_block(width, width) for _ in range(n - 1)]
            self.add_module(f"layer{i + 1}", nn.Sequential(*layers))
            in_ch = width
        self.widths = widths
        self.out_dim = widths[-1]
        mean, std = ((0.5,) * 3, (1.0,) * 3) if input_norm == "half" else (IMAGENET_MEAN,
                                                                             IMAGENET_STD)
        self.register_buffer("input_mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("input_std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)

    @property
    def stages(self) -> list[nn.Sequential]:
        return [self.layer1, self.layer2, self.layer3, self.layer4]

    def forward(self, x: torch.Tensor, return_stages: bool = False):
        # NCHW-contiguous input: see genlab.gaze.data.images.rgb_to_tensor
        h = (x.contiguous() - self.input_mean) / self.input_std
        h = self.maxpool(torch.relu(self.bn1(self.conv1(h))))
        maps = []
        for stage in self.stages:
            h = stage(h)
            maps.append(h)
        feats = h.mean(dim=(2, 3))
        return (feats, maps) if return_stages else feats

    def load_pretrained(self, path: str | Path) -> list[str]:
        """Load a torchvision-layout ResNet state dict (``fc.*`` ignored); return loaded keys.

        The file is read with ``weights_only=True``; a dict holding the weights under
        "state_dict" or "model" is unwrapped, and a "module." prefix (DataParallel) is
        dropped. Missing keys and shape mismatches raise CheckpointError naming the file,
        the key and the expected shape.
        """
        path = Path(path)
        if not path.is_file():
            raise CheckpointError(f"{path}: no such pretrained weights file")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
            raise CheckpointError(f"{path}: not a readable state-dict file ({exc})") from exc
        for key in ("state_dict", "model"):
            if isinstance(state, dict) and isinstance(state.get(key), dict):
                state = state[key]
        if not isinstance(state, dict):
            raise CheckpointError(f"{path}: expected a state dict (name -> tensor)")
        state = {k.removeprefix("module."): v for k, v in state.items()}
        own = self.state_dict()
        missing = [k for k in own if k not in state]
        if missing:
            raise CheckpointError(
                f"{path}: {len(missing)} backbone weights missing (first: {missing[:3]}); "
                "expected torchvision's ResNet-18 layout (conv1, bn1, layer1.0.conv1, ...)"
            )
        for k, v in own.items():
            if tuple(state[k].shape) != tuple(v.shape):
                raise CheckpointError(
                    f"{path}: {k} has shape {tuple(state[k].shape)} but the backbone expects "
                    f"{tuple(v.shape)} (ResNet-18 weights need width 64 and the imagenet stem)"
                )
        self.load_state_dict({k: state[k] for k in own})
        return list(own)
