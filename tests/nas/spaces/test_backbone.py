"""Searched networks as detection backbones (genlab.nas.build_backbone): feature shapes, taps
against the full network's own intermediate outputs (forward hooks), weights from a whole
network's state dict or checkpoint, torchvision's FPN and a tiny RetinaNet on top."""

from collections import OrderedDict
from types import SimpleNamespace

import pytest
import torch
from nas_reference import DARTS_V2, NB201_CELL
from torch import nn

from genlab.core.errors import CheckpointError, ConfigError
from genlab.core.storage.checkpoints import model_record, save_checkpoint
from genlab.nas import build_backbone, get_space
from genlab.nas.spaces.backbone import Backbone

# 21 MobileNet choices; blocks 7 and 15 (the ends of the 40- and 96-wide stages) skipped, so
# two taps are a shortcut's output
MOBILE = ",".join(["3x3_MBConv3", "zero", "5x5_MBConv6", "7x7_MBConv3",
                   "5x5_MBConv3", "3x3_MBConv6", "zero", "zero",
                   "7x7_MBConv6", "zero", "3x3_MBConv3", "5x5_MBConv3",
                   "3x3_MBConv6", "5x5_MBConv6", "7x7_MBConv3", "zero",
                   "5x5_MBConv6", "3x3_MBConv3", "zero", "7x7_MBConv6", "3x3_MBConv6"])
# kind: (space, genotype, size options, input side, channels and strides of the default taps,
# where the full network holds each default tap: (module, "out" or "in" of it))
KINDS = {
    "darts": ("darts", DARTS_V2, {"channels": 8}, 64, [32, 64, 128], [8, 16, 32],
              [("cells.3", "out"), ("cells.8", "out"), ("cells.13", "out")]),
    "mobilenet": ("mobilenet", MOBILE, {"channels": 8}, 64, [16, 24, 80], [8, 16, 32],
                  [("blocks.8", "in"), ("blocks.16", "in"), ("feature_mix", "in")]),
    "nb201": ("nb201", NB201_CELL, {"channels": 8, "cells": 2}, 32, [8, 16, 32], [1, 2, 4],
              [("cells.1", "out"), ("cells.4", "out"), ("cells.7", "out")]),
}


def full_network(kind: str, seed: int) -> nn.Module:
    """The whole network (heads included, DARTS with its auxiliary head), random BN stats."""
    space, genotype, size, *_ = KINDS[kind]
    torch.manual_seed(seed)
    extra = {"layout": "imagenet", "auxiliary": True, "cells": 14} if kind == "darts" else {}
    net = get_space(space).build_network(genotype, 10, **size, **extra)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d) and m.running_mean is not None:
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    return net.eval()


def hooked_taps(net: nn.Module, kind: str, x: torch.Tensor) -> list[torch.Tensor]:
    """The default taps as the full network's forward computes them (forward hooks)."""
    modules, seen, handles = dict(net.named_modules()), {}, []
    for name, where in KINDS[kind][6]:
        if where == "out":
            hook = modules[name].register_forward_hook(
                lambda m, i, o, name=name: seen.__setitem__(name, o))
        else:
            hook = modules[name].register_forward_pre_hook(
                lambda m, i, name=name: seen.__setitem__(name, i[0]))
        handles.append(hook)
    with torch.no_grad():
        net(x)
    for h in handles:
        h.remove()
    return [seen[name] for name, _ in KINDS[kind][6]]


def small(kind: str, **kwargs) -> Backbone:
    space, genotype, size, *_ = KINDS[kind]
    return build_backbone(space, genotype, **size, **kwargs).eval()


