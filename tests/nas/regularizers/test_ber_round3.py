"""BER round-three candidates: ber-xu's costs by hand and its gradient against finite
differences (float64); ber-decay's turn, anchors and restraint against a hand-run loop; both
wired into a search, resumed mid-way equal to an uninterrupted run."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from ber_fixtures import assert_per_op_gradient, hand_costs, per_op_forward

from genlab.core.errors import ConfigError
from genlab.nas.entropy import batch_entropy, label_information
from genlab.nas.regularizers import make_regularizer
from genlab.nas.regularizers.decay import (
    HOLD_STRENGTH,
    PLATEAU_WINDOW,
    SMOOTHING,
    TURN_DROP,
    WARMUP,
    EntropyDecayRestraint,
)
from genlab.nas.search import SearchConfig, run_search


def _forward(name):
    return per_op_forward(name, batch=9)


def test_ber_xu_costs_by_hand_and_gradient_matches_finite_differences():
    net, y, reg, probe, ops, sources = _forward("ber-xu")
    c = reg.penalty_object.losses(net.alphas(), probe, y)["cell"]

    def cost(x_in, out):  # relu(H_B in - H_B out) + I_B(mean in; Y) - I_B(mean out; Y)
        h_out = 0.0 if out is None else float(batch_entropy(out))
        g_out = 0.0 if out is None else float(label_information(out.mean((2, 3)), y))
        return (max(0.0, float(batch_entropy(x_in)) - h_out)
                + float(label_information(x_in.mean((2, 3)), y)) - g_out)

    hand = torch.tensor(hand_costs(probe, sources, len(ops), cost), dtype=c.dtype)
    assert torch.allclose(c, hand, rtol=1e-9, atol=1e-12)
    assert torch.all(c[:, ops.index("skip_connect")].abs() < 1e-12)  # skip loses nothing
    assert torch.all(c[:, ops.index("none")] > 0)
    assert_per_op_gradient(reg, net, probe, c, y)


def test_ber_xu_refuses_missing_labels():
    net, _, reg, probe, _, _ = _forward("ber-xu")
    with pytest.raises(ConfigError, match="labels"):
        reg.penalty(net.alphas(), probe)


def _probe_with_entropy(h: float) -> SimpleNamespace:
    """A probe whose one node has batch entropy h: two samples +-a (unbiased var 2a^2)."""
    import math
    var = (math.exp(2 * h) - 1) / (math.pi * math.e)
    a = math.sqrt(var / 2)
    node = torch.tensor([[a], [-a]], dtype=torch.float64)
    assert float(batch_entropy(node)) == pytest.approx(h, rel=1e-9)
    return SimpleNamespace(traces=[SimpleNamespace(nodes=[node])])


def test_ber_decay_turn_anchor_and_restraint_match_a_hand_loop():
    curve = [0.5 + 0.004 * t for t in range(150)] + [1.1 - 0.01 * t for t in range(100)]
    pen = EntropyDecayRestraint()
    alpha = {"cell": torch.zeros(2, 3, dtype=torch.float64)}
    ema, peak, turn, anchor = None, 0.0, None, None
    for t, h in enumerate(curve):
        with torch.no_grad():
            alpha["cell"] += 0.01 * (t % 7)  # alpha moves every step
        ema = h if ema is None else (1 - SMOOTHING) * ema + SMOOTHING * h
        peak = max(peak, ema)
        if turn is None and t >= WARMUP and ema < (1 - TURN_DROP) * peak:
            turn, anchor = t, alpha["cell"].clone()
        pen.lam(1.0, "constant", t, 250, 1)
        probe = _probe_with_entropy(h)
        r1 = float(pen.penalty(alpha, probe))
        r2 = float(pen.penalty(alpha, probe))  # a second call in the same step changes nothing
        expected = 0.0 if turn is None else (
            (peak - ema) / peak * float(((alpha["cell"] - anchor) ** 2).sum(-1).mean()))
        assert r1 == pytest.approx(expected, rel=1e-9, abs=1e-15) and r2 == r1
    assert pen.turn_step == turn and 150 < turn < 200
    assert torch.equal(pen.anchors["cell"], anchor)
    # the checkpointed state continues the same curve
    twin = EntropyDecayRestraint()
    twin.load_state_dict(pen.state_dict())
    for p in (pen, twin):
        p.lam(1.0, "constant", 250, 300, 1)
    probe = _probe_with_entropy(0.2)
    assert float(twin.penalty(alpha, probe)) == float(pen.penalty(alpha, probe))


TINY = dict(channels=2, cells=1, batch_size=64, hessian_points=0, diag_batch=16)


@pytest.mark.parametrize("reg", ["ber-xu", "ber-decay", "ber-commit", "ber-anchor"])
def test_candidates_search_and_resume_equal_to_an_uninterrupted_run(tmp_path, reg):
    steps = 12 if reg == "ber-xu" else 130  # the turn comes after WARMUP steps only
    cfg = SearchConfig(**TINY, steps=steps, reg=reg, reg_strength=5.0, seed=0)
    full = run_search(cfg, tmp_path / "full")
    assert full["reg_resolved"]["name"] == reg
    run_search(cfg, tmp_path / "part", stop_at=steps - 11)
    resumed = run_search(cfg, tmp_path / "part", resume=True)
    assert resumed["alpha"] == full["alpha"]


def test_ber_xu_and_ber_decay_run_second_order(tmp_path):
    for reg in ("ber-xu", "ber-decay", "ber-commit", "ber-anchor"):
        out = run_search(SearchConfig(**TINY, steps=3, reg=reg, seed=0, order=2),
                         tmp_path / reg)
        assert out["steps"] == 3


def test_ber_commit_holds_like_beta_until_the_turn_then_releases_linearly():
    curve = [0.5 + 0.004 * t for t in range(150)] + [1.1 - 0.01 * t for t in range(100)]
    reg = make_regularizer("ber-commit", strength=2.0)
    alpha = {"cell": torch.randn(3, 5, dtype=torch.float64)}
    lams = []
    for t, h in enumerate(curve):
        lams.append(reg.lam(t, 250))
        r = reg.penalty(alpha, _probe_with_entropy(h))
        assert float(r) == pytest.approx(float(torch.logsumexp(alpha["cell"], -1).mean()))
    t0 = reg.penalty_object.turn_step
    assert t0 is not None and all(v == 2.0 for v in lams[:t0 + 1])
    for t in (t0 + 1, t0 + 20, 249):  # 2 (1 - (t - t0) / (T - t0)) after it
        assert lams[t] == pytest.approx(2.0 * (1 - (t - t0) / (250 - t0)))


def _plateau_turn(curve):
    """The end of the rise by a hand loop: first t >= WARMUP whose EMA rose < 1% over 100 steps."""
    ema = []
    for h in curve:
        ema.append(h if not ema else (1 - SMOOTHING) * ema[-1] + SMOOTHING * h)
        t = len(ema) - 1
        if (t >= WARMUP and t >= PLATEAU_WINDOW
                and ema[t] - ema[t - PLATEAU_WINDOW] < TURN_DROP * ema[t]):
            return t
    return None


def test_ber_anchor_turns_where_a_held_curve_levels_off_without_falling():
    curve = [1.0 - 0.5 * 0.98 ** t for t in range(500)]  # rises, then levels off
    pen = make_regularizer("ber-anchor").penalty_object
    alpha = {"cell": torch.zeros(2, 3)}
    for t, h in enumerate(curve):
        pen.lam(1.0, "constant", t, 500, 1)
        pen.penalty(alpha, _probe_with_entropy(h))
    turn = _plateau_turn(curve)
    assert turn is not None and 300 < turn < 450 and pen.turn_step == turn
    decay = EntropyDecayRestraint()  # the fall rule never fires on it
    for t, h in enumerate(curve):
        decay.lam(1.0, "constant", t, 500, 1)
        decay.penalty(alpha, _probe_with_entropy(h))
    assert decay.turn_step is None


def test_ber_anchor_holds_until_the_turn_then_pulls_to_the_ops_leading_there():
    curve = [0.5 + 0.004 * t for t in range(150)] + [1.1 - 0.01 * t for t in range(100)]
    reg = make_regularizer("ber-anchor", strength=0.7)
    alpha = {"cell": torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator()
                                 .manual_seed(0)).requires_grad_()}
    lams, leaders = [], None
    for t, h in enumerate(curve):
        with torch.no_grad():
            alpha["cell"][:, t % 5] += 0.05  # the leader changes until the turn
        lams.append(reg.lam(t, 250))
        r = reg.penalty(alpha, _probe_with_entropy(h))
        t0 = reg.penalty_object.turn_step
        if t0 is not None and t == t0:
            leaders = alpha["cell"].detach().argmax(-1)
        if t0 is None or t <= t0:  # beta-DARTS' penalty
            beta_penalty = torch.logsumexp(alpha["cell"].detach(), -1).mean()
            assert float(r.detach()) == pytest.approx(float(beta_penalty))
            continue
        p = torch.softmax(alpha["cell"].detach(), -1)
        hand = -sum(float(torch.log(p[e, leaders[e]])) for e in range(3)) / 3
        assert float(r.detach()) == pytest.approx(hand, rel=1e-12)
        grad, = torch.autograd.grad(r, [alpha["cell"]])  # (p - onehot(k*)) / |E|
        onehot = F.one_hot(leaders, 5).double()
        assert torch.allclose(grad, (p - onehot) / 3, atol=1e-12)
    t0 = reg.penalty_object.turn_step
    assert t0 is not None and t0 == _plateau_turn(curve) and 150 < t0 < 250
    assert all(v == HOLD_STRENGTH for v in lams[:t0 + 1]) and all(v == 0.7 for v in lams[t0 + 1:])
    assert torch.equal(reg.penalty_object.leaders["cell"], leaders)
    twin = make_regularizer("ber-anchor", strength=0.7)
    twin.load_state_dict(reg.state_dict())
    assert torch.equal(twin.penalty_object.leaders["cell"], leaders)
    assert twin.lam(251, 300) == 0.7
