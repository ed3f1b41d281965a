"""PC-DARTS, DARTS-, GDAS and R-DARTS (DP): the supernet options against hand-computed values,
explicit references and the plain per-edge supernet; their presets through the CLI."""

import json

import pytest
import torch
from nas_reference import run_cli
from torch import nn

from genlab.core.errors import ConfigError
from genlab.nas.methods import build_supernet, get_method
from genlab.nas.methods.gdas import Gumbel
from genlab.nas.spaces import get_space
from genlab.nas.supernet.cells import (
    CellTopology,
    EdgeKnobs,
    EdgeOptions,
    MixedOp,
    channel_shuffle,
    node_softmax,
)


class Scale(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, x):
        return self.c * x


def test_channel_shuffle_by_hand():
    x = torch.arange(8.0).reshape(1, 8, 1, 1)
    # groups of 4: (0 1)(2 3)(4 5)(6 7) -> take one from each group in turn
    assert channel_shuffle(x, 4).flatten().tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


def test_partial_channel_mixed_op_by_hand():
    op = MixedOp(["a", "b"], [Scale(2.0), Scale(-1.0)], EdgeOptions(partial_channels=2))
    x = torch.arange(4.0).reshape(1, 4, 1, 1)  # channels 0 1 | 2 3
    w = torch.tensor([0.25, 0.75])
    # ops on (0, 1): 0.25 * 2x - 0.75 x = -0.25 x -> (0, -0.25); cat (0, -0.25, 2, 3);
    # shuffle with 2 groups: (0, 2, -0.25, 3)
    assert op(x, w).flatten().tolist() == [0.0, 2.0, -0.25, 3.0]


def test_partial_channel_bypass_is_max_pooled_on_reduction_edges():
    op = MixedOp(["a"], [nn.AvgPool2d(2)], EdgeOptions(partial_channels=2))
    x = torch.arange(32.0).reshape(1, 2, 4, 4)
    out = op(x, torch.ones(1))
    assert out.shape == (1, 2, 2, 2)
    assert torch.equal(out[0, 1], torch.nn.functional.max_pool2d(x[:, 1:], 2)[0, 0])
    assert torch.equal(out[0, 0], torch.nn.functional.avg_pool2d(x[:, :1], 2)[0, 0])


def test_node_normalisation_of_betas():
    topo = CellTopology(num_inputs=2, num_nodes=2, concat=True)  # rows 2<-0 2<-1 | 3<-0 3<-1 3<-2
    betas = torch.tensor([0.0, 1.0, 0.0, 0.0, 2.0])
    e = torch.e
    want = [1 / (1 + e), e / (1 + e), 1 / (2 + e * e), 1 / (2 + e * e), e * e / (2 + e * e)]
    assert torch.allclose(node_softmax(betas, topo), torch.tensor(want))


def test_darts_derivation_uses_edge_scales():
    space = get_space("darts")
    alphas = {c: torch.zeros(14, 8) for c in ("normal", "reduce")}
    for c in alphas:
        alphas[c][:, 4] = 1.0  # sep_conv_3x3 best everywhere, equal strength on every edge
        alphas[c][0, 4] = 1.5  # node 2: edge 2<-0 the strongest by alpha ...
    scales = {c: torch.ones(14) for c in alphas}
    plain = space.derive(alphas)
    assert plain.normal[:2] == (("sep_conv_3x3", 0), ("sep_conv_3x3", 1))
    for c in scales:  # ... but node 3's edge 3<-2 (row 4) wins by beta, 3<-0 (row 2) loses
        scales[c][4], scales[c][2] = 2.0, 0.1
        scales[c][0] = 0.2  # and 2<-0 drops behind 2<-1 by beta
    genes = space.derive(alphas, edge_scales=scales).normal
    assert genes[:2] == (("sep_conv_3x3", 1), ("sep_conv_3x3", 0))
    assert genes[2:4] == (("sep_conv_3x3", 2), ("sep_conv_3x3", 1))


def _tiny(space, method=None, **options):
    torch.manual_seed(0)
    kw = {"channels": 8, "cells": 1 if space == "nb201" else 3}
    if method is None:
        return get_space(space).build_supernet(**kw, per_edge=True, **options)
    return build_supernet(space, method, **kw)


def _same_weights(a, b):
    b.load_state_dict(a.state_dict(), strict=False)


@pytest.mark.parametrize("space", ["nb201", "darts"])
def test_aux_skip_beta_zero_is_plain_and_beta_one_adds_aux(space):
    plain = _tiny(space)
    aux = _tiny(space, aux_skip=True)
    _same_weights(plain, aux)
    x = torch.randn(2, 3, 8, 8)
    aux.set_knobs(aux_scale=0.0)
    assert torch.allclose(aux(x), plain(x), atol=1e-6)
    edge = aux.cells[-1].core.edges["3<-0"] if space == "darts" else aux.cells[0].edges["1<-0"]
    ref = plain.cells[-1].core.edges["3<-0"] if space == "darts" else plain.cells[0].edges["1<-0"]
    # the last of 3 DARTS cells is a reduction cell at 4C channels (edge 3<-0: stride 2)
    h = torch.randn(2, 32 if space == "darts" else 8, 4, 4)
    w = torch.rand(len(edge.ops))
    aux.set_knobs(aux_scale=1.0)
    assert torch.allclose(edge(h, w), ref(h, w) + edge.aux(h), atol=1e-6)
    if space == "darts":
        assert isinstance(edge.aux, nn.Module) and not isinstance(edge.aux, nn.Identity)


