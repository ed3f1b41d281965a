"""The search-space protocol, over every registered space (no space is named here)."""

import pytest
import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError, SpecError
from genlab.nas.spaces import AlphaSpec, get_space, space_names
from genlab.nas.supernet.probe import CellTraces

SPACES = space_names()


def tiny_supernet(space, per_edge=False):
    """A small supernet of the space: width 2 (even), at most 3 cells, the proxy's options."""
    cells = None if space.proxy.cells is None else min(3, space.proxy.cells)
    return space.build_supernet(num_classes=3, in_channels=1, channels=2, cells=cells,
                                per_edge=per_edge, **space.proxy.options), cells


def test_the_seven_spaces_of_the_paper_are_registered():
    assert {"nb201", "darts", "s1", "s2", "s3", "s4", "mobilenet"} <= set(SPACES)


@pytest.mark.parametrize("name", SPACES)
def test_protocol_end_to_end(name):
    space = get_space(name)
    assert space.name == name and space.description
    specs = space.alpha_specs()
    assert specs and all(isinstance(s, AlphaSpec) for s in specs.values())
    torch.manual_seed(0)
    net, cells = tiny_supernet(space)
    alphas = net.alphas()
    assert list(alphas) == list(specs)
    assert [tuple(a.shape) for a in alphas.values()] == [s.shape for s in specs.values()]
    assert net.arch_parameters() == list(alphas.values())
    weights = net.weight_parameters()
    ids = {id(p) for p in weights}
    assert not ids & {id(a) for a in alphas.values()}
    assert len(weights) + len(alphas) == len(list(net.parameters()))
    with torch.no_grad():
        for a in alphas.values():
            a.normal_()
    # forward and backward, with a probe that sees every cell
    x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 3, (4,))
    probe = CellTraces(ops=True)
    loss = F.cross_entropy(net(x, probe=probe), y)
    loss.backward()
    assert all(a.grad is not None and a.grad.abs().sum() > 0 for a in alphas.values())
    assert probe.traces and {t.alpha for t in probe.traces} == set(specs)
    for alpha, _cell, row, col in probe.ops:
        assert specs[alpha].shape[1] > col and specs[alpha].shape[0] > row
    # derive, format, parse back
    genotype = space.derive(alphas)
    text = space.format(genotype)
    assert space.parse(text) == genotype and space.format(space.parse(text)) == text
    counts = space.op_counts(genotype)
    assert set(counts) == {"param_free_ops", "skip_ops"}
    assert 0 <= counts["skip_ops"] <= counts["param_free_ops"] <= len(space.choices(genotype))
    # the discrete network of the derived genotype
    model = space.build_network(text, 3, in_channels=1, channels=2, cells=cells)
    for mode in (True, False):
        model.train(mode)
        out = model(x)
        logits = out[0] if isinstance(out, tuple) else out
        assert logits.shape == (4, 3) and torch.isfinite(logits).all()
    # the per-edge layout has the same alphas
    ref, _ = tiny_supernet(space, per_edge=True)
    assert [tuple(a.shape) for a in ref.alphas().values()] == [s.shape for s in specs.values()]


@pytest.mark.parametrize("name", SPACES)
def test_upstream_default_supernet_builds(name):
    # space.build_supernet(num_classes=10): the upstream size (API contract)
    space = get_space(name)
    net = space.build_supernet(num_classes=10)
    assert sum(p.numel() for p in net.weight_parameters()) > 10_000


@pytest.mark.parametrize("name", SPACES)
def test_bad_genotype_text_and_alphas(name):
    space = get_space(name)
    with pytest.raises(SpecError):
        space.parse("")
    with pytest.raises(SpecError):
        space.parse("certainly not a genotype")
    with pytest.raises(SpecError):
        space.derive({"wrong": torch.zeros(2, 2)})


def test_unknown_space_names_the_token_and_the_choices():
    with pytest.raises(ConfigError) as info:
        get_space("darts8")
    assert "'darts8'" in str(info.value) and "nb201" in str(info.value)


def test_reference_sizes_by_hand():
    """The size of a derived network as its papers report it: DARTS_V2's CIFAR-10 network
    has the upstream count (3,349,342 parameters without the auxiliary head), and one
    MobileNet block 5x5_MBConv6 instead of `zero` adds its hand-counted weights and
    multiply-adds at ImageNet's 224x224."""
    from genlab.nas.spaces.darts.genotype import DARTS_V2

    darts = get_space("darts")
    assert darts.reference_size(DARTS_V2)["params_m"] == pytest.approx(3.349342, abs=1e-9)
    assert get_space("nb201").reference_size("|none~0|+|none~0|none~1|+|none~0|none~1|none~2|") \
        is None  # the table gives NB201's figures
    mobile = get_space("mobilenet")
    skipped = ["3x3_MBConv3"] * 21
    skipped[1] = "zero"  # block 1: 24 -> 24 channels, stride 1, at 56x56 (stem and block 0: /4)
    full = list(skipped)
    full[1] = "5x5_MBConv6"
    a, b = (mobile.reference_size(",".join(g)) for g in (skipped, full))
    mid = 24 * 6
    weights = 24 * mid + 2 * mid + mid * 25 + 2 * mid + mid * 24 + 2 * 24  # convs and BNs
    macs = 56 * 56 * (24 * mid + mid * 25 + mid * 24)  # expand, depthwise, project
    assert (b["params_m"] - a["params_m"]) * 1e6 == pytest.approx(weights, abs=1e-3)
    assert (b["macs_m"] - a["macs_m"]) * 1e6 == pytest.approx(macs, abs=1e-3)
