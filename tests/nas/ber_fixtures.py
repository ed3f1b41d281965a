"""The tiny float64 NB201 supernet the BER candidate tests share (imported by name: pytest puts
this folder on sys.path)."""

import pytest
import torch
import torch.nn.functional as F

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


def hand_costs(probe, sources, n_ops, cost) -> list[list[float]]:
    """A per-op cost table by hand: row r, op k = the mean over the traced cells of
    cost(edge input, op k's output or None for `none`), both detached (values only)."""
    def detached(t):
        return None if t is None else t.detach()

    table = []
    for r, s in enumerate(sources):
        row = []
        for k in range(n_ops):
            per_cell = [float(cost(detached((tr.inputs + tr.nodes)[s]),
                                   detached(probe.ops.get(("cell", tr.index, r, k)))))
                        for tr in probe.traces]
            row.append(sum(per_cell) / len(per_cell))
        table.append(row)
    return table


def assert_per_op_gradient(reg, net, probe, costs, labels=None):
    """grad_alpha of R = mean_e sum_k p_ek c_ek (c held fixed) against FD and p (c - p.c)/|E|."""
    alpha = net.alphas()["cell"]
    loss = reg(net.alphas(), 0, 10, probe, None, labels)
    grad, = torch.autograd.grad(loss, [alpha])
    base = alpha.detach().clone()
    eps = 1e-6

    def value(a):
        return float((F.softmax(a, -1) * costs).sum(-1).mean())

    for r, k in [(0, 0), (2, 1), (5, 3), (3, 4), (1, 2)]:
        bump = torch.zeros_like(base)
        bump[r, k] = eps
        fd = (value(base + bump) - value(base - bump)) / (2 * eps)
        assert grad[r, k].item() == pytest.approx(fd, rel=1e-6, abs=1e-12)
    p = F.softmax(base, -1)
    closed = p * (costs - (p * costs).sum(-1, keepdim=True)) / base.shape[0]
    assert torch.allclose(grad, closed, atol=1e-12)
