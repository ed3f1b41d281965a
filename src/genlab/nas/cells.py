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


class MixedOp(nn.Module):
    """One edge: sum_k w_k op_k(x) over every candidate op, each its own module."""

    def __init__(self, names: Sequence[str], ops: Sequence[nn.Module]):
        super().__init__()
        self.names = tuple(names)
        self.ops = nn.ModuleList(ops)

    def forward(self, x: torch.Tensor, weights: torch.Tensor,
                report: Callable[[int, torch.Tensor | None], None] | None = None) -> torch.Tensor:
        outs = [op(x) for op in self.ops]
        if report is not None:
            for k, (name, out) in enumerate(zip(self.names, outs, strict=True)):
                report(k, None if name == "none" else out.detach())
        return sum(w * out for w, out in zip(weights, outs, strict=True))


class PerEdgeCell(nn.Module):
    """Generic per-edge search cell over ``topology``; ``edge_ops[r]`` are row r's op names.

    ``op_builder(name, stride)`` builds one candidate op; ``stride_of(source)`` gives the stride
    of edges leaving a state (2 on the input edges of a reduction cell).
    """

    def __init__(self, topology: CellTopology, edge_ops: Sequence[Sequence[str]],
                 op_builder: Callable[[str, int], nn.Module],
                 stride_of: Callable[[int], int] = lambda source: 1):
        super().__init__()
        self.topology = topology
        self.edge_ops = tuple(tuple(ops) for ops in edge_ops)
        self.edges = nn.ModuleDict({
            edge_name(t, s): MixedOp(ops, [op_builder(o, stride_of(s)) for o in ops])
            for (t, s), ops in zip(topology.edges, self.edge_ops, strict=True)
        })

    def forward(self, states: Sequence[torch.Tensor], weights: torch.Tensor,
                report: OpReporter | None = None) -> list[torch.Tensor]:
        """The intermediate nodes, given the (preprocessed) input states and (E, K) weights."""
        topo = self.topology
        states = list(states)
        for t in range(topo.num_inputs, topo.num_inputs + topo.num_nodes):
            terms = []
            for r in topo.incoming(t):
                s = topo.edges[r][1]
                rep = None if report is None else (lambda k, out, r=r: report(r, k, out))
                terms.append(self.edges[edge_name(t, s)](states[s], weights[r], rep))
            states.append(sum(terms))
        return states[topo.num_inputs:]
