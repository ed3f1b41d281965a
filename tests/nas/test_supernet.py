"""NB201SuperNet equals the per-edge reference supernet (logits, gradients, BN state)."""


import pytest
import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError
from genlab.nas.genotype import Genotype
from genlab.nas.spaces import NB201_OPS
from genlab.nas.supernet import NB201SuperNet, NodeSum


@pytest.fixture(scope="module")
def bench(nas_step_bench):
    return nas_step_bench


def _pair(bench, ops=NB201_OPS, C=4, N=2, in_channels=3, seed=0, channels_last=True):
    torch.manual_seed(seed)
    ref = bench.ReferenceSuperNet(C=C, N=N, num_classes=7, in_channels=in_channels, ops=ops)
    ours = NB201SuperNet(C=C, N=N, num_classes=7, in_channels=in_channels, ops=ops,
                         channels_last=channels_last)
    with torch.no_grad():
        ref.arch_params.normal_()  # far from uniform so that a wrong weighting would show
        for m in ref.modules():  # the reference's cell-conv biases cancel in BN: make them big
            if isinstance(m, torch.nn.Conv2d) and m.bias is not None:
                m.bias.normal_()
    bench.copy_reference_into(ours, ref)
    return ours.double(), ref.double()


@pytest.mark.parametrize("ops, channels_last", [
    (NB201_OPS, True), (NB201_OPS, False),
    (("skip_connect", "nor_conv_3x3", "avg_pool_3x3"), True), (("none", "nor_conv_1x1"), True)])
def test_same_logits_and_grads_as_reference(bench, ops, channels_last):
    ours, ref = _pair(bench, ops, channels_last=channels_last)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 3, 8, 8, generator=g, dtype=torch.float64)
    y = torch.randint(0, 7, (6,), generator=g)
    lo, lr = ours(x), ref(x)
    torch.testing.assert_close(lo, lr, atol=1e-9, rtol=1e-9)
    F.cross_entropy(lo, y).backward()
    F.cross_entropy(lr, y).backward()
    for name, a, b in bench.grads_by_ours_name(ours, ref):
        torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-7, msg=name)
    assert ours.arch_params.grad.abs().sum() > 0


def test_float32_and_running_stats_and_eval_match(bench):
    ours, ref = _pair(bench)
    ours.float()
    ref.float()
    with torch.no_grad():  # zero biases so running means agree exactly, not only asymptotically
        for m in ref.modules():
            if isinstance(m, torch.nn.Conv2d) and m.bias is not None:
                m.bias.zero_()
    x = torch.randn(8, 3, 8, 8)
    for _ in range(2):
        torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)
    ours.eval()
    ref.eval()
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)


def test_bilevel_steps_stay_equal(bench):
    ours, ref = _pair(bench, C=4, N=1)
    ours.float()
    ref.float()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 8, 3, 8, 8, generator=g)
    y = torch.randint(0, 7, (2, 8), generator=g)
    data = (x[0], y[0], x[1], y[1])
    ro, rr = bench.Bilevel(ours), bench.Bilevel(ref)
    for _ in range(3):
        ro.step(*data)
        rr.step(*data)
    torch.testing.assert_close(ours.arch_params, ref.arch_params, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours(data[0]), ref(data[0]), atol=1e-4, rtol=1e-4)


def test_return_cells_shapes_and_grad_path():
    net = NB201SuperNet(C=4, N=2, num_classes=5, in_channels=1)
    x = torch.randn(3, 1, 8, 8)
    logits, cells = net(x, return_cells=True)
    assert logits.shape == (3, 5)
    assert len(cells) == 3 * 2
    expected = [(4, 8)] * 2 + [(8, 4)] * 2 + [(16, 2)] * 2
    for (cin, cout), (c, s) in zip(cells, expected, strict=True):
        assert cin.shape == cout.shape == (3, c, s, s)
    grad = torch.autograd.grad(cells[0][1].pow(2).mean(), net.arch_params)[0]
    assert grad.abs().sum() > 0
    assert net.arch_params.shape == (6, 5)
    names = {id(p) for p in net.weight_parameters()}
    assert id(net.arch_params) not in names
    assert len(names) + 1 == len(list(net.parameters()))


def test_genotype_and_sizes():
    net = NB201SuperNet(C=2, N=1)
    with torch.no_grad():
        net.arch_params.zero_()
        net.arch_params[:, NB201_OPS.index("nor_conv_1x1")] = 1.0
    assert net.genotype() == Genotype.from_edges(["nor_conv_1x1"] * 6)
    for kw in (dict(C=0), dict(N=-1), dict(num_classes=0), dict(in_channels=0),
               dict(ops=("conv_7x7",)), dict(ops=())):
        with pytest.raises(ConfigError):
            NB201SuperNet(**kw)


@pytest.mark.parametrize("n_plain, scaled", [(0, False), (1, True), (3, True), (2, False)])
def test_node_sum_gradcheck(n_plain, scaled):
    g = torch.Generator().manual_seed(n_plain)

    def t():
        return torch.randn(2, 3, 4, 4, generator=g, dtype=torch.float64, requires_grad=True)

    plain = [t() for _ in range(n_plain)]
    cl = t().detach().contiguous(memory_format=torch.channels_last).requires_grad_()
    weighted = [t(), torch.rand((), generator=g, dtype=torch.float64, requires_grad=True),
                cl, torch.rand((), generator=g, dtype=torch.float64, requires_grad=True)]
    scale = torch.rand(1, 1, 4, 4, generator=g, dtype=torch.float64) if scaled else None
    scales = (None, scale)
    inputs = (*plain, *weighted)
    out = NodeSum.apply(n_plain, scales, *inputs)
    expected = sum(plain) + weighted[0] * weighted[1] + weighted[2] * weighted[3] * (
        1.0 if scale is None else scale)
    torch.testing.assert_close(out, expected)
    assert torch.autograd.gradcheck(lambda *a: NodeSum.apply(n_plain, scales, *a), inputs)
