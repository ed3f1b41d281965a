"""The DARTS CNN space (Liu et al., ICLR-19; quark0/darts) and the class of its family.

Cells with two inputs (the previous two cells), 4 intermediate nodes, 14 edges; alphas
"normal" and "reduce", each (14, 8) over the ops none, max_pool_3x3, avg_pool_3x3,
skip_connect, sep_conv_3x3, sep_conv_5x5, dil_conv_3x3, dil_conv_5x5 (this column order).
Search network C=16, 8 cells (reductions at cells 2 and 5); derivation: top-2 inputs per node
by the best non-`none` weight, best non-`none` op on each; genotype text as upstream's
``Genotype(normal=[...], normal_concat=[2, 3, 4, 5], reduce=[...], reduce_concat=[2, 3, 4, 5])``;
evaluation network ``build_darts_network`` (CIFAR: C=36, 20 cells, auxiliary head).

``darts-7op`` is the variant without `none` (beta-DARTS' and SDARTS' "s5"), whose derivation
then ranks edges over all 7 ops.

``DartsFamilySpace`` is shared with RobustDARTS S1-S4 (genlab.nas.spaces.darts.robust): a space of
this family is its per-edge op lists for normal and reduction cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from genlab.core.errors import SpecError
from genlab.nas.spaces.base import (
    AlphaSpec,
    ProxyDefaults,
    ReferenceNetwork,
    RetrainRecipe,
    SearchSpace,
    register_space,
)
from genlab.nas.spaces.darts.genotype import (
    CELL_TYPES,
    DartsGenotype,
    derive_darts_genotype,
    edge_count,
    parse_darts_genotype,
    validate,
)
from genlab.nas.spaces.darts.network import build_darts_network, darts_feature_layout
from genlab.nas.spaces.darts.supernet import DARTS_TOPOLOGY, DartsSuperNet
from genlab.nas.supernet.ops import PARAM_FREE_OPS

DARTS_OPS = ("none", "max_pool_3x3", "avg_pool_3x3", "skip_connect", "sep_conv_3x3",
             "sep_conv_5x5", "dil_conv_3x3", "dil_conv_5x5")
# Digits proxies (ours, docs/ber.md): 5 cells N R N R N at C=8 on 8x8 digits; the 8-op
# space costs ~4x a step of the 2- and 3-op RobustDARTS spaces, so it gets fewer steps.
DARTS_PROXY = ProxyDefaults(size=8, channels=8, cells=5, steps=300)
ROBUST_PROXY = ProxyDefaults(size=8, channels=8, cells=5, steps=600)
# The upstream recipe (quark0/darts train.py) at a CPU size: flags scale every entry.
DARTS_RETRAIN = RetrainRecipe(channels=16, cells=8, epochs=30, lr=0.025, momentum=0.9,
                              nesterov=False, weight_decay=3e-4, grad_clip=5.0,
                              auxiliary_weight=0.4, drop_path=0.2, cutout=True)
# what build_supernet passes on to the supernet (the methods' options among them); any other
# keyword is refused with one line
SUPERNET_KWARGS = frozenset({"stem_multiplier", "init_scale", "channels_last",
                             "partial_channels", "edge_norm", "aux_skip", "sampled",
                             "drop_path"})


class DartsFamilySpace(SearchSpace):
    """A DARTS-family space: per-edge op lists of the normal and the reduction cell."""

    upstream = {"channels": 16, "cells": 8}
    retrain = DARTS_RETRAIN
    # DARTS' CIFAR-10 network (36 channels, 20 cells: build_network's defaults), no
    # auxiliary head: DARTS_V2 is 3.3M parameters there.
    reference = ReferenceNetwork(num_classes=10, size=32)

    def __init__(self, name: str, description: str, normal: Sequence[Sequence[str]],
                 reduce: Sequence[Sequence[str]], proxy: ProxyDefaults = DARTS_PROXY):
        self.name, self.description, self.proxy = name, description, proxy
        self.edge_ops = {"normal": tuple(tuple(o) for o in normal),
                         "reduce": tuple(tuple(o) for o in reduce)}
        for cell, rows in self.edge_ops.items():
            if len(rows) != edge_count():
                raise ValueError(f"{name}: {cell} needs {edge_count()} op lists")

    def alpha_specs(self) -> dict[str, AlphaSpec]:
        return {cell: AlphaSpec(DARTS_TOPOLOGY.edge_names, self.edge_ops[cell])
                for cell in CELL_TYPES}

    def build_supernet(self, num_classes: int = 10, in_channels: int = 3,
                       channels: int | None = None, cells: int | None = None,
                       per_edge: bool = False, **kwargs) -> nn.Module:
        self.unsupported(**{k: v for k, v in kwargs.items() if k not in SUPERNET_KWARGS})
        return DartsSuperNet(self.edge_ops, C=channels or self.upstream["channels"],
                             layers=cells or self.upstream["cells"], num_classes=num_classes,
                             in_channels=in_channels, per_edge=per_edge, **kwargs)

    def derive(self, alphas: Mapping[str, torch.Tensor],
               edge_scales: Mapping[str, torch.Tensor] | None = None) -> DartsGenotype:
        """Top-2 edges per node, best op on each; ``edge_scales``: PC-DARTS' betas."""
        self.check_alphas(alphas)
        if edge_scales is not None:
            for name in alphas:
                if tuple(torch.as_tensor(edge_scales[name]).shape) != (edge_count(),):
                    raise SpecError(f"edge scales {name!r} must have shape ({edge_count()},)")
        return derive_darts_genotype(dict(alphas), self.edge_ops,
                                     None if edge_scales is None else dict(edge_scales))

    def parse(self, text: str) -> DartsGenotype:
        return validate(parse_darts_genotype(text), self.edge_ops, self.name)

    def format(self, genotype: DartsGenotype) -> str:
        return genotype.to_string()

    def op_counts(self, genotype: DartsGenotype) -> dict[str, int]:
        return {"param_free_ops": genotype.count("normal", PARAM_FREE_OPS),
                "skip_ops": genotype.count("normal", {"skip_connect"})}

    def choices(self, genotype: DartsGenotype) -> tuple:
        """Per cell type and node: its two (op, input) genes, order-free."""
        out = []
        for cell in CELL_TYPES:
            genes = genotype.genes(cell)
            out += [(cell, i, tuple(sorted(genes[2 * i:2 * i + 2], key=lambda g: (g[1], g[0]))))
                    for i in range(len(genes) // 2)]
        return tuple(out)

    def build_network(self, genotype, num_classes: int, in_channels: int = 3,
                      channels: int | None = None, cells: int | None = None,
                      auxiliary: bool = False, drop_path: float = 0.0,
                      layout: str = "cifar", **options) -> nn.Module:
        """The evaluation network (``build_darts_network``), CIFAR layout by default."""
        self.unsupported(**options)
        return build_darts_network(self.ensure_genotype(genotype), num_classes,
                                   C=channels or 36, layers=cells or 20, auxiliary=auxiliary,
                                   drop_path=drop_path, in_channels=in_channels, layout=layout)

    def feature_layout(self, genotype, channels: int | None = None, cells: int | None = None,
                       in_channels: int = 3, layout: str = "imagenet", **options):
        """The evaluation network as a backbone: the ImageNet layout by default, at its
        upstream size (C=48, 14 cells) when ``channels``/``cells`` are None."""
        if layout == "imagenet":
            channels, cells = channels or 48, cells or 14
        net = self.build_network(genotype, 1, in_channels, channels, cells, layout=layout,
                                 **options)
        return darts_feature_layout(net)


DARTS = register_space(DartsFamilySpace(
    "darts", "DARTS CNN cells: 2 inputs, 4 nodes, 14 edges, 8 ops, normal + reduce alphas",
    [DARTS_OPS] * edge_count(), [DARTS_OPS] * edge_count()))
DARTS_7OP = register_space(DartsFamilySpace(
    "darts-7op", "DARTS space without `none` (beta-DARTS / SDARTS s5): 7 ops",
    [DARTS_OPS[1:]] * edge_count(), [DARTS_OPS[1:]] * edge_count()))
