"""NB201SuperNet (fused) equals the per-edge reference supernet (logits, gradients, BN state),
with the methods' supernet options too (genlab.nas.supernet.cells.MixedOp is their definition)."""

import pytest
import torch
import torch.nn.functional as F
from fused_equality import assert_same_step

from genlab.core.errors import ConfigError
from genlab.nas.methods import build_supernet
from genlab.nas.spaces.nb201.genotype import NB201_EDGES, NB201_OPS, Genotype
from genlab.nas.spaces.nb201.supernet import NB201SuperNet, NodeSum, SearchCell
from genlab.nas.supernet.ops import CONV_KERNELS, ResidualBlock
from genlab.nas.supernet.probe import CellTraces


def _pair(ops=NB201_OPS, C=4, N=2, in_channels=3, seed=0, channels_last=True):
    torch.manual_seed(seed)
    ref = NB201SuperNet(C=C, N=N, num_classes=7, in_channels=in_channels, ops=ops,
                        per_edge=True)
    ours = NB201SuperNet(C=C, N=N, num_classes=7, in_channels=in_channels, ops=ops,
                         channels_last=channels_last)
    with torch.no_grad():
        ref.arch_params.normal_()  # far from uniform so that a wrong weighting would show
        for m in ref.modules():  # the reference's cell-conv biases cancel in BN: make them big
            if isinstance(m, torch.nn.Conv2d) and m.bias is not None:
                m.bias.normal_()
    ours.load_per_edge(ref)
    return ours.double(), ref.double()


def grads_by_name(ours, ref):
    """(name, fused grad, per-edge grad) for every parameter (cell convs per edge)."""
    out = [(f"arch{i}", p.grad, q.grad) for i, (p, q) in enumerate(
        zip(ours.arch_parameters(), ref.arch_parameters(), strict=True))]
    for part in ("stem", "head"):
        for (n, p), (_, q) in zip(getattr(ours, part).named_parameters(),
                                  getattr(ref, part).named_parameters(), strict=True):
            out.append((f"{part}.{n}", p.grad, q.grad))
    for mine, theirs in zip(ours.cells, ref.cells, strict=True):
        if isinstance(mine, ResidualBlock):
            for (n, p), (_, q) in zip(mine.named_parameters(), theirs.named_parameters(),
                                      strict=True):
                out.append((f"res.{n}", p.grad, q.grad))
    for k, (mine, theirs) in enumerate(zip(ours.search_cells(), ref.search_cells(),
                                           strict=True)):
        for edge in NB201_EDGES:
            for name in CONV_KERNELS:
                if name in ours.ops:
                    target, source = (int(v) for v in edge.split("<-"))
                    slot, c = target - source - 1, mine.width
                    g = mine.convs[f"{name}_from{source}"].grad[slot * c:(slot + 1) * c]
                    conv = theirs.edges[edge].ops[ours.ops.index(name)].op[1]
                    out.append((f"cell{k}.{edge}.{name}", g, conv.weight.grad))
    return out


@pytest.mark.parametrize("ops, channels_last", [
    (NB201_OPS, True), (NB201_OPS, False),
    (("skip_connect", "nor_conv_3x3", "avg_pool_3x3"), True), (("none", "nor_conv_1x1"), True)])
def test_same_logits_and_grads_as_reference(ops, channels_last):
    ours, ref = _pair(ops, channels_last=channels_last)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 3, 8, 8, generator=g, dtype=torch.float64)
    y = torch.randint(0, 7, (6,), generator=g)
    lo, lr = ours(x), ref(x)
    torch.testing.assert_close(lo, lr, atol=1e-9, rtol=1e-9)
    F.cross_entropy(lo, y).backward()
    F.cross_entropy(lr, y).backward()
    for name, a, b in grads_by_name(ours, ref):
        torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-7, msg=name)
    assert ours.arch_params.grad.abs().sum() > 0


def test_float32_and_running_stats_and_eval_match():
    ours, ref = _pair()
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


