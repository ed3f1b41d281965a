"""Cell topologies and the generic per-edge search cell that any cell space can use.

A cell is a DAG over *states*: its inputs (states 0..I-1) and its intermediate nodes
(states I..I+M-1). Node t sums one mixed op per incoming edge (t <- s):

    node_t = sum_{s<t} sum_k softmax(alpha_{t<-s})_k op_k(state_s)        (DARTS, eq. 2)

The rows of a cell's alpha tensor follow ``CellTopology.edges`` (target-major, then source),
which is the NB201 row order ('1<-0', '2<-0', '2<-1', ...) for one input and the DARTS edge
order (2<-0, 2<-1, 3<-0, ...) for two. The output is the last node (NB201) or the
concatenation of all intermediate nodes (DARTS).

``PerEdgeCell`` is the textbook layout (one ``MixedOp`` module per edge, every candidate op its
own module, ``none`` computed as x * 0): it is the reference the fused cells are tested
against, and the baseline of benchmarks/nas_step.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

OpReporter = Callable[[int, int, "torch.Tensor | None"], None]  # (row, col, unscaled output)


def edge_name(target: int, source: int) -> str:
    """Name of the edge from state ``source`` to state ``target``, e.g. '2<-0'."""
    return f"{target}<-{source}"


@dataclass(frozen=True)
class CellTopology:
    """A complete DAG cell: ``num_inputs`` input states, ``num_nodes`` intermediate nodes."""

    num_inputs: int
    num_nodes: int
    concat: bool  # output = cat of all intermediate nodes (True) or the last node (False)

    @property
    def edges(self) -> tuple[tuple[int, int], ...]:
        """(target, source) state pairs in alpha-row order."""
        first = self.num_inputs
        return tuple((t, s) for t in range(first, first + self.num_nodes) for s in range(t))

    @property
    def edge_names(self) -> tuple[str, ...]:
        return tuple(edge_name(t, s) for t, s in self.edges)

    def row(self, target: int, source: int) -> int:
        """Alpha row of edge (target <- source)."""
        return self.edges.index((target, source))

    def incoming(self, target: int) -> list[int]:
        """Rows of the edges into state ``target``."""
        return [r for r, (t, _) in enumerate(self.edges) if t == target]

    def output(self, nodes: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.cat(list(nodes), dim=1) if self.concat else nodes[-1]


SAMPLED_MODES = ("scalars", "drawn")


@dataclass
class EdgeKnobs:
    """Values that move over a search, shared by every edge of a supernet (``set_knobs``)."""

    aux_scale: float = 1.0  # DARTS-' beta
    drop_prob: float = 0.0  # R-DARTS' drop-path probability

    def set(self, aux_scale: float | None = None, drop_prob: float | None = None) -> None:
        if aux_scale is not None:
            self.aux_scale = float(aux_scale)
        if drop_prob is not None:
            self.drop_prob = float(drop_prob)


@dataclass(frozen=True)
class EdgeOptions:
    """The structural options of one mixed op (module docstring)."""

    partial_channels: int = 1
    aux_skip: bool = False
    sampled: str | None = None  # None, "scalars" or "drawn"
    drop_path: bool = False


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(N, G*C', H, W) -> channels reordered as (C', G) transposed (ShuffleNet, PC-DARTS)."""
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


def drop_path(x: torch.Tensor, prob: float) -> torch.Tensor:
    """Zero each sample with probability ``prob``, scale the rest by 1 / (1 - prob)."""
    if prob <= 0.0:
        return x
    keep = 1.0 - prob
    mask = torch.empty(x.shape[0], 1, 1, 1, dtype=x.dtype, device=x.device).bernoulli_(keep)
    return x / keep * mask


def drop_masks(count: int, batch: int, prob: float,
               like: torch.Tensor) -> list[torch.Tensor] | None:
    """``count`` per-sample drop-path factors (N, 1, 1, 1), mask / keep, drawn as ``count``
    calls of ``drop_path`` draw their masks in turn (the fused cells draw one per edge, in
    edge order, as the per-edge cells do); None at probability 0."""
    if prob <= 0.0:
        return None
    keep = 1.0 - prob
    return [torch.empty(batch, 1, 1, 1, dtype=like.dtype, device=like.device)
            .bernoulli_(keep).div_(keep) for _ in range(count)]


