"""NAS-Bench-201 genotypes: the official architecture string, parsed, formatted and derived.

Official format (Dong & Yang, ICLR-20): the edges into node 1 | node 2 | node 3, each written
``op~j`` for the edge from node j, nodes joined by '+':

    |nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_1x1~2|

Derivation (AutoDL convention for NB201): each edge keeps the argmax of its weights over ALL
candidate ops, ``none`` included.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from genlab.core.errors import SpecError
from genlab.nas.supernet.cells import edge_name
from genlab.nas.supernet.ops import PARAM_FREE_OPS

NB201_OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
NB201_EDGES = ("1<-0", "2<-0", "2<-1", "3<-0", "3<-1", "3<-2")
NB201_NODES = 3  # intermediate nodes 1..3; node 0 is the cell input, node 3 its output

Node = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Genotype:
    """An immutable NB201 cell: ``nodes[i-1]`` holds the (op_name, input_index) pairs of node i."""

    nodes: tuple[Node, ...]

    def __post_init__(self) -> None:
        nodes = tuple(tuple((str(op), int(j)) for op, j in node) for node in self.nodes)
        object.__setattr__(self, "nodes", nodes)

    @classmethod
    def from_string(cls, s: str, ops: Sequence[str] = NB201_OPS) -> Genotype:
        """Parse the official string; SpecError names the bad token and where it is."""
        if not isinstance(s, str):
            raise SpecError(f"architecture string must be a str, got {type(s).__name__}")
        text = s.strip()
        if not text:
            raise SpecError("empty architecture string; expected e.g. "
                            "'|nor_conv_3x3~0|+|nor_conv_3x3~0|skip_connect~1|+|...|'")
        parts = text.split("+")
        if len(parts) != NB201_NODES:
            raise SpecError(f"architecture string {s!r} has {len(parts)} node(s) separated by "
                            f"'+'; expected {NB201_NODES}")
        nodes = []
        offset = 0
        for i, part in enumerate(parts, start=1):
            nodes.append(_parse_node(s, part, i, offset, ops))
            offset += len(part) + 1
        return cls(tuple(nodes))

    @classmethod
    def from_edges(cls, edges: dict[str, str] | Sequence[str]) -> Genotype:
        """Build from {edge: op} or a sequence of ops in NB201_EDGES order."""
        if isinstance(edges, dict):
            missing = [e for e in NB201_EDGES if e not in edges]
            if missing or len(edges) != len(NB201_EDGES):
                raise SpecError(f"edge dict must have exactly the keys {list(NB201_EDGES)}, "
                                f"got {list(edges)}")
            ops = [edges[e] for e in NB201_EDGES]
        else:
            ops = list(edges)
            if len(ops) != len(NB201_EDGES):
                raise SpecError(f"expected {len(NB201_EDGES)} ops (one per edge), got {len(ops)}")
        it = iter(ops)
        return cls(tuple(tuple((next(it), j) for j in range(i)) for i in range(1, NB201_NODES + 1)))

    @classmethod
    def all(cls, ops: Sequence[str] = NB201_OPS) -> Iterator[Genotype]:
        """Every cell of the space (len(ops) ** 6 of them), in lexicographic op-index order."""
        for combo in itertools.product(ops, repeat=len(NB201_EDGES)):
            yield cls.from_edges(combo)

    def to_string(self) -> str:
        """The official NB201 string; ``Genotype.from_string(g.to_string()) == g``."""
        return "+".join("|" + "|".join(f"{op}~{j}" for op, j in node) + "|" for node in self.nodes)

    __str__ = to_string

    def edges(self) -> dict[str, str]:
        """{'1<-0': op, ...} in NB201_EDGES order."""
        return {edge_name(i, j): op for i, node in enumerate(self.nodes, start=1) for op, j in node}

    def ops(self) -> tuple[str, ...]:
        """The op of each edge in NB201_EDGES order."""
        return tuple(self.edges().values())

    def param_free_count(self) -> int:
        """Number of edges whose op has no parameters (none, skip, pools, noise)."""
        return sum(op in PARAM_FREE_OPS for op in self.edges().values())


def _parse_node(s: str, part: str, node: int, offset: int, ops: Sequence[str]) -> Node:
    """Parse '|op~j|op~j|' for node ``node``; ``offset`` is the part's position in ``s``."""
    where = f"node {node} (character {offset})"
    if len(part) < 2 or not part.startswith("|") or not part.endswith("|"):
        raise SpecError(f"bad node {part!r} at {where} of {s!r}: each node must be written "
                        "'|op~input|...|'")
    tokens = part[1:-1].split("|")
    if len(tokens) != node:
        raise SpecError(f"node {node} {part!r} at character {offset} of {s!r} has "
                        f"{len(tokens)} edge(s); expected {node}")
    edges = []
    pos = offset + 1
    for k, token in enumerate(tokens):
        at = f"token {token!r} (node {node}, edge {k}, character {pos}) of {s!r}"
        if token.count("~") != 1:
            raise SpecError(f"bad {at}: expected 'op~input' with exactly one '~'")
        op, _, idx = token.partition("~")
        if op not in ops:
            raise SpecError(f"unknown op {op!r} in {at}; expected one of: {', '.join(ops)}")
        if not idx.isdigit():
            raise SpecError(f"bad input index {idx!r} in {at}; expected an integer")
        if int(idx) != k:
            raise SpecError(f"bad input index {idx} in {at}; edge {k} of node {node} must read "
                            f"node {k} ('~{k}')")
        edges.append((op, int(idx)))
        pos += len(token) + 1
    return tuple(edges)


def derive_genotype(arch_weights: torch.Tensor, ops: Sequence[str] = NB201_OPS) -> Genotype:
    """Argmax per edge over all ops of a (6, K) alpha or softmax matrix (rows in NB201_EDGES)."""
    w = torch.as_tensor(arch_weights).detach()
    if w.shape != (len(NB201_EDGES), len(ops)):
        raise SpecError(f"arch weights must have shape ({len(NB201_EDGES)}, {len(ops)}), "
                        f"got {tuple(w.shape)}")
    best = w.float().argmax(dim=-1).tolist()
    return Genotype.from_edges([ops[k] for k in best])