def test_bilevel_steps_stay_equal():
    ours, ref = _pair(C=4, N=1)
    ours.float()
    ref.float()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 8, 3, 8, 8, generator=g)
    y = torch.randint(0, 7, (2, 8), generator=g)
    opts = []
    for net in (ours, ref):
        opts.append((torch.optim.Adam(net.arch_parameters(), lr=3e-4, betas=(0.5, 0.999)),
                     torch.optim.SGD(net.weight_parameters(), lr=0.025, momentum=0.9)))
    for _ in range(3):
        for net, (a_opt, w_opt) in zip((ours, ref), opts, strict=True):
            a_opt.zero_grad()
            F.cross_entropy(net(x[1]), y[1]).backward()
            a_opt.step()
            w_opt.zero_grad()
            F.cross_entropy(net(x[0]), y[0]).backward()
            w_opt.step()
    torch.testing.assert_close(ours.arch_params, ref.arch_params, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours(x[0]), ref(x[0]), atol=1e-4, rtol=1e-4)


def test_probe_reports_the_same_nodes_and_ops_as_the_reference():
    ours, ref = _pair(C=3, N=1)
    x = torch.randn(5, 3, 8, 8, dtype=torch.float64)
    p_ours, p_ref = CellTraces(ops=True), CellTraces(ops=True)
    torch.testing.assert_close(ours(x, probe=p_ours), ref(x, probe=p_ref))
    assert [t.alpha for t in p_ours.traces] == ["cell"] * 3
    assert [t.index for t in p_ours.traces] == [0, 1, 2]
    for a, b in zip(p_ours.traces, p_ref.traces, strict=True):
        assert len(a.nodes) == 3 and a.output is a.nodes[-1]
        for u, v in zip(a.nodes, b.nodes, strict=True):
            torch.testing.assert_close(u, v, atol=1e-10, rtol=1e-9)
    assert set(p_ours.ops) == set(p_ref.ops) and len(p_ours.ops) == 3 * 6 * 5
    for key, value in p_ours.ops.items():
        if NB201_OPS[key[3]] == "none":
            assert value is None and p_ref.ops[key] is None
        else:
            torch.testing.assert_close(value, p_ref.ops[key], atol=1e-10, rtol=1e-9)
    # the same forward with an op-wanting probe gives the same logits as the fast path
    torch.testing.assert_close(ours(x), ours(x, probe=CellTraces(ops=True)))


def test_node_outputs_carry_the_graph_to_alpha():
    net = NB201SuperNet(C=4, N=2, num_classes=5, in_channels=1)
    probe = CellTraces()
    logits = net(torch.randn(3, 1, 8, 8), probe=probe)
    assert logits.shape == (3, 5) and len(probe.traces) == 3 * 2
    expected = [(4, 8)] * 2 + [(8, 4)] * 2 + [(16, 2)] * 2
    for trace, (c, s) in zip(probe.traces, expected, strict=True):
        assert trace.inputs[0].shape == trace.output.shape == (3, c, s, s)
    grad = torch.autograd.grad(probe.traces[0].nodes[0].pow(2).mean(), net.arch_params)[0]
    assert grad.abs().sum() > 0
    assert list(net.alphas()) == ["cell"] and net.alphas()["cell"] is net.arch_params
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


# the methods' supernet options (options, knobs): DARTS-' auxiliary skip, R-DARTS' drop-path,
# PC-DARTS' partial channels and edge normalisation, alone and together
OPTION_CASES = {
    "darts-minus": ({"aux_skip": True}, {"aux_scale": 0.7}),
    "darts-minus, no skip_connect op": (
        {"aux_skip": True, "ops": ("none", "nor_conv_3x3", "avg_pool_3x3")}, {"aux_scale": 0.7}),
    "rdarts-dp": ({"drop_path": True}, {"drop_prob": 0.4}),
    "pc-darts": ({"partial_channels": 4, "edge_norm": True}, {}),
    "partial channels alone": ({"partial_channels": 2}, {}),
    "all together": ({"partial_channels": 2, "edge_norm": True, "aux_skip": True,
                      "drop_path": True}, {"aux_scale": 0.3, "drop_prob": 0.5}),
}


def _option_pair(options, knobs, channels_last=True):
    """Fused and per-edge supernets with ``options`` on the same weights, in float64."""
    torch.manual_seed(0)
    kw = dict(C=8, N=1, num_classes=5, in_channels=1, **options)
    ref = NB201SuperNet(per_edge=True, **kw).double()
    ours = NB201SuperNet(channels_last=channels_last, **kw).double()
    assert ref.per_edge and not ours.per_edge
    assert all(isinstance(c, SearchCell) for c in ours.search_cells())
    with torch.no_grad():
        for a in ref.arch_parameters():
            a.normal_()  # far from uniform, betas included
        for m in ref.modules():  # no conv bias: the running statistics agree exactly
            if isinstance(m, torch.nn.Conv2d) and m.bias is not None:
                m.bias.zero_()
    ours.load_per_edge(ref)
    for net in (ours, ref):
        net.set_knobs(**knobs)
    return ours, ref


