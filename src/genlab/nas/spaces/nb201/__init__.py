"""NAS-Bench-201: its genotype, supernet, discrete network, accuracy table and the space.

Importing this package registers the space ``nb201`` (genlab.nas.spaces.nb201.space).
"""

from genlab.nas.spaces.nb201.space import NB201, NB201Space

__all__ = ["NB201", "NB201Space"]
