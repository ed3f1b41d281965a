"""torchvision's RetinaNet and Faster R-CNN on a searched backbone + FPN (or a ResNet row).

- The searched backbone is ``genlab.nas.build_backbone`` at its default taps (DARTS ImageNet
  network: cells 3, 8, 13 at strides 8, 16, 32; MobileNet: the 40-, 96-, 320-channel stage
  ends), under ``FeatureFPN``: torchvision's ``FeaturePyramidNetwork`` over the taps, with
  ``LastLevelP6P7`` (P6, P7 from P5, torchvision's RetinaNet v1) for RetinaNet and
  ``LastLevelMaxPool`` for Faster R-CNN.
- The reference rows ``resnet18`` / ``resnet50``: torchvision's ResNet (``weights=None``),
  layers 2-4 (strides 8-32) under the same FeatureFPN, every layer trainable, BatchNorm
  trained (there are no pretrained statistics to freeze).
- RetinaNet keeps torchvision's defaults (4-conv heads, 9 anchors per place of sizes 32-512
  on P3-P7, focal loss gamma 2 alpha 0.25; ``head_norm="gn"`` adds GroupNorm to the head
  convolutions, as torchvision's RetinaNet v2, which lets a head fed by a narrow FPN or a
  backbone trained from scratch learn: without it the head's 0.01-std convolutions shrink
  the signal layer by layer); Faster R-CNN gets one anchor size per level
  (32-256 on P3-P5 and the pooled level, 3 aspect ratios) and RoIAlign on P3-P5.

``PackedDetector`` takes the Trainer's packed batches (records module): in training it
returns the summed losses, in evaluation the detections with labels 0..C-1 (Faster R-CNN's
background class 0 is shifted in and out here).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from genlab.nas.transfer.detection.records import unpack

RESNETS = ("resnet18", "resnet50")
DETECTORS = ("retinanet", "fasterrcnn")


class FeatureFPN(nn.Module):
    """A list-of-features backbone under torchvision's FPN; ``out_channels`` as torchvision
    detectors want."""

    def __init__(self, body: nn.Module, in_channels: list[int], out_channels: int, extra):
        super().__init__()
        from torchvision.ops import FeaturePyramidNetwork

        self.body, self.out_channels = body, out_channels
        self.fpn = FeaturePyramidNetwork(in_channels, out_channels, extra_blocks=extra)

    def forward(self, x: torch.Tensor) -> OrderedDict:
        feats = self.body(x)
        return self.fpn(OrderedDict((str(i), f) for i, f in enumerate(feats)))


def _extra(detector: str, channels: int):
    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool, LastLevelP6P7

    return LastLevelP6P7(channels, channels) if detector == "retinanet" else LastLevelMaxPool()


def searched_fpn(space: str, genotype: str, detector: str, fpn_channels: int, *,
                 channels: int | None = None, cells: int | None = None,
                 weights=None) -> FeatureFPN:
    from genlab.nas.spaces.backbone import build_backbone

    body = build_backbone(space, genotype, channels=channels, cells=cells, weights=weights)
    return FeatureFPN(body, body.feature_info.channels(), fpn_channels,
                      _extra(detector, fpn_channels))


class ResNetBody(nn.Module):
    """torchvision's ResNet (``weights=None``) as a list-of-features backbone: the outputs of
    layers 2, 3, 4 (strides 8, 16, 32); ``channels`` theirs."""

    def __init__(self, name: str):
        super().__init__()
        import torchvision

        net = getattr(torchvision.models, name)(weights=None)
        self.stem = nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool)
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            net.layer1, net.layer2, net.layer3, net.layer4)
        width = 1 if name == "resnet18" else 4  # BasicBlock / Bottleneck expansion
        self.channels = [128 * width, 256 * width, 512 * width]

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        c2 = self.layer1(self.stem(x))
        c3 = self.layer2(c2)
        c4 = self.layer3(c3)
        return [c3, c4, self.layer4(c4)]


def resnet_fpn(name: str, detector: str, fpn_channels: int) -> FeatureFPN:
    body = ResNetBody(name)
    return FeatureFPN(body, body.channels, fpn_channels, _extra(detector, fpn_channels))


def group_norm(channels: int) -> nn.Module:
    """GroupNorm with 32 groups (fewer when ``channels`` has no 32 groups), as torchvision's
    RetinaNet v2 head."""
    groups = 32
    while channels % groups:
        groups //= 2
    return nn.GroupNorm(groups, channels)


def detection_model(detector: str, backbone: nn.Module, num_classes: int, min_size: int,
                    max_size: int, head_norm: str = "none") -> nn.Module:
    """torchvision's ``detector`` on ``backbone`` (an FPN with ``out_channels``);
    ``head_norm="gn"``: RetinaNet's head convolutions with GroupNorm."""
    if detector == "retinanet":
        from torchvision.models.detection import RetinaNet
        from torchvision.models.detection.retinanet import RetinaNetHead

        head = RetinaNetHead(backbone.out_channels, 9, num_classes,
                             norm_layer=group_norm if head_norm == "gn" else None)
        return RetinaNet(backbone, num_classes, min_size=min_size, max_size=max_size,
                         head=head)
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.ops import MultiScaleRoIAlign

    anchors = AnchorGenerator(((32,), (64,), (128,), (256,)), ((0.5, 1.0, 2.0),) * 4)
    pool = MultiScaleRoIAlign(["0", "1", "2"], output_size=7, sampling_ratio=2)
    return FasterRCNN(backbone, num_classes + 1, min_size=min_size, max_size=max_size,
                      rpn_anchor_generator=anchors, box_roi_pool=pool)


class PackedDetector(nn.Module):
    """A torchvision detector fed packed batches (module docstring)."""

    def __init__(self, net: nn.Module, label_offset: int = 0):
        super().__init__()
        self.net, self.label_offset = net, label_offset

    def forward(self, images: torch.Tensor, targets: torch.Tensor):
        imgs, tgts, _ = unpack(images, targets)
        if self.training:
            for t in tgts:
                t["labels"] = t["labels"] + self.label_offset
            return sum(self.net(imgs, tgts).values())
        dets = self.net(imgs)
        for d in dets:
            d["labels"] = d["labels"] - self.label_offset
        return dets


def build_detector(detector: str, num_classes: int, *, backbone: str | None, space: str,
                   genotype: str | None, fpn_channels: int, min_size: int, max_size: int,
                   channels: int | None = None, cells: int | None = None, weights=None,
                   head_norm: str = "none") -> PackedDetector:
    """The whole model of a `genlab nas detect` run."""
    if backbone in RESNETS:
        fpn = resnet_fpn(backbone, detector, fpn_channels)
    else:
        fpn = searched_fpn(space, genotype, detector, fpn_channels, channels=channels,
                           cells=cells, weights=weights)
    net = detection_model(detector, fpn, num_classes, min_size, max_size, head_norm)
    return PackedDetector(net, label_offset=int(detector == "fasterrcnn"))
