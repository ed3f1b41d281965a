"""The tiny float64 NB201 supernet the BER candidate tests share (imported by name: pytest puts
this folder on sys.path)."""

import torch

from genlab.nas.regularizers import make_regularizer
from genlab.nas.regularizers.per_op import edge_sources
from genlab.nas.spaces import get_space


def tiny_net(seed=0, batch=6):
    """(space, net, x, y): C=2, N=1, 3 classes, alpha ~ N(0, 0.5), ``batch`` 8x8 images."""
    torch.manual_seed(seed)
    space = get_space("nb201")
    net = space.build_supernet(num_classes=3, in_channels=1, channels=2, cells=1).double()
    with torch.no_grad():
        net.alphas()["cell"].normal_(0, 0.5)
    x = torch.randn(batch, 1, 8, 8, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 1, 2] * (batch // 3))
    return space, net, x, y


def per_op_forward(name, batch=6):
    """A per-op candidate set up on the tiny net, after one forward with its probe: (net, y,
    regulariser, probe, op names, edge sources)."""
    space, net, x, y = tiny_net(batch=batch)
    reg = make_regularizer(name, strength=1.0)
    reg.setup(net, x, space)
    probe = reg.make_probe()
    net(x, probe=probe)
    spec = space.alpha_specs()["cell"]
    return net, y, reg, probe, spec.ops[0], edge_sources(spec.rows)