def image(kind: str, batch: int = 2) -> torch.Tensor:
    torch.manual_seed(1)
    side = KINDS[kind][3]
    return torch.randn(batch, 3, side, side)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_feature_shapes_follow_the_feature_info(kind):
    _, _, _, side, channels, strides, _ = KINDS[kind]
    bb = small(kind)
    assert bb.feature_info.channels() == channels
    assert bb.feature_info.reduction() == strides
    with torch.no_grad():
        feats = bb(image(kind))
    assert [tuple(f.shape) for f in feats] == [(2, c, side // s, side // s)
                                               for c, s in zip(channels, strides, strict=True)]
    info = bb.feature_info
    assert [d.keys() >= {"num_chs", "reduction", "module"} for d in info.info] == [True] * len(info)
    assert info.channels(0) == info[0]["num_chs"] and len(info.out_indices) == 3


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_taps_are_the_full_networks_intermediate_outputs(kind):
    space, genotype, size, *_ = KINDS[kind]
    layout = get_space(space).feature_layout(genotype, **size)
    bb = Backbone(layout).eval()
    layout.network.eval()  # shares every backbone module
    x = image(kind)
    truth = hooked_taps(layout.network, kind, x)
    with torch.no_grad():
        feats = bb(x)
    for f, t in zip(feats, truth, strict=True):
        torch.testing.assert_close(f, t, rtol=0, atol=0)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_whole_networks_weights_load_and_give_its_taps(kind, tmp_path):
    net = full_network(kind, seed=3)
    x = image(kind)
    truth = hooked_taps(net, kind, x)
    bb = small(kind, weights=net.state_dict())
    with torch.no_grad():
        for f, t in zip(bb(x), truth, strict=True):
            torch.testing.assert_close(f, t)
    # a training checkpoint (its model record names the entry) through its run folder
    record = model_record("nas train", "genlab.nas.spaces:build_space_network", {},
                          state_key="weights")
    save_checkpoint(tmp_path / "checkpoint.pt", {"weights": net.state_dict(),
                                                 "model_record": record})
    with torch.no_grad():
        torch.testing.assert_close(small(kind, weights=tmp_path)(x)[0], truth[0])
    # a backbone cut after its first default tap still loads the whole network's weights
    first = small(kind, out_indices=(bb.feature_info.out_indices[0],),
                  weights=net.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(first(x)[0], truth[0])
    assert sum(p.numel() for p in first.parameters()) < sum(p.numel() for p in bb.parameters())


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_state_dict_that_does_not_fit_is_refused(kind):
    state = full_network(kind, seed=3).state_dict()
    bb = small(kind)
    key = next(k for k in state if k.endswith("weight") and not k.startswith(("classifier",
                                                                             "head")))
    with pytest.raises(CheckpointError, match=f"missing backbone key.*{key}"):
        bb.load_network_state({k: v for k, v in state.items() if k != key})
    with pytest.raises(CheckpointError, match="unexpected key.*stem_extra.weight"):
        bb.load_network_state({**state, "stem_extra.weight": torch.zeros(1)})
    with pytest.raises(CheckpointError, match=f"{key} has shape"):
        bb.load_network_state({**state, key: torch.zeros(1)})


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_torchvision_fpn_takes_the_features(kind):
    from torchvision.ops import FeaturePyramidNetwork

    bb = small(kind)
    fpn = FeaturePyramidNetwork(in_channels_list=bb.feature_info.channels(), out_channels=32)
    x = image(kind)
    with torch.no_grad():
        out = fpn(OrderedDict((str(i), f) for i, f in enumerate(bb(x))))
    side = KINDS[kind][3]
    assert [tuple(v.shape) for v in out.values()] == [
        (2, 32, side // s, side // s) for s in bb.feature_info.reduction()]


class WithFPN(nn.Module):
    """torchvision's BackboneWithFPN, for a backbone that returns a list."""

    def __init__(self, body: Backbone, out_channels: int):
        from torchvision.ops import FeaturePyramidNetwork
        from torchvision.ops.feature_pyramid_network import LastLevelP6P7

        super().__init__()
        self.body, self.out_channels = body, out_channels
        self.fpn = FeaturePyramidNetwork(body.feature_info.channels(), out_channels,
                                         extra_blocks=LastLevelP6P7(out_channels, out_channels))

    def forward(self, x):
        return self.fpn(OrderedDict((str(i), f) for i, f in enumerate(self.body(x))))


@pytest.mark.parametrize("kind", ["darts", "mobilenet"])
def test_a_tiny_retinanet_trains_on_the_backbone(kind):
    from torchvision.models.detection import RetinaNet

    torch.manual_seed(0)
    model = RetinaNet(WithFPN(small(kind), 16), num_classes=3, min_size=64, max_size=64).train()
    images = [torch.rand(3, 64, 64), torch.rand(3, 64, 64)]
    targets = [{"boxes": torch.tensor([[4.0, 6.0, 40.0, 50.0]]), "labels": torch.tensor([1])},
               {"boxes": torch.tensor([[10.0, 10.0, 30.0, 20.0], [0.0, 32.0, 60.0, 63.0]]),
                "labels": torch.tensor([2, 1])}]
    losses = model(images, targets)
    assert set(losses) == {"classification", "bbox_regression"}
    assert all(torch.isfinite(v) for v in losses.values())
    sum(losses.values()).backward()
    assert model.backbone.body.cells[0].preprocess1.op[1].weight.grad is not None \
        if kind == "darts" else model.backbone.body.first_conv[0].weight.grad is not None


@pytest.mark.parametrize("bad", [(1, 4), (2, 1), (1, 1), (), (-1,), ("1",), 2, (True, 2)])
def test_bad_out_indices_are_refused(bad):
    with pytest.raises(ConfigError, match="out_indices"):
        small("darts", out_indices=bad)


def test_a_space_without_a_backbone_names_those_with_one():
    toy = SimpleNamespace(name="toy", feature_layout=lambda *a, **k: None)
    names = "darts, darts-7op, mobilenet, nb201, s1, s2, s3, s4"  # sorted, whatever loaded first
    with pytest.raises(ConfigError, match=rf"toy offers no backbone; spaces with one: {names}$"):
        build_backbone(toy, "anything")


def test_default_sizes_are_the_upstream_imagenet_networks_without_heads():
    bb = build_backbone("darts", DARTS_V2)
    assert bb.feature_info.channels() == [192, 384, 768]  # 4 nodes x 48, 96, 192 channels
    assert bb.feature_info.reduction() == [8, 16, 32]
    assert bb.feature_info.module_name() == ["cells.3", "cells.8", "cells.13"]
    net = get_space("darts").build_network(DARTS_V2, 1000, channels=48, cells=14,
                                           layout="imagenet", auxiliary=True)
    heads = sum(p.numel() for m in (net.classifier, net.auxiliary_head) for p in m.parameters())
    count = sum(p.numel() for p in bb.parameters())
    assert count == sum(p.numel() for p in net.parameters()) - heads == 3_949_752
    mobile = build_backbone("mobilenet", MOBILE)
    assert mobile.feature_info.channels() == [40, 96, 320]
    assert mobile.feature_info.reduction() == [8, 16, 32]
    assert build_backbone("nb201", NB201_CELL).feature_info.channels() == [16, 32, 64]
