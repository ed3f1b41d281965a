"""BER candidates (ber-lbe, ber-op, ber-ib): gradients on alpha against finite differences
(float64), their features against hand values, their search wiring (targets, resume, forces)."""

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from ber_fixtures import assert_per_op_gradient, hand_costs, per_op_forward, tiny_net

from genlab.core.errors import ConfigError
from genlab.nas.diagnostics import alpha_forces
from genlab.nas.entropy import batch_entropy, label_information
from genlab.nas.regularizers import make_regularizer
from genlab.nas.regularizers.layerwise import LayerwiseBatchEntropy
from genlab.nas.regularizers.per_op import OpCompression, OpLabelInformation, edge_sources
from genlab.nas.search import SearchConfig, run_search

_tiny_net = tiny_net


def _lbe_loss(net, x, y, reg, alpha_value=None):
    """beta x CE x mean_n (H_B(T_n) - max(h_min,|h_n|))^2 by a full forward (the regulariser's
    term of the architecture loss)."""
    if alpha_value is not None:
        with torch.no_grad():
            net.alphas()["cell"].copy_(alpha_value)
    probe = reg.make_probe()
    ce = F.cross_entropy(net(x, probe=probe), y)
    return reg(net.alphas(), 0, 10, probe, ce)


def test_ber_lbe_gradient_on_alpha_matches_finite_differences():
    space, net, x, y = _tiny_net()
    reg = make_regularizer("ber-lbe", strength=2.0, params={"h_min": 0.1})
    reg.setup(net, x, space)
    with torch.no_grad():  # move the targets off the step-0 values so the penalty is not 0
        reg.parameters()[0].mul_(0.5)
    alpha = net.alphas()["cell"]
    base = alpha.detach().clone()
    loss = _lbe_loss(net, x, y, reg)
    grad, = torch.autograd.grad(loss, [alpha])
    eps = 1e-6
    for r, k in [(0, 0), (1, 3), (3, 1), (5, 4), (4, 2)]:
        bump = torch.zeros_like(base)
        bump[r, k] = eps
        plus = _lbe_loss(net, x, y, reg, base + bump).detach().item()
        minus = _lbe_loss(net, x, y, reg, base - bump).detach().item()
        assert grad[r, k].item() == pytest.approx((plus - minus) / (2 * eps), rel=1e-5, abs=1e-9)


def test_ber_lbe_targets_start_at_the_step0_node_entropies_and_get_gradients():
    space, net, x, y = _tiny_net()
    reg = make_regularizer("ber-lbe", strength=1.0)
    reg.setup(net, x, space)
    h = reg.parameters()[0]
    probe = reg.make_probe()
    with torch.no_grad():
        net(x, probe=probe)
    by_hand = [batch_entropy(t) for tr in probe.traces for t in tr.nodes]
    assert h.shape == (3 * 3,)  # 3 search cells (one per stage) x 3 nodes
    assert torch.allclose(h, torch.stack(by_hand))
    # at the step-0 targets the penalty and its gradient vanish; with a floor above them the
    # target is the floor: loss = CE x mean (H - h_min)^2
    assert float(_lbe_loss(net, x, y, reg).detach()) == pytest.approx(0.0, abs=1e-20)
    floored = make_regularizer("ber-lbe", strength=1.0, params={"h_min": 5.0})
    floored.setup(net, x, space)
    probe = floored.make_probe()
    ce = F.cross_entropy(net(x, probe=probe), y)
    expected = float(ce.detach()) * float(torch.stack([(b - 5.0) ** 2 for b in by_hand]).mean())
    value = floored(net.alphas(), 0, 10, probe, ce).detach()
    assert float(value) == pytest.approx(expected, rel=1e-9)
    loss = floored(net.alphas(), 0, 10, probe, ce)
    (g,) = torch.autograd.grad(loss, floored.parameters())
    assert torch.all(g == 0)  # below the floor the targets get no gradient (max(h_min, |h|))


def test_ber_lbe_refuses_missing_setup_and_missing_loss():
    space, net, x, y = _tiny_net()
    reg = make_regularizer("ber-lbe", strength=1.0)
    probe = reg.make_probe()
    ce = F.cross_entropy(net(x, probe=probe), y)
    with pytest.raises(ConfigError, match="setup"):
        reg(net.alphas(), 0, 10, probe, ce)
    reg.setup(net, x, space)
    with pytest.raises(ConfigError, match="val_loss"):
        reg(net.alphas(), 0, 10, probe, None)
    with pytest.raises(ConfigError, match="h_min|hmin"):
        LayerwiseBatchEntropy(h_min=-1.0)


_per_op_forward = per_op_forward


def test_ber_op_losses_by_hand_and_gradient_matches_finite_differences():
    net, _, reg, probe, ops, sources = _per_op_forward("ber-op")
    d = reg.penalty_object.losses(net.alphas(), probe)["cell"]
    # by hand, cell by cell: none loses all of the input's batch entropy, skip none of it
    expected_none = []
    for s in sources:
        per_cell = [batch_entropy((tr.inputs + tr.nodes)[s]) for tr in probe.traces]
        expected_none.append(sum(per_cell) / len(per_cell))
    assert torch.allclose(d[:, ops.index("none")], torch.stack(expected_none))
    assert torch.all(d[:, ops.index("skip_connect")].abs() < 1e-12)
    assert torch.all(d >= 0)
    assert_per_op_gradient(reg, net, probe, d)  # R with D held fixed (stop-gradient)


