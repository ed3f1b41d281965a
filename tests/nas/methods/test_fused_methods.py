"""The methods' supernet options on the fused DARTS cell equal the per-edge cell (their
definition, genlab.nas.supernet.cells.MixedOp): DARTS-' auxiliary skip, R-DARTS' drop-path,
PC-DARTS' partial channels and edge normalisation, alone and together; logits, alpha and
beta gradients, every weight gradient, BN statistics, in float64 on the same weights, inputs
and random draws. And a search on the fused parts, stopped and resumed, equals an
uninterrupted one."""

import pytest
import torch
from fused_equality import assert_same_step

import genlab.nas.supernet.ops as ops_mod
from genlab.core.runs import CHECKPOINT
from genlab.nas.methods import search_method
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import get_space
from genlab.nas.spaces.darts.fused import FusedCell
from genlab.nas.supernet.cells import channel_shuffle
from genlab.nas.supernet.nodesum import channels_last, shuffle_join


@pytest.fixture
def fixed_noise(monkeypatch):
    """The noise op returns a fixed function of its shape (no draw from the generator), so
    both layouts see the same noise and the same drop-path masks."""
    def noise(shape, like):
        n = torch.arange(torch.Size(shape).numel(), dtype=like.dtype).reshape(shape)
        return torch.sin(n).to(like.device)

    monkeypatch.setattr(ops_mod, "draw_noise", noise)
    monkeypatch.setattr("genlab.nas.spaces.darts.fused.draw_noise", noise)


def _pair(space, options, C=8, cells=3, knobs=None, channels_last=None):
    sp = get_space(space)
    torch.manual_seed(0)
    kw = dict(num_classes=5, in_channels=1, channels=C, cells=cells, **options)
    ref = sp.build_supernet(per_edge=True, **kw).double()
    ours = sp.build_supernet(**kw).double()
    assert isinstance(ours.cells[0].core, FusedCell) and not ours.per_edge
    if channels_last is not None:
        assert ours.channels_last == channels_last
    with torch.no_grad():
        for a in ref.arch_parameters():
            a.normal_()
    ours.load_per_edge(ref)
    for net in (ours, ref):
        net.set_knobs(**(knobs or {}))
    return ours, ref


def _check_grads(ours, ref):
    for a, b in zip(ours.arch_parameters(), ref.arch_parameters(), strict=True):
        assert b.grad is not None and b.grad.abs().sum() > 0
        torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=1e-8)
    outside = dict(ref.named_parameters())
    arch = {id(p) for p in ours.arch_parameters()}
    for name, p in ours.named_parameters():
        if ".core." not in name and id(p) not in arch:
            torch.testing.assert_close(p.grad, outside[name].grad, atol=1e-10, rtol=1e-8,
                                       msg=name)
    for mine, theirs in zip(ours.cells, ref.cells, strict=True):
        expected = mine.core.per_edge_tensors(theirs.core, "grad")
        assert set(mine.core.grads()) == set(expected)
        for name, grad in mine.core.grads().items():
            torch.testing.assert_close(grad, expected[name], atol=1e-10, rtol=1e-8, msg=name)
        for name, value in mine.core.per_edge_tensors(theirs.core).items():
            if "_bn" in name:  # BN statistics after the forward
                torch.testing.assert_close(getattr(mine.core, name), value, msg=name)


CASES = {
    "darts-minus": ({"aux_skip": True}, {"aux_scale": 0.7}),
    "rdarts-dp": ({"drop_path": True}, {"drop_prob": 0.4}),
    "pc-darts": ({"partial_channels": 4, "edge_norm": True}, {}),
    "partial channels alone": ({"partial_channels": 2}, {}),
    "all together": ({"partial_channels": 2, "edge_norm": True, "aux_skip": True,
                      "drop_path": True}, {"aux_scale": 0.3, "drop_prob": 0.5}),
}


@pytest.mark.parametrize("space", ["darts", "s1", "s4"])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_options_equal_per_edge(space, case, fixed_noise):
    _equal_to_per_edge(space, *CASES[case])


@pytest.mark.parametrize("k", [2, 4])
def test_partial_channels_in_channels_last(k, fixed_noise):
    """Ops 2-8 channels wide in the fused supernet's channels_last layout (the shuffle keeps
    it), the per-edge one in NCHW."""
    _equal_to_per_edge("darts", {"partial_channels": k, "edge_norm": True, "drop_path": True},
                       {"drop_prob": 0.2}, C=16, channels_last=True)


def _equal_to_per_edge(space, options, knobs, C=8, channels_last=None):
    ours, ref = _pair(space, options, C=C, knobs=knobs, channels_last=channels_last)
    x, lo = assert_same_step(ours, ref, _check_grads)
    if options.get("drop_path"):  # the masks did drop something: other masks, other logits
        ours.train()
        torch.manual_seed(8)
        assert (ours(x) - lo).abs().max() > 1e-3