@pytest.mark.parametrize("case, channels_last", [(c, True) for c in OPTION_CASES]
                         + [("all together", False)])
def test_method_options_on_the_fused_cell_equal_per_edge(case, channels_last):
    """Logits, every weight, alpha and beta gradient, and the evaluation logits (the BN
    running statistics after the step) on the same weights, inputs and drop-path draws."""
    options, knobs = OPTION_CASES[case]
    ours, ref = _option_pair(options, knobs, channels_last)

    def check_grads(ours, ref):
        for name, a, b in grads_by_name(ours, ref):
            torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8, msg=name)
        assert all(p.grad.abs().sum() > 0 for p in ours.arch_parameters())

    x, lo = assert_same_step(ours, ref, check_grads)
    assert len(ours.arch_parameters()) == 1 + bool(options.get("edge_norm"))
    if options.get("drop_path"):  # the masks did drop something: other masks, other logits
        ours.train()
        torch.manual_seed(8)
        assert (ours(x) - lo).abs().max() > 1e-3


def test_aux_skip_weight_moves_the_fused_logits_as_per_edge():
    """beta 0 is the plain supernet; another beta changes the logits (the knob is read)."""
    options, knobs = OPTION_CASES["darts-minus"]
    ours, ref = _option_pair(options, {"aux_scale": 0.0})
    plain, _ = _option_pair({}, {})
    x = torch.randn(4, 1, 8, 8, dtype=torch.float64)
    torch.testing.assert_close(ours(x), plain(x), atol=1e-10, rtol=1e-9)
    ours.set_knobs(**knobs)
    assert (ours(x) - plain(x)).abs().max() > 1e-3


def test_second_order_gradients_through_the_fused_options():
    """The alpha and beta gradients of a weight gradient's norm (what the second-order step
    differentiates) agree: the fused backward is itself differentiable."""
    ours, ref = _option_pair(*OPTION_CASES["all together"])
    x = torch.randn(4, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    out = []
    for net in (ours, ref):
        torch.manual_seed(3)
        loss = net(x).square().mean()
        w = list(net.stem.parameters())
        grads = torch.autograd.grad(loss, w, create_graph=True)
        out.append(torch.autograd.grad(sum(gr.square().sum() for gr in grads),
                                       net.arch_parameters()))
    for a, b in zip(*out, strict=True):
        assert b.abs().sum() > 0
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


def test_probe_reports_the_ops_of_the_fused_options_as_per_edge():
    """Unscaled op outputs (PC-DARTS: on the first C/K channels) and nodes, and the logits
    under the probe equal the fast path's."""
    options, knobs = OPTION_CASES["all together"]
    ours, ref = _option_pair(options, knobs)
    x = torch.randn(5, 1, 8, 8, dtype=torch.float64)
    p_ours, p_ref = CellTraces(ops=True), CellTraces(ops=True)
    torch.manual_seed(4)
    lo = ours(x, probe=p_ours)
    torch.manual_seed(4)
    torch.testing.assert_close(lo, ref(x, probe=p_ref), atol=1e-10, rtol=1e-9)
    torch.manual_seed(4)
    torch.testing.assert_close(lo, ours(x), atol=1e-10, rtol=1e-9)
    for a, b in zip(p_ours.traces, p_ref.traces, strict=True):
        for u, v in zip(a.nodes, b.nodes, strict=True):
            torch.testing.assert_close(u, v, atol=1e-10, rtol=1e-9)
    assert set(p_ours.ops) == set(p_ref.ops) and len(p_ours.ops) == 3 * 6 * 5
    for key, value in p_ours.ops.items():
        if value is None:
            assert p_ref.ops[key] is None
        else:
            assert value.shape[1] == ours.search_cells()[key[1]].width
            torch.testing.assert_close(value, p_ref.ops[key], atol=1e-10, rtol=1e-9)


@pytest.mark.parametrize("method, fused", [("darts-minus", True), ("rdarts-dp", True),
                                           ("pc-darts", True), ("gdas", False)])
def test_methods_take_the_fused_cell(method, fused):
    """The presets' supernets: every structural option but GDAS' sampled edges is fused."""
    net = build_supernet("nb201", method, channels=8, cells=1)
    assert net.per_edge is not fused
    assert all(isinstance(c, SearchCell) for c in net.search_cells()) is fused
