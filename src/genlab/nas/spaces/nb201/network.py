"""Discrete NAS-Bench-201 networks: one op per cell edge, the NB201 reference training layout.

Same macro skeleton as the supernet (stem, N cells, residual block, N cells, residual block,
N cells, BN-ReLU, global pool, linear). Cell convs are ReLU-Conv-BN with an affine BN and no conv
bias, as in the NB201 training networks, so parameter counts match NAS-Bench-201's.
"""

from __future__ import annotations

import torch
from torch import nn

from genlab.core.errors import require_positive_ints
from genlab.nas.cells import edge_name
from genlab.nas.ops import Head, ResidualBlock, Stem, make_op, stage_channels
from genlab.nas.spaces.nb201.genotype import Genotype


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
