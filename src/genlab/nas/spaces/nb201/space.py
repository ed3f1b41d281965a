"""NAS-Bench-201 (Dong & Yang, ICLR-20): one cell, 4 nodes, 6 edges, 5 ops, 15,625 cells.

Alpha: one (6, 5) tensor named "cell", rows '1<-0', '2<-0', '2<-1', '3<-0', '3<-1', '3<-2',
columns none, skip_connect, nor_conv_1x1, nor_conv_3x3, avg_pool_3x3; shared by every cell.
Derivation: argmax per edge over all ops, `none` included (AutoDL convention). Genotype text:
the official string ``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|``. Supernet: C=16, N=5 upstream
(the fused ``NB201SuperNet``, or the per-edge reference); discrete network: the NB201 layout.
Its genotypes are judged by the NB201 accuracy table (``table = "nb201"``).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from genlab.core.errors import SpecError
from genlab.nas.spaces.base import (
    AlphaSpec,
    ProxyDefaults,
    RetrainRecipe,
    SearchSpace,
    register_space,
)
from genlab.nas.spaces.nb201.genotype import NB201_EDGES, NB201_OPS, Genotype, derive_genotype
from genlab.nas.spaces.nb201.network import NB201Network, nb201_feature_layout
from genlab.nas.spaces.nb201.supernet import NB201SuperNet
from genlab.nas.spaces.nb201.table import ENV_VAR, NB201Table

# what build_supernet passes on to the supernet (the methods' options among them); any other
# keyword is refused with one line
SUPERNET_KWARGS = frozenset({"ops", "init_scale", "track_running_stats", "channels_last",
                             "partial_channels", "edge_norm", "aux_skip", "sampled",
                             "drop_path"})


class NB201Space(SearchSpace):
    """The NAS-Bench-201 space (see the module docstring)."""

    name = "nb201"
    description = "NAS-Bench-201 cell: 4 nodes, 6 edges, 5 ops, 15,625 architectures"
    ops = NB201_OPS
    edges = NB201_EDGES
    upstream = {"channels": 16, "cells": 5}
    proxy = ProxyDefaults(size=8, channels=8, cells=1, steps=1800)
    retrain = RetrainRecipe(channels=16, cells=1, epochs=30, lr=0.05, nesterov=True,
                            weight_decay=5e-4)
    table = "nb201"
    table_env = ENV_VAR

    @property
    def num_architectures(self) -> int:
        return len(self.ops) ** len(self.edges)

    def alpha_specs(self) -> dict[str, AlphaSpec]:
        return {"cell": AlphaSpec(self.edges, (self.ops,) * len(self.edges))}

    def build_supernet(self, num_classes: int = 10, in_channels: int = 3,
                       channels: int | None = None, cells: int | None = None,
                       per_edge: bool = False, **kwargs) -> nn.Module:
        self.unsupported(**{k: v for k, v in kwargs.items() if k not in SUPERNET_KWARGS})
        return NB201SuperNet(C=channels or self.upstream["channels"],
                             N=cells or self.upstream["cells"], num_classes=num_classes,
                             in_channels=in_channels, ops=kwargs.pop("ops", self.ops),
                             per_edge=per_edge, **kwargs)

    def derive(self, alphas: Mapping[str, torch.Tensor],
               edge_scales: Mapping[str, torch.Tensor] | None = None) -> Genotype:
        """Argmax per edge; ``edge_scales`` (positive per-edge factors, PC-DARTS' betas) scale
        a whole row, so they cannot change its argmax and are only checked."""
        self.check_alphas(alphas)
        if edge_scales is not None and tuple(edge_scales["cell"].shape) != (len(self.edges),):
            raise SpecError(f"edge scales 'cell' must have shape ({len(self.edges)},)")
        return derive_genotype(alphas["cell"], self.ops)

    def parse(self, text: str) -> Genotype:
        return Genotype.from_string(text, ops=self.ops)

    def format(self, genotype: Genotype) -> str:
        return genotype.to_string()

    def op_counts(self, genotype: Genotype) -> dict[str, int]:
        ops = genotype.ops()
        return {"param_free_ops": genotype.param_free_count(),
                "skip_ops": sum(op == "skip_connect" for op in ops)}

    def choices(self, genotype: Genotype) -> tuple:
        return genotype.ops()

    def build_network(self, genotype, num_classes: int, in_channels: int = 3,
                      channels: int | None = None, cells: int | None = None,
                      **options) -> nn.Module:
        self.unsupported(**options)
        return NB201Network(self.ensure_genotype(genotype), num_classes,
                            C=channels or self.upstream["channels"],
                            N=cells or self.upstream["cells"], in_channels=in_channels)

    def feature_layout(self, genotype, channels: int | None = None, cells: int | None = None,
                       in_channels: int = 3, **options):
        """The discrete network as a backbone (its three stages' last cells)."""
        return nb201_feature_layout(self.build_network(genotype, 1, in_channels, channels,
                                                       cells, **options))

    def load_table(self, path: str):
        """The NB201 accuracy table at ``path`` (genlab.nas.spaces.nb201.table)."""
        return NB201Table.load(path)


NB201 = register_space(NB201Space())
