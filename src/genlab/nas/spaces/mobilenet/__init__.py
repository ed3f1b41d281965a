"""The MobileNet-like space (ProxylessNAS layout): blocks, supernet, genotype, network, space.

Importing this package registers the space ``mobilenet`` (genlab.nas.spaces.mobilenet.space).
"""

from genlab.nas.spaces.mobilenet.space import MOBILENET, MobileNetSpace

__all__ = ["MOBILENET", "MobileNetSpace"]
