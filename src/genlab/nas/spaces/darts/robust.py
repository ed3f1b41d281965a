"""RobustDARTS spaces S1-S4 (Zela et al., ICLR-20; automl/RobustDARTS src/spaces.py).

DARTS cells and search network with reduced op sets; each edge has its own op list whose
order sets the alpha columns:

- S1: two ops per edge, different per edge and per cell type (the table below, copied from
  the reference code in the same edge order 2<-0, 2<-1, 3<-0, ...);
- S2: {skip_connect, sep_conv_3x3} on every edge;
- S3: {none, skip_connect, sep_conv_3x3};
- S4: {noise, sep_conv_3x3}, noise = i.i.d. N(0, 1) ignoring its input, also at evaluation.

Derivation as DARTS, except that `none` is excluded from the edge ranking only where an edge
offers it: in S3; S1, S2 and S4 rank by the max over all ops (the reference's ValueError
fallback), so skip_connect and noise can be chosen.
"""

from __future__ import annotations

from genlab.nas.spaces.base import register_space
from genlab.nas.spaces.darts.genotype import edge_count
from genlab.nas.spaces.darts.space import ROBUST_PROXY, DartsFamilySpace

SKIP, SEP3 = "skip_connect", "sep_conv_3x3"
DIL3, DIL5, MAX, AVG = "dil_conv_3x3", "dil_conv_5x5", "max_pool_3x3", "avg_pool_3x3"

S1_NORMAL = [(SKIP, DIL3), (SKIP, DIL5), (SKIP, DIL5), (SKIP, SEP3), (SKIP, DIL3), (MAX, SKIP),
             (SKIP, SEP3), (SKIP, SEP3), (SKIP, DIL3), (SKIP, SEP3), (MAX, SKIP), (SKIP, DIL3),
             (DIL3, DIL5), (DIL3, DIL5)]
S1_REDUCE = [(MAX, AVG), (MAX, DIL3), (MAX, AVG), (MAX, AVG), (SKIP, DIL5), (MAX, AVG),
             (MAX, SEP3), (SKIP, DIL3), (SKIP, DIL5), (MAX, AVG), (MAX, AVG), (SKIP, DIL5),
             (SKIP, DIL5), (SKIP, DIL5)]


def _uniform(ops: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [ops] * edge_count()


S1 = register_space(DartsFamilySpace(
    "s1", "RobustDARTS S1: two ops per edge (per-edge table), normal + reduce",
    S1_NORMAL, S1_REDUCE, ROBUST_PROXY))
S2 = register_space(DartsFamilySpace(
    "s2", "RobustDARTS S2: skip_connect, sep_conv_3x3 on every edge",
    _uniform((SKIP, SEP3)), _uniform((SKIP, SEP3)), ROBUST_PROXY))
S3 = register_space(DartsFamilySpace(
    "s3", "RobustDARTS S3: none, skip_connect, sep_conv_3x3 on every edge",
    _uniform(("none", SKIP, SEP3)), _uniform(("none", SKIP, SEP3)), ROBUST_PROXY))
S4 = register_space(DartsFamilySpace(
    "s4", "RobustDARTS S4: noise (N(0, 1)), sep_conv_3x3 on every edge",
    _uniform(("noise", SEP3)), _uniform(("noise", SEP3)), ROBUST_PROXY))
