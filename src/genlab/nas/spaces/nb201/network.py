"""Discrete NAS-Bench-201 networks: one op per cell edge, the NB201 reference training layout.

Same macro skeleton as the supernet (stem, N cells, residual block, N cells, residual block,
N cells, BN-ReLU, global pool, linear). Cell convs are ReLU-Conv-BN with an affine BN and no conv
bias, as in the NB201 training networks, so parameter counts match NAS-Bench-201's.

Backbone taps (``nb201_feature_layout``, genlab.nas.spaces.backbone): the last cell of each of
the three stages (C, 2C, 4C channels at strides 1, 2, 4 of the stem's input).
"""

from __future__ import annotations

import torch
from torch import nn

from genlab.core.errors import require_positive_ints
from genlab.nas.spaces.base import FeatureLayout, FeatureTap
from genlab.nas.spaces.nb201.genotype import Genotype
from genlab.nas.supernet.cells import edge_name
from genlab.nas.supernet.ops import Head, ResidualBlock, Stem, make_op, stage_channels


class InferCell(nn.Module):
    """A discrete NB201 cell: node_i = sum_j op_{i<-j}(node_j), edges keyed 'i<-j'."""

    def __init__(self, genotype: Genotype, channels: int):
        super().__init__()
        self.genotype = genotype
        self.edges = nn.ModuleDict({
            edge_name(i, j): make_op(op, channels, affine=True, track_running_stats=True)
            for i, node in enumerate(genotype.nodes, start=1) for op, j in node
        })

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes = [x]
        for i, node in enumerate(self.genotype.nodes, start=1):
            nodes.append(sum(self.edges[edge_name(i, j)](nodes[j]) for _, j in node))
        return nodes[-1]


class NB201Network(nn.Module):
    """The NAS-Bench-201 network of one genotype."""

    def __init__(self, genotype: Genotype, num_classes: int, C: int = 16, N: int = 5,
                 in_channels: int = 3):
        super().__init__()
        require_positive_ints(C=C, N=N, num_classes=num_classes, in_channels=in_channels)
        self.genotype = genotype
        self.stem = Stem(in_channels, C)
        self.cells = nn.ModuleList()
        c_prev = C
        for c, is_res in stage_channels(C, N):
            self.cells.append(ResidualBlock(c_prev, c, 2) if is_res else InferCell(genotype, c))
            c_prev = c
        self.head = Head(c_prev, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for cell in self.cells:
            h = cell(h)
        return self.head(h)


def nb201_feature_layout(net: NB201Network) -> FeatureLayout:
    """An NB201 network as a backbone (module docstring): step i is layer i's output (the
    cells and the two residual blocks after the stem)."""
    layers = stage_channels(net.stem[0].out_channels, (len(net.cells) - 2) // 3)
    taps, stride = [], 1
    for i, (channels, is_res) in enumerate(layers):
        stride *= 2 if is_res else 1
        if i == len(layers) - 1 or layers[i + 1][1]:
            taps.append(FeatureTap(i, channels, stride, f"cells.{i}"))

    def keep(last: int) -> dict[str, nn.Module]:
        return {"stem": net.stem, "cells": net.cells[:last + 1]}

    return FeatureLayout(net, tuple(taps), tuple(range(len(taps))), ("head",), keep,
                         _nb201_steps)


def _nb201_steps(m: nn.Module, x: torch.Tensor):
    """The output of every kept layer after the stem (the network's forward, headless)."""
    h = m.stem(x)
    for cell in m.cells:
        h = cell(h)
        yield h


def build_network(arch_string: str | Genotype, num_classes: int, C: int = 16, N: int = 5,
                  in_channels: int = 3) -> nn.Module:
    """The discrete NB201 network of an official architecture string (or Genotype)."""
    genotype = arch_string if isinstance(arch_string, Genotype) else Genotype.from_string(
        arch_string)
    return NB201Network(genotype, num_classes, C, N, in_channels)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters without an auxiliary head (NB201 and DARTS report sizes so)."""
    return sum(p.numel() for name, p in model.named_parameters()
               if p.requires_grad and "auxiliary" not in name)
