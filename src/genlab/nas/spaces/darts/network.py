"""DARTS evaluation networks (quark0/darts model.py): CIFAR and ImageNet layouts of a genotype.

Cell: the two inputs preprocessed (ReLU-Conv1x1-BN, or FactorizedReduce after a reduction
cell), then node i = op1(states[j1]) + op2(states[j2]) for the genotype's genes, ops with affine
BN and stride 2 on inputs 0/1 of a reduction cell; in training, drop-path (per-sample
Bernoulli mask, survivors scaled by 1 / keep) on every op output except identities; output =
cat of the ``concat`` states.

CIFAR layout (``NetworkCIFAR``): stem Conv3x3(in, 3C) + BN, ``layers`` cells with reductions
at layers // 3 and 2 * layers // 3, an auxiliary head after the second reduction cell (used in
training only: ReLU, AvgPool 5/3, Conv1x1 128 + BN + ReLU, Conv2x2 768 + BN + ReLU, Linear),
global average pool, Linear. DARTS_V2 at C=36, 20 layers, 10 classes: 3,349,342 parameters
without the auxiliary head. ImageNet layout (``NetworkImageNet``): two stride-2 stems (C/2 then
C, then C at stride 2 again), the first cell treats its inputs as reduced, auxiliary head
AvgPool 5/2 without the BN after its 768-channel conv, as upstream.

Small inputs (ours): an auxiliary head whose input map is smaller than its 5x5 pooling window
averages adaptively to 2x2 instead, so CPU proxies (digits at 8x8) can use the head.

Backbone taps (``darts_feature_layout``, genlab.nas.spaces.backbone): the stem's map (ImageNet:
stem0, stride 4; CIFAR: the stem) and the last cell of each resolution (ImageNet, 14 cells:
cells 3, 8, 13 at strides 8, 16, 32, the default outputs).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from genlab.core.errors import ConfigError, require_positive, require_positive_ints
from genlab.nas.spaces.base import FeatureLayout, FeatureTap
from genlab.nas.spaces.darts.genotype import (
    CELL_TYPES,
    DartsGenotype,
    edge_count,
    parse_darts_genotype,
    validate,
)
from genlab.nas.supernet.cells import drop_path
from genlab.nas.supernet.ops import OPS, FactorizedReduce, ReLUConvBN, build_op


class EvalCell(nn.Module):
    """One discrete cell of a DARTS-space genotype."""

    def __init__(self, genotype: DartsGenotype, c_pp: int, c_p: int, channels: int,
                 reduction: bool, reduction_prev: bool):
        super().__init__()
        cell = CELL_TYPES[1] if reduction else CELL_TYPES[0]
        if reduction_prev:
            self.preprocess0 = FactorizedReduce(c_pp, channels)
        else:
            self.preprocess0 = ReLUConvBN(c_pp, channels, 1, 1, bias=False)
        self.preprocess1 = ReLUConvBN(c_p, channels, 1, 1, bias=False)
        genes = genotype.genes(cell)
        self.indices = tuple(j for _, j in genes)
        self.concat = genotype.concat(cell)
        self.multiplier = len(self.concat)
        self.reduction, self.out_channels = reduction, self.multiplier * channels
        self.ops = nn.ModuleList(build_op(op, channels, channels, 2 if reduction and j < 2 else 1)
                                 for op, j in genes)

    def forward(self, s0: torch.Tensor, s1: torch.Tensor, drop_prob: float) -> torch.Tensor:
        states = [self.preprocess0(s0), self.preprocess1(s1)]
        for i in range(len(self.ops) // 2):
            outs = []
            for g in (2 * i, 2 * i + 1):
                op = self.ops[g]
                h = op(states[self.indices[g]])
                if self.training and drop_prob > 0 and not isinstance(op, nn.Identity):
                    h = drop_path(h, drop_prob)
                outs.append(h)
            states.append(outs[0] + outs[1])
        return torch.cat([states[i] for i in self.concat], dim=1)


class AuxiliaryHead(nn.Module):
    """Auxiliary classifier: ReLU, AvgPool(5, ``stride``), 1x1 conv 128, 2x2 conv 768, Linear."""

    def __init__(self, channels: int, num_classes: int, stride: int, bn_after_768: bool):
        super().__init__()
        self.stride = stride
        self.features = nn.Sequential(
            nn.Conv2d(channels, 128, 1, bias=False), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
            nn.Conv2d(128, 768, 2, bias=False),
            *([nn.BatchNorm2d(768)] if bn_after_768 else []), nn.ReLU(inplace=True))
        self.classifier = nn.Linear(768, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(x)
        if min(x.shape[-2:]) >= 5:
            x = F.avg_pool2d(x, 5, self.stride, 0, count_include_pad=False)
        else:  # ours: maps smaller than the pooling window (CPU proxies)
            x = F.adaptive_avg_pool2d(x, 2)
        return self.classifier(self.features(x).flatten(1))


class _DartsNetwork(nn.Module):
    """Cells, auxiliary head and classifier shared by both layouts; subclasses give the stem."""

    def _build_cells(self, genotype: DartsGenotype, c_pp: int, c_p: int, C: int, layers: int,
                     reduction_prev: bool) -> tuple[int, int]:
        """Build the cells; return the channels into the auxiliary head and into the classifier."""
        self.cells = nn.ModuleList()
        self.layers = layers
        self.aux_index = 2 * layers // 3
        c_curr, c_aux = C, c_p
        for i in range(layers):
            reduction = i in (layers // 3, 2 * layers // 3)
            if reduction:
                c_curr *= 2
            cell = EvalCell(genotype, c_pp, c_p, c_curr, reduction, reduction_prev)
            self.cells.append(cell)
            reduction_prev = reduction
            c_pp, c_p = c_p, cell.multiplier * c_curr
            if i == self.aux_index:
                c_aux = c_p
        return c_aux, c_p

    def forward(self, x: torch.Tensor):
        """Logits, or (logits, auxiliary logits) in training mode when there is a head."""
        s0, s1 = self.stems(x)
        logits_aux = None
        for i, cell in enumerate(self.cells):
            s0, s1 = s1, cell(s0, s1, self.drop_path_prob)
            if i == self.aux_index and self.auxiliary_head is not None and self.training:
                logits_aux = self.auxiliary_head(s1)
        logits = self.classifier(s1.mean(dim=(2, 3)))
        return (logits, logits_aux) if logits_aux is not None else logits

    def _build_body(self, genotype: DartsGenotype, channels: tuple[int, int, int], layers: int,
                    reduction_prev: bool, num_classes: int, aux: tuple[int, bool] | None,
                    drop_path: float) -> None:
        """Cells, auxiliary head (``aux``: its (stride, CIFAR padding), None for none),
        classifier and drop-path, in this order (the order of the parameters' draws)."""
        c_aux, c_last = self._build_cells(genotype, *channels, layers, reduction_prev)
        self.auxiliary_head = AuxiliaryHead(c_aux, num_classes, *aux) if aux else None
        self.classifier = nn.Linear(c_last, num_classes)
        self.set_drop_path(drop_path)

    def set_drop_path(self, prob: float) -> None:
        """Drop-path probability of the next epochs (the training recipe ramps it)."""
        require_positive("drop-path", prob, allow_zero=True)
        self.drop_path_prob = float(prob)


class NetworkCIFAR(_DartsNetwork):
    """The CIFAR-sized DARTS evaluation network (module docstring)."""

    def __init__(self, genotype: DartsGenotype, num_classes: int, C: int = 36, layers: int = 20,
                 auxiliary: bool = True, drop_path: float = 0.2, in_channels: int = 3):
        super().__init__()
        c_stem = 3 * C
        self.stem = nn.Sequential(nn.Conv2d(in_channels, c_stem, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(c_stem))
        self._build_body(genotype, (c_stem, c_stem, C), layers, False, num_classes,
                         (3, True) if auxiliary else None, drop_path)

    def stems(self, x):
        s = self.stem(x)
        return s, s


class NetworkImageNet(_DartsNetwork):
    """The ImageNet-sized DARTS evaluation network (module docstring)."""

    def __init__(self, genotype: DartsGenotype, num_classes: int, C: int = 48, layers: int = 14,
                 auxiliary: bool = True, drop_path: float = 0.0, in_channels: int = 3):
        super().__init__()
        self.stem0 = nn.Sequential(
            nn.Conv2d(in_channels, C // 2, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(C // 2), nn.ReLU(inplace=True),
            nn.Conv2d(C // 2, C, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(C))
        self.stem1 = nn.Sequential(nn.ReLU(inplace=True),
                                   nn.Conv2d(C, C, 3, stride=2, padding=1, bias=False),
                                   nn.BatchNorm2d(C))
        self._build_body(genotype, (C, C, C), layers, True, num_classes,
                         (2, False) if auxiliary else None, drop_path)

    def stems(self, x):
        s0 = self.stem0(x)
        return s0, self.stem1(s0)


LAYOUTS = {"cifar": NetworkCIFAR, "imagenet": NetworkImageNet}


def build_darts_network(genotype: DartsGenotype | str, num_classes: int, C: int = 36,
                        layers: int = 20, auxiliary: bool = True, drop_path: float = 0.2,
                        in_channels: int = 3, layout: str = "cifar") -> nn.Module:
    """The DARTS evaluation network of a genotype (upstream text or parsed).

    ``layout="imagenet"`` builds the ImageNet layout (upstream: C=48, 14 layers). Any
    registered cell op is accepted (S4's `noise` too); ``get_space(name).parse(text)`` checks a
    genotype against one space.
    """
    if layout not in LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}; expected one of: {', '.join(LAYOUTS)}")
    require_positive_ints(C=C, layers=layers, num_classes=num_classes, in_channels=in_channels)
    if isinstance(genotype, str):
        genotype = parse_darts_genotype(genotype)
    any_op = [tuple(OPS)] * edge_count()
    validate(genotype, {cell: any_op for cell in CELL_TYPES}, "DARTS-family")
    return LAYOUTS[layout](genotype, num_classes, C=C, layers=layers, auxiliary=auxiliary,
                           drop_path=drop_path, in_channels=in_channels)


def darts_feature_layout(net: _DartsNetwork) -> FeatureLayout:
    """A DARTS evaluation network as a backbone (module docstring): step 0 is the stem's map,
    step i + 1 cell i's output."""
    imagenet = isinstance(net, NetworkImageNet)
    stem = "stem0" if imagenet else "stem"
    stride = 4 if imagenet else 1
    taps = [FeatureTap(0, getattr(net, stem)[-1].num_features, stride, stem)]
    stride *= 2 if imagenet else 1  # stem1
    cells = list(net.cells)
    for i, cell in enumerate(cells):
        stride *= 2 if cell.reduction else 1
        if i == len(cells) - 1 or cells[i + 1].reduction:
            taps.append(FeatureTap(i + 1, cell.out_channels, stride, f"cells.{i}"))

    def keep(last: int) -> dict[str, nn.Module]:
        kept = {"stem0": net.stem0, "stem1": net.stem1} if imagenet else {"stem": net.stem}
        if imagenet and last == 0:
            del kept["stem1"]
        return {**kept, "cells": net.cells[:last]} if last else kept

    return FeatureLayout(net, tuple(taps), tuple(range(1, len(taps))),
                         ("auxiliary_head", "classifier"), keep,
                         functools.partial(_darts_steps, imagenet=imagenet,
                                           drop_prob=net.drop_path_prob))


def _darts_steps(m: nn.Module, x: torch.Tensor, imagenet: bool, drop_prob: float):
    """The stem's map, then every kept cell's output (the network's forward, headless)."""
    if imagenet:
        s0 = m.stem0(x)
        yield s0
        s1 = m.stem1(s0)
    else:
        s0 = s1 = m.stem(x)
        yield s0
    for cell in getattr(m, "cells", ()):
        s0, s1 = s1, cell(s0, s1, drop_prob)
        yield s1