def test_second_order_gradients_through_the_fused_options(fixed_noise):
    """The alpha gradient of a weight gradient's norm (what the second-order step
    differentiates) agrees too: the fused backward is itself differentiable."""
    options, knobs = CASES["all together"]
    ours, ref = _pair("darts", options, C=4, cells=3, knobs=knobs)
    x = torch.randn(4, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    out = []
    for net in (ours, ref):
        torch.manual_seed(3)
        loss = net(x).square().mean()
        w = [p for n, p in net.named_parameters() if n.startswith("stem")]
        grads = torch.autograd.grad(loss, w, create_graph=True)
        out.append(torch.autograd.grad(sum(gr.square().sum() for gr in grads),
                                       net.arch_parameters()))
    for a, b in zip(*out, strict=True):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


def test_every_option_under_bf16_autocast():
    """The search's bf16 autocast: float32 masks and weights meet bfloat16 ops in the node
    sums; the logits stay within bfloat16 rounding of the float32 ones."""
    options, knobs = CASES["all together"]
    net = get_space("darts").build_supernet(num_classes=5, in_channels=1, channels=16, cells=3,
                                            **{**options, "partial_channels": 2})
    net.set_knobs(**knobs)
    x = torch.randn(8, 1, 8, 8, generator=torch.Generator().manual_seed(4))
    torch.manual_seed(5)
    want = net(x)
    torch.manual_seed(5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = net(x)
    assert ((got.float() - want).norm() / want.norm()) < 0.05
    got.float().square().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in net.arch_parameters())


@pytest.mark.parametrize("options", [{}, {"drop_path": True}, {"partial_channels": 2}])
def test_every_node_stays_channels_last(options):
    """Reduction cells included (their FactorizedReduce stack, the node sums, the shuffle):
    a node in NCHW sends every later conv and BN down oneDNN's slow mixed-layout paths."""
    net = get_space("darts").build_supernet(num_classes=5, in_channels=1, channels=16, cells=3,
                                            **options)
    net.set_knobs(drop_prob=0.2)
    assert net.channels_last
    layouts = []
    for cell in net.cells:
        cell.register_forward_hook(lambda m, i, nodes: layouts.extend(map(channels_last, nodes)))
    net(torch.randn(4, 1, 8, 8)).sum().backward()
    assert layouts == [True] * 12


def test_shuffle_join_is_cat_then_channel_shuffle():
    ops, rest = torch.randn(2, 3, 4, 5), torch.randn(2, 9, 4, 5)
    want = channel_shuffle(torch.cat([ops, rest], 1), 4)
    assert torch.equal(shuffle_join(ops, rest, 4), want)
    last = shuffle_join(ops.contiguous(memory_format=torch.channels_last),
                        rest.contiguous(memory_format=torch.channels_last), 4)
    assert torch.equal(last, want) and last.is_contiguous(memory_format=torch.channels_last)


def test_sampled_edges_stay_per_edge():
    net = get_space("darts").build_supernet(channels=4, cells=2, sampled=True)
    assert net.per_edge


def test_stopped_and_resumed_fused_search_equals_uninterrupted(tmp_path):
    """PC-DARTS with DARTS-' skip and R-DARTS' drop-path on top: every fused part, and the
    drop-path draws continue from the checkpoint's generator state."""
    cfg = SearchConfig(space="darts", method="pc-darts",
                       supernet_params={"aux_skip": True, "drop_path": 0.6, "arch_start": 0.0},
                       channels=8, cells=2, steps=22, batch_size=64,
                       hessian_points=0, diag_batch=16, reg="none", seed=2)
    full = run_search(cfg, tmp_path / "full")
    stopped = run_search(cfg, tmp_path / "part", stop_at=11)  # one epoch of 11 steps
    assert stopped["stopped_at"] == 11
    resumed = run_search(cfg, tmp_path / "part", resume=True)
    assert resumed["alpha"] == full["alpha"] and resumed["genotype"] == full["genotype"]
    assert resumed["method"] == "pc-darts"


@pytest.mark.parametrize("method", ["darts-minus", "rdarts-dp", "pc-darts"])
def test_killed_and_resumed_method_search_equals_uninterrupted(tmp_path, method):
    """Each method at its own preset on the fused cell (the skip's beta, the drop-path ramp,
    PC-DARTS' frozen alpha, all by step): stopped at step 16, five steps past its last
    checkpoint (step 11, the first epoch), as a kill would leave it, then resumed. Genotype,
    alphas and every weight, buffer and beta equal the uninterrupted search's exactly."""
    cfg = SearchConfig(space="darts", method=method, channels=8, cells=2, steps=22,
                       batch_size=64, hessian_points=0, diag_batch=16, seed=3)
    net = get_space("darts").build_supernet(channels=8, cells=2,
                                            **search_method(cfg.resolved()).supernet_options)
    assert isinstance(net.cells[0].core, FusedCell)  # what the search below builds
    full = run_search(cfg, tmp_path / "full")
    assert run_search(cfg, tmp_path / "part", stop_at=16)["stopped_at"] == 16
    resumed = run_search(cfg, tmp_path / "part", resume=True)
    assert resumed["method"] == method
    assert resumed["genotype"] == full["genotype"] and resumed["alpha"] == full["alpha"]
    want, got = (torch.load(tmp_path / run / CHECKPOINT, weights_only=True)
                 for run in ("full", "part"))
    assert got["step"] == want["step"] == 22
    assert want["net"].keys() == got["net"].keys()
    for name, value in want["net"].items():
        assert torch.equal(got["net"][name], value), name
