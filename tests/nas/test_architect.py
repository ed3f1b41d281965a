"""Second-order (unrolled) architecture gradient against the exact hypergradient by autograd."""

import pytest
import torch
import torch.nn.functional as F

from genlab.nas.architect import (
    WeightStep,
    exact_unrolled_arch_grads,
    momentum_buffers,
    unrolled_arch_grads,
)
from genlab.nas.regularizers import make_regularizer
from genlab.nas.spaces import get_space


def _setup(space, seed=0):
    torch.manual_seed(seed)
    sp = get_space(space)
    cells = None if sp.proxy.cells is None else 3
    net = sp.build_supernet(num_classes=3, in_channels=1, channels=2, cells=cells,
                            **sp.proxy.options).double()
    with torch.no_grad():
        for a in net.arch_parameters():
            a.normal_()
    g = torch.Generator().manual_seed(seed + 1)
    xt, xv = (torch.randn(6, 1, 8, 8, generator=g, dtype=torch.float64) for _ in range(2))
    yt, yv = (torch.randint(0, 3, (6,), generator=g) for _ in range(2))
    opt = torch.optim.SGD(net.weight_parameters(), lr=0.1, momentum=0.9, weight_decay=3e-4)
    for p in net.weight_parameters():  # a momentum buffer as after some steps
        opt.state[p]["momentum_buffer"] = 0.1 * torch.randn(p.shape, generator=g,
                                                            dtype=torch.float64)
    return net, opt, (xt, yt), (xv, yv)


def _objective(reg, net):
    alphas = net.alphas()

    def objective(call, x, y):
        probe = reg.make_probe()
        logits = call(x) if probe is None else call(x, probe=probe)
        return F.cross_entropy(logits, y) + reg(alphas, 10, 20, probe)

    return objective


@pytest.mark.parametrize("space, reg_name", [
    ("nb201", "none"), ("nb201", "ber-batch"), ("s3", "beta"), ("s3", "ber-batch"),
])
def test_finite_difference_hypergradient_matches_autograd(space, reg_name):
    net, opt, train, val = _setup(space)
    reg = make_regularizer(reg_name, strength=2.0, schedule="constant", steps_per_epoch=1)
    step = WeightStep.of(opt)
    assert (step.lr, step.momentum, step.weight_decay) == (0.1, 0.9, 3e-4)
    buffers = momentum_buffers(net, opt)
    state = {k: v.clone() for k, v in net.state_dict().items()}
    # A small radius: upstream's r = 0.01 also differentiates across ReLU kinks, which the
    # autograd derivative ignores (docs/nas_spaces.md measures how much); here the
    # machinery (virtual step, momentum, decay, regulariser, HVP) must be exact.
    approx = unrolled_arch_grads(net, train, val, _objective(reg, net), step, buffers, r=1e-8)
    exact = exact_unrolled_arch_grads(net, train, val, _objective(reg, net), step, buffers)
    for a, b in zip(approx, exact, strict=True):
        assert float((a - b).norm() / b.norm()) < 1e-5
    for k, v in net.state_dict().items():  # weights, alphas and BN statistics untouched
        assert torch.equal(v, state[k]), k
    # the second-order term matters, and the regulariser's term is in the result
    first = torch.autograd.grad(_objective(reg, net)(net, *val), net.arch_parameters())
    assert max(float((a - f).norm()) for a, f in zip(approx, first, strict=True)) > 1e-6
    if reg_name != "none":
        plain = exact_unrolled_arch_grads(net, train, val,
                                          _objective(make_regularizer("none"), net), step,
                                          buffers)
        assert max(float((a - p).norm()) for a, p in zip(approx, plain, strict=True)) > 1e-4


def test_second_order_search_step_moves_alpha_and_keeps_buffers(tmp_path):
    from genlab.nas.search import bilevel_step

    net, opt, train, val = _setup("s2")
    a_opt = torch.optim.Adam(net.arch_parameters(), lr=0.1)
    before = [a.detach().clone() for a in net.arch_parameters()]
    tl, vl = bilevel_step(net, a_opt, opt, train, val, make_regularizer("beta"), 5, 10, 5.0,
                          order=2)
    assert tl > 0 and vl > 0
    assert all(not torch.equal(a, b) for a, b in zip(net.arch_parameters(), before, strict=True))