def test_ber_ib_costs_by_hand_and_gradient_matches_finite_differences():
    net, y, reg, probe, ops, sources = _per_op_forward("ber-ib")
    c = reg.penalty_object.losses(net.alphas(), probe, y)["cell"]
    # by hand, edge by edge and cell by cell: cost = I_B(input; Y) - I_B(op output; Y)
    hand = hand_costs(probe, sources, len(ops), lambda x_in, out: label_information(x_in, y)
                      - (0.0 if out is None else label_information(out, y)))
    assert torch.allclose(c, torch.tensor(hand, dtype=c.dtype), rtol=1e-9, atol=1e-12)
    assert torch.all(c[:, ops.index("skip_connect")].abs() < 1e-12)  # skip passes it through
    assert not torch.allclose(c[:, ops.index("nor_conv_3x3")], c[:, ops.index("skip_connect")])
    assert_per_op_gradient(reg, net, probe, c, y)


def test_ber_ib_refuses_missing_labels():
    space, net, x, _ = _tiny_net()
    op = OpLabelInformation()
    op.setup(net, x, space)
    probe = op.make_probe()
    net(x, probe=probe)
    with pytest.raises(ConfigError, match="labels"):
        op.penalty(net.alphas(), probe)


def test_search_with_ber_ib_first_and_second_order(tmp_path):
    for order in (1, 2):
        out = run_search(SearchConfig(**{**TINY, "steps": 3}, reg="ber-ib", reg_strength=2.0,
                                      seed=0, order=order, force_every=1), tmp_path / f"o{order}")
        assert out["reg_resolved"]["name"] == "ber-ib" and out["steps"] == 3
        if order == 1:
            forces = (tmp_path / "o1" / "forces.jsonl").read_text().splitlines()
            assert [json.loads(ln)["force_reg"] > 0 for ln in forces] == [True] * 3


def test_ber_op_refuses_rows_that_are_not_edges_and_a_probe_without_ops():
    with pytest.raises(ConfigError, match="block 0"):
        edge_sources(("block 0",))
    space, net, x, _ = _tiny_net()
    op = OpCompression()
    op.setup(net, x, space)
    probe = make_regularizer("ber-lbe").make_probe()  # nodes only, no op outputs
    net(x, probe=probe)
    with pytest.raises(ConfigError, match="op's output"):
        op.penalty(net.alphas(), probe)


def test_alpha_forces_hand_values():
    ce = [torch.tensor([3.0, 0.0]), None]
    total = [torch.tensor([3.0, 4.0]), torch.tensor([[0.0, 0.0]])]
    f = alpha_forces(ce, total)
    assert f["force_ce"] == 3.0 and f["force_reg"] == 4.0
    assert f["force_ratio"] == pytest.approx(4 / 3)
    assert alpha_forces([None], [torch.zeros(2)])["force_ratio"] is None


TINY = dict(channels=2, cells=1, steps=12, batch_size=64, hessian_points=0, diag_batch=16)


def test_search_with_ber_lbe_logs_forces_and_node_entropies_and_resumes(tmp_path):
    cfg = SearchConfig(**TINY, reg="ber-lbe", reg_strength=3.0, reg_params={"h_min": 0.2},
                       seed=1)
    full = run_search(cfg, tmp_path / "full")
    history = [json.loads(ln) for ln in
               (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert all(h["force_ce"] > 0 and h["force_ratio"] > 0 for h in history)
    assert len(history[-1]["node_entropy"]) == 3 and len(history[-1]["node_entropy"][0]) == 3
    assert (tmp_path / "full" / "forces.png").exists()
    assert (tmp_path / "full" / "node_entropy.png").exists()
    assert full["reg_resolved"]["params"] == {"h_min": 0.2}
    # stop after the first logging step, then resume: the targets come back from the checkpoint
    stopped = run_search(cfg, tmp_path / "part", stop_at=11)
    assert stopped["stopped_at"] == 11 and not (tmp_path / "part" / "summary.json").exists()
    resumed = run_search(cfg, tmp_path / "part", resume=True)
    assert resumed["alpha"] == full["alpha"]


def test_force_every_writes_one_record_per_step(tmp_path):
    out = run_search(SearchConfig(**TINY, reg="ber-op", seed=0, force_every=1), tmp_path / "r",
                     stop_at=5)
    recs = [json.loads(ln) for ln in Path(out["forces"]).read_text().splitlines()]
    assert [r["step"] for r in recs] == [0, 1, 2, 3, 4]
    assert all(r["force_reg"] > 0 for r in recs)


def test_second_order_refuses_ber_lbe(tmp_path):
    with pytest.raises(ConfigError, match="order 1"):
        run_search(SearchConfig(**{**TINY, "steps": 2}, reg="ber-lbe", order=2), tmp_path / "r")


def test_candidates_default_to_a_constant_schedule_and_refuse_unknown_names():
    for name in ("ber-lbe", "ber-op", "ber-ib", "ber-xu", "ber-decay", "ber-commit"):
        reg = make_regularizer(name, strength=0.7)
        assert reg.schedule == "constant" and reg.needs_probe
        assert reg.lam(0, 100) == reg.lam(99, 100) == 0.7
    with pytest.raises(ConfigError, match="ber-lbx"):
        make_regularizer("ber-lbx")
