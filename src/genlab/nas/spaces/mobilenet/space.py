"""The MobileNet-like space (ProxylessNAS layout; the definition: spaces.mobilenet.network).

21 searchable inverted-residual blocks; alphas "skippable" (15 blocks x {6 MBConvs, zero})
and "transition" (6 width- or stride-changing blocks x 6 MBConvs); derivation argmax per
block; genotype text: the 21 choices comma-separated in block order. ``channels`` is the width
of the first conv (32 upstream; every width scales with it); the search and the network take
``stem="cifar"`` (first conv at stride 1) for CIFAR-sized inputs beside the ImageNet stem.
Parameter-free choices counted by ``op_counts`` are the skipped (`zero`) blocks.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from genlab.nas.spaces.base import (
    AlphaSpec,
    ProxyDefaults,
    ReferenceNetwork,
    RetrainRecipe,
    SearchSpace,
    register_space,
)
from genlab.nas.spaces.mobilenet.network import (
    MB_OPS,
    SKIPPABLE_OPS,
    ZERO,
    MobileNetGenotype,
    MobileNetNetwork,
    MobileNetSuperNet,
    derive_mobilenet_genotype,
    layout,
    mobilenet_feature_layout,
    parse_mobilenet_genotype,
)


class MobileNetSpace(SearchSpace):
    """The MobileNet-like space (module docstring)."""

    name = "mobilenet"
    description = ("MobileNet-like (ProxylessNAS): 21 inverted-residual blocks, MBConv "
                   "k{3,5,7} x e{3,6}, zero where the block keeps its shape")
    upstream = {"channels": 32, "cells": None}
    # Digits proxy (ours): first width 8 (all widths / 4), CIFAR stem, 16x16 inputs.
    proxy = ProxyDefaults(size=16, channels=8, cells=None, steps=200, options={"stem": "cifar"})
    # ProxylessNAS' mobile setting: ImageNet-1k at 224x224, width multiplier 1.
    reference = ReferenceNetwork(num_classes=1000, size=224, options={"stem": "imagenet"})
    retrain = RetrainRecipe(channels=16, cells=None, epochs=30, lr=0.05, nesterov=True,
                            weight_decay=4e-5, extra={"stem": "cifar"})

    def alpha_specs(self) -> dict[str, AlphaSpec]:
        blocks = layout()[2]
        rows = {True: [], False: []}
        for b in blocks:
            rows[b.skippable].append(f"block {b.index}")
        return {"skippable": AlphaSpec(tuple(rows[True]), (SKIPPABLE_OPS,) * len(rows[True])),
                "transition": AlphaSpec(tuple(rows[False]), (MB_OPS,) * len(rows[False]))}

    def build_supernet(self, num_classes: int = 10, in_channels: int = 3,
                       channels: int | None = None, cells: int | None = None,
                       per_edge: bool = False, stem: str = "imagenet", edge_norm: bool = False,
                       **kwargs) -> nn.Module:
        """The supernet (one implementation: each block's choices are separate modules);
        the methods' options as in spaces.mobilenet.network. ``edge_norm`` is accepted and
        changes nothing: a block has one input, whose normalised beta is 1."""
        self.unsupported(cells=cells)
        known = {"init_scale", "partial_channels", "aux_skip", "sampled", "drop_path"}
        self.unsupported(**{k: v for k, v in kwargs.items() if k not in known})
        return MobileNetSuperNet(channels or self.upstream["channels"], num_classes, in_channels,
                                 stem=stem, **kwargs)

    def check_size_options(self, channels: int | None, cells: int | None) -> None:
        self.unsupported(cells=cells)

    def derive(self, alphas: Mapping[str, torch.Tensor]) -> MobileNetGenotype:
        self.check_alphas(alphas)
        return derive_mobilenet_genotype(dict(alphas))

    def parse(self, text: str) -> MobileNetGenotype:
        return parse_mobilenet_genotype(text)

    def format(self, genotype: MobileNetGenotype) -> str:
        return genotype.to_string()

    def op_counts(self, genotype: MobileNetGenotype) -> dict[str, int]:
        skipped = sum(op == ZERO for op in genotype.blocks)
        return {"param_free_ops": skipped, "skip_ops": skipped}

    def choices(self, genotype: MobileNetGenotype) -> tuple:
        return genotype.blocks

    def build_network(self, genotype, num_classes: int, in_channels: int = 3,
                      channels: int | None = None, cells: int | None = None,
                      stem: str = "imagenet", **options) -> nn.Module:
        self.unsupported(cells=cells, **options)
        return MobileNetNetwork(self.ensure_genotype(genotype), num_classes,
                                channels or self.upstream["channels"], in_channels, stem)

    def feature_layout(self, genotype, channels: int | None = None, cells: int | None = None,
                       in_channels: int = 3, **options):
        """The discrete network as a backbone (spaces.mobilenet.network's taps)."""
        return mobilenet_feature_layout(self.build_network(genotype, 1, in_channels, channels,
                                                           cells, **options))


MOBILENET = register_space(MobileNetSpace())
