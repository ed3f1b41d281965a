"""The DARTS-space search network (DARTS, RobustDARTS S1-S4), after quark0/darts model_search.py.

Stem Conv3x3(in, 3C) + BN; ``layers`` cells, cell i a reduction cell iff i is layers // 3 or
2 * layers // 3 (channels double there); cell inputs are the two previous cells' outputs,
preprocessed by ReLU-Conv1x1-BN (FactorizedReduce after a reduction cell); 4 intermediate
nodes over 14 edges whose ops are built without affine BN, pools followed by BN(affine=False);
on a reduction cell the edges leaving the inputs have stride 2; the output concatenates the 4
nodes. Global average pool, linear classifier. Two alpha tensors, "normal" and "reduce"
(14, K), each shared by all cells of its type, initialised 1e-3 * N(0, 1).

``per_edge=False`` computes each cell with the fused cell of genlab.nas.spaces.darts.fused (same
function, grouped by source state); ``per_edge=True`` with the textbook per-edge cell of
genlab.nas.supernet.cells, exactly the upstream layout (the reference and the benchmark's baseline).

The methods' supernet options (genlab.nas.supernet.cells, docs/nas_methods.md):
``partial_channels=K`` and ``edge_norm`` (PC-DARTS: betas "normal"/"reduce" (14,), 1e-3 N(0, 1),
softmaxed over each node's inputs; ``edge_scales()`` returns them), ``aux_skip`` (DARTS-:
identity, or FactorizedReduce(C, C, affine=False) of its own on the stride-2 edges) and
``drop_path`` (R-DARTS: on every edge's output) run on the fused cell as on the per-edge one;
``sampled`` (GDAS: only the drawn op runs, as AutoDL's NASNet search cell: no scalars for
the others) on the per-edge cell. ``set_knobs`` moves beta and the drop-path probability.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
from torch import nn

from genlab.core.errors import ConfigError, require_positive, require_positive_ints
from genlab.nas.spaces.base import AlphaSupernet
from genlab.nas.spaces.darts.fused import FusedCell
from genlab.nas.spaces.darts.genotype import CELL_TYPES, STEPS
from genlab.nas.supernet.cells import (
    CellTopology,
    EdgeKnobs,
    EdgeOptions,
    OpReporter,
    PerEdgeCell,
    node_softmax,
)
from genlab.nas.supernet.ops import POOLS, FactorizedReduce, ReLUConvBN, build_op
from genlab.nas.supernet.probe import CellTrace, Probe

DARTS_TOPOLOGY = CellTopology(num_inputs=2, num_nodes=STEPS, concat=True)


def search_op(name: str, channels: int, stride: int) -> nn.Module:
    """A candidate op as the search model builds it: no affine BN; pools followed by BN."""
    op = build_op(name, channels, channels, stride, affine=False)
    if name in POOLS:
        op = nn.Sequential(op, nn.BatchNorm2d(channels, affine=False))
    return op


def aux_op(channels: int, stride: int) -> nn.Module:
    """DARTS-' auxiliary skip: identity, or a FactorizedReduce of its own at stride 2."""
    return nn.Identity() if stride == 1 else FactorizedReduce(channels, channels, affine=False)