def partial_merge(y: torch.Tensor, x: torch.Tensor, k: int) -> torch.Tensor:
    """PC-DARTS: the ops' output ``y`` on x's first C/k channels, the rest of ``x`` appended
    (max-pooled 2x2 when ``y`` is smaller), channel-shuffled with k groups."""
    rest = x[:, x.shape[1] // k:]
    if y.shape[2] != x.shape[2]:
        rest = F.max_pool2d(rest, 2, 2)
    return channel_shuffle(torch.cat([y, rest], dim=1), k)


def others_sum(weights: torch.Tensor, index: int) -> torch.Tensor:
    """sum_{k != index} weights[k] (GDAS: the ops that did not run enter as scalars)."""
    mask = torch.ones_like(weights)
    mask[index] = 0.0
    return (weights * mask).sum()


class MixedOp(nn.Module):
    """One edge: sum_k w_k op_k(x) over every candidate op, each its own module (with the
    options of ``EdgeOptions``; ``aux`` the auxiliary op, ``knobs`` the shared knobs)."""

    def __init__(self, names: Sequence[str], ops: Sequence[nn.Module],
                 options: EdgeOptions | None = None, aux: nn.Module | None = None,
                 knobs: EdgeKnobs | None = None):
        super().__init__()
        self.names = tuple(names)
        self.ops = nn.ModuleList(ops)
        self.options = options or EdgeOptions()
        if self.options.aux_skip:
            self.aux = aux
        self.knobs = knobs or EdgeKnobs()

    def forward(self, x: torch.Tensor, weights: torch.Tensor,
                report: Callable[[int, torch.Tensor | None], None] | None = None) -> torch.Tensor:
        opt = self.options
        k = opt.partial_channels
        xs = x[:, :x.shape[1] // k] if k > 1 else x
        if opt.sampled and self.training:
            i = int(weights.argmax())
            out = self.ops[i](xs)
            if report is not None:
                report(i, None if self.names[i] == "none" else out.detach())
            y = weights[i] * out
            if opt.sampled == "scalars":
                y = y + others_sum(weights, i)
        else:
            outs = [op(xs) for op in self.ops]
            if report is not None:
                for j, (name, out) in enumerate(zip(self.names, outs, strict=True)):
                    report(j, None if name == "none" else out.detach())
            y = sum(w * out for w, out in zip(weights, outs, strict=True))
        if k > 1:
            y = partial_merge(y, x, k)
        if opt.aux_skip:
            y = y + self.aux(x) * self.knobs.aux_scale
        if opt.drop_path and self.training:
            y = drop_path(y, self.knobs.drop_prob)
        return y


class PerEdgeCell(nn.Module):
    """Generic per-edge search cell over ``topology``; ``edge_ops[r]`` are row r's op names.

    ``op_builder(name, stride)`` builds one candidate op (at C/K channels under partial
    channels); ``stride_of(source)`` gives the stride of edges leaving a state (2 on the input
    edges of a reduction cell); ``aux_builder(stride)`` the auxiliary op of each edge under
    ``options.aux_skip``; ``knobs`` the supernet's shared knobs.
    """

    def __init__(self, topology: CellTopology, edge_ops: Sequence[Sequence[str]],
                 op_builder: Callable[[str, int], nn.Module],
                 stride_of: Callable[[int], int] = lambda source: 1,
                 options: EdgeOptions | None = None,
                 aux_builder: Callable[[int], nn.Module] | None = None,
                 knobs: EdgeKnobs | None = None):
        super().__init__()
        self.topology = topology
        self.edge_ops = tuple(tuple(ops) for ops in edge_ops)
        options = options or EdgeOptions()
        self.edges = nn.ModuleDict({
            edge_name(t, s): MixedOp(
                ops, [op_builder(o, stride_of(s)) for o in ops], options,
                aux_builder(stride_of(s)) if options.aux_skip else None, knobs)
            for (t, s), ops in zip(topology.edges, self.edge_ops, strict=True)
        })

    def forward(self, states: Sequence[torch.Tensor], weights: torch.Tensor,
                report: OpReporter | None = None,
                edge_weights: torch.Tensor | None = None) -> list[torch.Tensor]:
        """The intermediate nodes, given the (preprocessed) input states and (E, K) weights;
        ``edge_weights`` (E,): factors of the edge outputs (PC-DARTS' normalised betas)."""
        topo = self.topology
        states = list(states)
        for t in range(topo.num_inputs, topo.num_inputs + topo.num_nodes):
            terms = []
            for r in topo.incoming(t):
                s = topo.edges[r][1]
                rep = None if report is None else (lambda k, out, r=r: report(r, k, out))
                out = self.edges[edge_name(t, s)](states[s], weights[r], rep)
                terms.append(out if edge_weights is None else edge_weights[r] * out)
            states.append(sum(terms))
        return states[topo.num_inputs:]


def node_softmax(betas: torch.Tensor, topology: CellTopology) -> torch.Tensor:
    """PC-DARTS' edge normalisation: softmax of the betas over each node's incoming edges."""
    parts = []
    for t in range(topology.num_inputs, topology.num_inputs + topology.num_nodes):
        rows = topology.incoming(t)
        # a slice (or integer picks), not a Python list as an index: a list becomes a host
        # tensor copied to the device at every call, which a CUDA graph cannot capture
        picked = (betas[rows[0]:rows[-1] + 1] if rows == list(range(rows[0], rows[-1] + 1))
                  else torch.stack([betas[r] for r in rows]))
        parts.append(torch.softmax(picked, dim=-1))
    return torch.cat(parts)
