"""The DARTS family: genotype, supernet (fused and per-edge), evaluation network, the spaces.

Importing this package registers ``darts`` and ``darts-7op`` (genlab.nas.spaces.darts.space)
and RobustDARTS ``s1``-``s4`` (genlab.nas.spaces.darts.robust).
"""

from genlab.nas.spaces.darts.robust import S1, S2, S3, S4
from genlab.nas.spaces.darts.space import DARTS, DARTS_7OP, DartsFamilySpace

__all__ = ["DARTS", "DARTS_7OP", "S1", "S2", "S3", "S4", "DartsFamilySpace"]