def reduction_cells(layers: int) -> set[int]:
    """Indices of the reduction cells: layers // 3 and 2 * layers // 3."""
    return {layers // 3, 2 * layers // 3}


class DartsSearchCell(nn.Module):
    """Preprocessing of the two inputs, then the 14-edge mixed-op DAG (fused or per edge)."""

    def __init__(self, c_pp: int, c_p: int, channels: int, reduction: bool, reduction_prev: bool,
                 edge_ops: Sequence[Sequence[str]], per_edge: bool,
                 options: EdgeOptions | None = None, knobs: EdgeKnobs | None = None):
        super().__init__()
        self.reduction = reduction
        self.alpha_name = "reduce" if reduction else "normal"
        if reduction_prev:
            self.preprocess0 = FactorizedReduce(c_pp, channels, affine=False)
        else:
            self.preprocess0 = ReLUConvBN(c_pp, channels, 1, 1, affine=False, bias=False)
        self.preprocess1 = ReLUConvBN(c_p, channels, 1, 1, affine=False, bias=False)
        if per_edge:
            options = options or EdgeOptions()
            width = channels // options.partial_channels
            self.core = PerEdgeCell(DARTS_TOPOLOGY, edge_ops,
                                    lambda name, stride: search_op(name, width, stride),
                                    lambda source: 2 if reduction and source < 2 else 1,
                                    options, lambda stride: aux_op(channels, stride), knobs)
        else:
            self.core = FusedCell(DARTS_TOPOLOGY, edge_ops, channels, reduction, options, knobs)

    def forward(self, s0: torch.Tensor, s1: torch.Tensor, weights: torch.Tensor,
                report: OpReporter | None = None,
                edge_weights: torch.Tensor | None = None) -> list[torch.Tensor]:
        """The 4 intermediate nodes (the output is their concatenation)."""
        states = [self.preprocess0(s0), self.preprocess1(s1)]
        if edge_weights is None:
            return self.core(states, weights, report)
        return self.core(states, weights, report, edge_weights)


class DartsSuperNet(AlphaSupernet):
    """The DARTS search network; ``edge_ops[cell][row]`` are the ops of edge row of that cell."""

    def __init__(self, edge_ops: dict[str, Sequence[Sequence[str]]], C: int = 16,
                 layers: int = 8, num_classes: int = 10, in_channels: int = 3,
                 per_edge: bool = False, stem_multiplier: int = 3, init_scale: float = 1e-3,
                 channels_last: bool = True, partial_channels: int = 1, edge_norm: bool = False,
                 aux_skip: bool = False, sampled: bool = False, drop_path: bool = False):
        super().__init__()
        require_positive_ints(C=C, layers=layers, num_classes=num_classes,
                              in_channels=in_channels, partial_channels=partial_channels)
        require_positive("init_scale", init_scale, allow_zero=True)
        if C % 2:
            raise ConfigError(f"channels must be even for the DARTS space (FactorizedReduce "
                              f"halves them), got {C}")
        if C % partial_channels:
            raise ConfigError(f"partial channels {partial_channels} must divide the channels "
                              f"({C})")
        self.options = EdgeOptions(partial_channels, bool(aux_skip),
                                   "drawn" if sampled else None, bool(drop_path))
        self.edge_norm = bool(edge_norm)
        per_edge = per_edge or self.options.sampled is not None
        self.knobs = EdgeKnobs()
        self.edge_ops = {c: tuple(tuple(ops) for ops in edge_ops[c]) for c in CELL_TYPES}
        self.C, self.layers, self.per_edge = C, layers, per_edge
        # channels_last speeds up the CPU convs; below 8 channels it gains nothing, and
        # oneDNN aborts in some strided 1x1 conv backwards at 2-4 channels (torch 2.13).
        # PC-DARTS' ops of C/K channels gain from it too (4x at 4 channels, 32x32; no abort
        # at C 8 and 16, K 2-8).
        self.channels_last = channels_last and not per_edge and C >= 8
        c_curr = stem_multiplier * C
        self.stem = nn.Sequential(nn.Conv2d(in_channels, c_curr, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(c_curr))
        c_pp, c_p, c_curr = c_curr, c_curr, C
        self.cells = nn.ModuleList()
        reduction_prev = False
        for i in range(layers):
            reduction = i in reduction_cells(layers)
            if reduction:
                c_curr *= 2
            ops = self.edge_ops["reduce" if reduction else "normal"]
            self.cells.append(DartsSearchCell(c_pp, c_p, c_curr, reduction, reduction_prev, ops,
                                              per_edge, self.options, self.knobs))
            reduction_prev = reduction
            c_pp, c_p = c_p, STEPS * c_curr
        self.classifier = nn.Linear(c_p, num_classes)
        rows = len(DARTS_TOPOLOGY.edges)
        self.alphas_normal = nn.Parameter(
            init_scale * torch.randn(rows, len(self.edge_ops["normal"][0])))
        self.alphas_reduce = nn.Parameter(
            init_scale * torch.randn(rows, len(self.edge_ops["reduce"][0])))
        if self.edge_norm:
            self.betas_normal = nn.Parameter(init_scale * torch.randn(rows))
            self.betas_reduce = nn.Parameter(init_scale * torch.randn(rows))

    def set_knobs(self, aux_scale: float | None = None, drop_prob: float | None = None) -> None:
        """DARTS-' beta and R-DARTS' drop-path probability of this step."""
        self.knobs.set(aux_scale, drop_prob)

    def betas(self) -> dict[str, nn.Parameter]:
        """PC-DARTS' edge betas per cell type (empty without edge normalisation)."""
        if not self.edge_norm:
            return {}
        return {"normal": self.betas_normal, "reduce": self.betas_reduce}

    def extra_arch_parameters(self) -> list[nn.Parameter]:
        return list(self.betas().values())

    def edge_scales(self) -> dict[str, torch.Tensor] | None:
        """The node-normalised betas per cell type (PC-DARTS), None without them."""
        if not self.edge_norm:
            return None
        return {name: node_softmax(b, DARTS_TOPOLOGY) for name, b in self.betas().items()}

    def alphas(self) -> dict[str, nn.Parameter]:
        """{"normal": (14, K) logits, "reduce": (14, K) logits}."""
        return {"normal": self.alphas_normal, "reduce": self.alphas_reduce}

    def forward(self, x: torch.Tensor, probe: Probe | None = None) -> torch.Tensor:
        """Logits; ``probe`` (genlab.nas.supernet.probe) receives every cell's nodes."""
        weights = self.mixing_weights()
        scales = self.edge_scales() or {}
        s0 = s1 = self.stem(x)
        if self.channels_last:
            s0 = s1 = s1.contiguous(memory_format=torch.channels_last)
        for index, cell in enumerate(self.cells):
            name = cell.alpha_name
            report = None
            if probe is not None and probe.wants_ops:
                report = functools.partial(probe.op, name, index)
            nodes = self.run_cell(cell, cell, s0, s1, weights[name], report, scales.get(name),
                                  rerun=report is None)
            out = torch.cat(nodes, dim=1)
            if probe is not None:
                probe.node(CellTrace(name, index, (s0, s1), tuple(nodes), out))
            s0, s1 = s1, out
        return self.classifier(s1.mean(dim=(2, 3)))

    @torch.no_grad()
    def load_per_edge(self, ref: DartsSuperNet) -> None:
        """Take every weight and BN statistic of the per-edge supernet ``ref`` (same sizes)."""
        if self.per_edge or not ref.per_edge:
            raise ConfigError("load_per_edge copies a per-edge supernet into a fused one")
        mine = dict(self.named_parameters())
        for name, value in ref.state_dict().items():
            if ".core." not in name:
                target = mine.get(name)
                if target is None:
                    target = self.get_buffer(name)
                target.copy_(value)
        for cell, theirs in zip(self.cells, ref.cells, strict=True):
            cell.core.load_per_edge(theirs.core)