def test_drop_path_at_zero_is_plain_and_masks_samples():
    plain = _tiny("darts")
    dp = _tiny("darts", drop_path=True)
    _same_weights(plain, dp)
    x = torch.randn(2, 3, 8, 8)
    dp.set_knobs(drop_prob=0.0)
    assert torch.allclose(dp(x), plain(x), atol=1e-6)
    op = MixedOp(["id"], [nn.Identity()], EdgeOptions(drop_path=True), knobs=EdgeKnobs(1.0, 0.5))
    torch.manual_seed(3)
    out = op(torch.ones(64, 1, 1, 1), torch.ones(1)).flatten()
    assert set(out.tolist()) == {0.0, 2.0}  # dropped, or kept and scaled by 1 / (1 - 0.5)
    op.eval()
    assert torch.equal(op(torch.ones(4, 1, 1, 1), torch.ones(1)), torch.ones(4, 1, 1, 1))


def test_sampled_edge_runs_the_drawn_op_with_straight_through_gradients():
    ops = [Scale(2.0), Scale(-3.0), Scale(5.0)]
    x = torch.randn(2, 1, 3, 3)
    for mode in ("scalars", "drawn"):
        op = MixedOp(["a", "b", "c"], ops, EdgeOptions(sampled=mode))
        logits = torch.tensor([0.1, 0.7, -0.2], requires_grad=True)
        p = torch.softmax(logits, 0)
        hard = torch.zeros(3).scatter(0, torch.tensor([1]), 1.0) - p.detach() + p
        out = op(x, hard)
        assert torch.equal(out, hard[1] * (-3.0 * x))  # the others' weights are exact zeros
        out.sum().backward()
        # by hand: d out / d hard = (sum of 2x, -3x, 5x) for the dense mixture; sampled: the
        # drawn op's -3 * sum(x), and sum(1) = numel for an op entering as a scalar
        g_hard = torch.tensor([x.numel(), -3.0 * x.sum(), x.numel()])
        if mode == "drawn":
            g_hard[0] = g_hard[2] = 0.0
        jac = torch.diag(p) - torch.outer(p, p)  # softmax's Jacobian (straight through)
        assert torch.allclose(logits.grad, jac @ g_hard, atol=1e-5)
    op.eval()  # evaluation: the dense mixture
    w = torch.tensor([0.2, 0.3, 0.5])
    assert torch.allclose(op(x, w), (0.4 - 0.9 + 2.5) * x)


def test_gumbel_tau_schedule_and_draw():
    g = Gumbel()
    values = []
    for step in (0, 5, 10):
        g.at(step, 11)
        values.append(g.tau)
    assert values == pytest.approx([10.0, 5.05, 0.1])
    alpha = torch.tensor([[0.0, 1.0, 2.0]])
    gumbels = torch.tensor([[3.0, 0.0, 0.0]])
    g.tau = 2.0
    hard = g.sample(alpha, gumbels)
    assert hard.tolist() == [[1.0, 0.0, 0.0]]  # argmax of log_softmax + g: column 0
    assert torch.equal(g("r", alpha, training=False), torch.softmax(alpha, -1))


def test_gdas_supernet_shares_one_draw_per_cell_type():
    net = _tiny("darts", "gdas")
    calls = []
    rel = net.relaxation
    net.relaxation = lambda name, a, training: calls.append(name) or rel(name, a, training)
    net.train()
    net(torch.randn(2, 3, 8, 8))
    assert calls == ["normal", "reduce"]


def test_pc_darts_betas_are_arch_parameters_and_scales():
    net = _tiny("darts", "pc-darts")
    betas = net.extra_arch_parameters()
    assert [tuple(b.shape) for b in betas] == [(14,), (14,)]
    assert len(net.arch_parameters()) == 4 and all(id(b) not in map(id, net.weight_parameters())
                                                   for b in betas)
    scales = net.edge_scales()["normal"]
    assert torch.allclose(scales[:2].sum(), torch.tensor(1.0))


def test_presets_match_the_authors():
    pc = get_method("pc-darts")
    assert pc.supernet == {"partial_channels": 4, "edge_norm": True, "arch_start": 0.3}
    assert (pc.arch_lr_scale, pc.arch_weight_decay) == (2.0, 0.0)
    assert get_method("darts-minus").orders == (1,) and get_method("gdas").orders == (1,)
    assert get_method("rdarts-dp").supernet == {"drop_path": 0.6}


@pytest.mark.parametrize("space, options, words", [
    ("darts", {"partial_channels": 3}, "must divide"),
    ("nb201", {"colour": "red"}, "no colour option"),
    ("mobilenet", {"partial_channels": 5}, "must divide"),
])
def test_refused_options_give_one_line(space, options, words):
    with pytest.raises(ConfigError) as err:
        get_space(space).build_supernet(channels=8, **options)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("method", ["pc-darts", "darts-minus", "gdas", "rdarts-dp"])
@pytest.mark.parametrize("space", ["mobilenet"])  # nb201, darts, s3: test_methods_every_space
def test_search_runs_each_method(space, method, tmp_path, capsys):
    cells = {"nb201": ["--cells", "1"], "darts": ["--cells", "3"], "s3": ["--cells", "3"]}
    code, out, err = run_cli(["nas", "search", "--space", space, "--method", method, "--steps",
                              "4", "--channels", "4", "--size", "8", "--batch-size", "4",
                              "--hessian-points", "0", "--out", tmp_path / "r",
                              *cells.get(space, [])], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["method"] == method
