"""Search spaces: names of operations and edges, and a registry mapping space names to them.

NAS-Bench-201 (Dong & Yang, ICLR-20): a cell with nodes 0..3, node_i = sum_{j<i} op_{i<-j}(node_j),
6 edges, 5 candidate ops; 5^6 = 15,625 architectures. The arch parameters of a supernet are a
(6, 5) matrix whose rows follow ``NB201_EDGES`` and whose columns follow ``NB201_OPS``.

Only "nb201" is implemented; the DARTS space, RobustDARTS S1-S4 and the MobileNet-like space are
registered so that their names are known, and asking for them raises a clear ConfigError.
"""

from __future__ import annotations

from dataclasses import dataclass

from genlab.core.errors import ConfigError

NB201_OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
NB201_EDGES = ("1<-0", "2<-0", "2<-1", "3<-0", "3<-1", "3<-2")
NB201_NODES = 3  # intermediate nodes 1..3; node 0 is the cell input, node 3 its output
PARAM_FREE_OPS = frozenset({"none", "skip_connect", "avg_pool_3x3", "max_pool_3x3", "noise"})

DARTS_OPS = ("none", "max_pool_3x3", "avg_pool_3x3", "skip_connect", "sep_conv_3x3",
             "sep_conv_5x5", "dil_conv_3x3", "dil_conv_5x5")


def edge_name(target: int, source: int) -> str:
    """Name of the edge from node ``source`` to node ``target``, e.g. '2<-0'."""
    return f"{target}<-{source}"


def cell_edges(num_nodes: int) -> tuple[str, ...]:
    """Edges of a complete DAG cell with intermediate nodes 1..num_nodes, in NB201 order."""
    return tuple(edge_name(i, j) for i in range(1, num_nodes + 1) for j in range(i))


@dataclass(frozen=True)
class SearchSpace:
    """A named search space: candidate ops (arch-param columns) and edges (rows)."""

    name: str
    ops: tuple[str, ...]
    edges: tuple[str, ...]
    description: str
    implemented: bool = True

    @property
    def num_architectures(self) -> int:
        """Number of discrete cells: one op per edge."""
        return len(self.ops) ** len(self.edges)

    def build_supernet(self, **kwargs):
        """The weight-sharing supernet of this space (keyword arguments go to its constructor)."""
        from genlab.nas.supernet import NB201SuperNet

        return NB201SuperNet(ops=self.ops, **kwargs)

    def build_network(self, arch_string: str, num_classes: int, **kwargs):
        """The discrete network of one architecture string of this space."""
        from genlab.nas.networks import build_network

        return build_network(arch_string, num_classes, **kwargs)

    def parse(self, arch_string: str):
        """Parse an architecture string of this space into a Genotype."""
        from genlab.nas.genotype import Genotype

        return Genotype.from_string(arch_string, ops=self.ops)


SPACES: dict[str, SearchSpace] = {
    "nb201": SearchSpace("nb201", NB201_OPS, NB201_EDGES,
                         "NAS-Bench-201 cell: 4 nodes, 6 edges, 5 ops, 15,625 architectures"),
    "darts": SearchSpace("darts", DARTS_OPS, cell_edges(4),
                         "DARTS normal+reduce cells: 2 inputs, 4 nodes, 14 edges, 8 ops",
                         implemented=False),
    "s1": SearchSpace("s1", DARTS_OPS, cell_edges(4),
                      "RobustDARTS S1: per-edge top-2 ops of a DARTS run", implemented=False),
    "s2": SearchSpace("s2", ("skip_connect", "sep_conv_3x3"), cell_edges(4),
                      "RobustDARTS S2: skip_connect, sep_conv_3x3", implemented=False),
    "s3": SearchSpace("s3", ("none", "skip_connect", "sep_conv_3x3"), cell_edges(4),
                      "RobustDARTS S3: none, skip_connect, sep_conv_3x3", implemented=False),
    "s4": SearchSpace("s4", ("noise", "sep_conv_3x3"), cell_edges(4),
                      "RobustDARTS S4: noise, sep_conv_3x3", implemented=False),
    "mobilenet": SearchSpace("mobilenet", ("mb_k3_e3", "mb_k3_e6", "mb_k5_e3", "mb_k5_e6",
                                           "mb_k7_e3", "mb_k7_e6", "skip_connect"), (),
                             "MobileNet-like chain of inverted-residual layers",
                             implemented=False),
}


def get_space(name: str) -> SearchSpace:
    """The implemented search space called ``name``; ConfigError for unknown or unimplemented."""
    if name not in SPACES:
        raise ConfigError(f"unknown search space {name!r}; expected one of: {', '.join(SPACES)}")
    space = SPACES[name]
    if not space.implemented:
        done = ", ".join(n for n, s in SPACES.items() if s.implemented)
        raise ConfigError(f"space {name} is not implemented yet; implemented: {done}")
    return space
