"""The methods that change the search loop: SDARTS-RS / -ADV (weight-step perturbations),
DrNAS (Dirichlet relaxation), R-DARTS (L2) and DARTS-ES (Hessian early stopping).

Truths: hand-computed clip rows, eps values and early-stopping epochs; the Dirichlet's closed
form moments; the attack's own acceptance rule re-evaluated from scratch; the CLI's summary.
"""

import json

import pytest
import torch
import torch.nn.functional as F

import genlab.nas.methods.sdarts as sdarts
import genlab.nas.search as search_mod
from genlab.nas import diagnostics as diag
from genlab.nas.architect import bilevel_step
from genlab.nas.methods import (
    PERTURBATIONS,
    RELAXATIONS,
    STOPS,
    build_parts,
    build_supernet,
    get_method,
)
from genlab.nas.methods.drnas import Dirichlet
from genlab.nas.methods.rdarts import L2_GRID, HessianEarlyStop
from genlab.nas.methods.sdarts import Adversarial, RandomSmoothing, clip_rows, epsilon
from genlab.nas.regularizers import make_regularizer
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces.base import AlphaSupernet
from genlab.nas.spaces.nb201.supernet import NB201SuperNet

METHODS = ("sdarts-rs", "sdarts-adv", "drnas", "rdarts-l2", "rdarts-es")


# -- SDARTS ------------------------------------------------------------------------------------
def test_clip_on_hand_made_rows():
    p = torch.tensor([[0.5, -0.2, 0.9, 0.0],     # a negative entry: clamped to 0
                      [-0.3, -0.1, -0.5, -0.2],  # all zero after the clamp: its argmax gets 1
                      [0.1, 0.2, 0.3, 0.4],      # already on the simplex: unchanged
                      [1.4, 0.2, -0.1, 0.0]])    # above 1: clamped to 1
    want = torch.tensor([[0.5 / 1.4, 0.0, 0.9 / 1.4, 0.0],
                         [0.0, 1.0, 0.0, 0.0],
                         [0.1, 0.2, 0.3, 0.4],
                         [1.0 / 1.2, 0.2 / 1.2, 0.0, 0.0]])
    torch.testing.assert_close(clip_rows(p), want)
    torch.testing.assert_close(clip_rows(p[None])[0], want)  # any leading shape


def test_epsilon_schedule_values():
    assert epsilon(0, 100) == pytest.approx(0.03)
    assert epsilon(25, 100) == pytest.approx(0.0975)
    assert epsilon(50, 100) == pytest.approx(0.165)
    assert epsilon(100, 100) == pytest.approx(0.3)


def _tiny_nb201(seed=0):
    torch.manual_seed(seed)
    net = NB201SuperNet(C=2, N=1, num_classes=3, in_channels=1, init_scale=1.0)
    x, y = torch.randn(6, 1, 8, 8), torch.randint(0, 3, (6,))
    return net, (x, y)


def test_random_smoothing_stays_within_eps_before_the_clip(monkeypatch):
    net, batch = _tiny_nb201()
    p = torch.softmax(net.arch_params.detach(), -1)
    monkeypatch.setattr(sdarts, "clip_rows", lambda q: q)  # the draw before the clip
    raw = RandomSmoothing().weights(net, batch, 50, 100)["cell"]
    eps = epsilon(50, 100)
    assert (raw - p).abs().max() <= eps + 1e-7
    assert (raw - p).abs().max() > 0.5 * eps  # it moved (30 entries, uniform in the box)
    monkeypatch.undo()
    w = RandomSmoothing().weights(net, batch, 50, 100)["cell"]
    assert (w >= 0).all() and torch.allclose(w.sum(-1), torch.ones(6))
    assert not w.requires_grad and net.mixing_override is None


def _eval_loss(net, w, batch):
    was = net.training
    net.eval()
    try:
        with torch.no_grad():
            return float(sdarts.train_loss(net, w, *batch))
    finally:
        net.train(was)


def test_adversarial_raises_the_train_loss_or_returns_the_original():
    net, batch = _tiny_nb201()
    net.train()
    buffers = {k: v.clone() for k, v in net.named_buffers()}
    saved = torch.softmax(net.arch_params.detach(), -1)
    adv = Adversarial()
    for step in (0, 50, 100):
        w = adv.weights(net, batch, step, 100)["cell"]
        before, after = _eval_loss(net, {"cell": saved}, batch), _eval_loss(net, {"cell": w}, batch)
        assert adv.last["before"] == pytest.approx(before, abs=1e-6)
        if adv.last["kept_original"]:
            assert torch.equal(w, saved)
        else:
            assert after >= before - 1e-6
            assert after == pytest.approx(adv.last["after"], abs=1e-6)
            assert (w >= 0).all() and torch.allclose(w.sum(-1), torch.ones(6))
    assert net.training and net.mixing_override is None
    for k, v in net.named_buffers():  # the attack ran in eval mode: no BN statistics moved
        torch.testing.assert_close(v, buffers[k])


@pytest.mark.parametrize("method", ["sdarts-rs", "sdarts-adv"])
def test_the_weight_step_trains_on_the_perturbed_weights(method):
    net, batch = _tiny_nb201()
    parts = build_parts(get_method(method))
    a_opt = torch.optim.Adam(net.arch_parameters(), lr=0.0)
    w_opt = torch.optim.SGD(net.weight_parameters(), lr=0.0)  # nothing moves: compare grads
    returned = []
    hook = parts.perturbation.weights
    parts.perturbation.weights = lambda *a: returned.append(hook(*a)) or returned[-1]
    bilevel_step(net, a_opt, w_opt, batch, batch, make_regularizer("none"), 50, 100, 0.0,
                 method=parts)
    got = [p.grad.clone() for p in net.weight_parameters()]
    assert net.mixing_override is None and len(returned) == 1
    w = returned[0]

    def grads(weights):
        net.zero_grad(set_to_none=True)
        loss = sdarts.train_loss(net, weights, *batch)
        return torch.autograd.grad(loss, net.weight_parameters(), allow_unused=True)

    for g, want in zip(got, grads(w), strict=True):
        torch.testing.assert_close(g, want)
    plain = grads({"cell": torch.softmax(net.arch_params.detach(), -1)})
    assert max(float((g - p).abs().max()) for g, p in zip(got, plain, strict=True)) > 1e-4


class _Linear(AlphaSupernet):
    """logits = w @ V for one row of mixing weights: a loss the random start can lower."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(1, 4))
        self.register_buffer("V", torch.tensor([[3.0, 0.0], [0.0, 3.0], [1.0, 1.0],
                                                [-2.0, 2.0]]))

    def alphas(self):
        return {"a": self.a}

    def forward(self, x):
        return (self.mixing_weights()["a"] @ self.V).expand(len(x), -1)


def test_adversarial_keeps_the_original_exactly_when_the_attack_lowered_the_loss():
    net, batch = _Linear(), (torch.zeros(4, 1), torch.tensor([0, 0, 0, 0]))
    adv = Adversarial(attack_steps=0)  # the random start alone: it lowers the loss half the time
    kept = set()
    for seed in range(12):
        torch.manual_seed(seed)
        w = adv.attack(net, batch, eps=0.2)["a"]
        torch.manual_seed(seed)
        start = clip_rows(torch.full((1, 4), 0.25) + torch.zeros(1, 4).uniform_(-0.2, 0.2))
        before = F.cross_entropy(torch.full((1, 4), 0.25) @ net.V, torch.tensor([0]))
        after = F.cross_entropy(start @ net.V, torch.tensor([0]))
        assert adv.last["kept_original"] == bool(before > after)
        torch.testing.assert_close(w, torch.full((1, 4), 0.25) if before > after else start)
        kept.add(adv.last["kept_original"])
    assert kept == {True, False}


# -- DrNAS -------------------------------------------------------------------------------------
def test_dirichlet_sample_moments_match_the_closed_form():
    torch.manual_seed(0)
    alpha = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    c = F.elu(alpha) + 1  # 0.3679, 1, 1.5, 3
    c0 = c.sum()
    draws = Dirichlet()("cell", alpha.expand(40000, 4), training=True)
    mean, var = c / c0, c * (c0 - c) / (c0 ** 2 * (c0 + 1))
    torch.testing.assert_close(draws.mean(0), mean, atol=4e-3, rtol=0)
    torch.testing.assert_close(draws.var(0), var, atol=1.5e-3, rtol=0)
    torch.testing.assert_close(Dirichlet().expected("cell", alpha), mean)


def test_dirichlet_samples_in_eval_mode_too_and_is_reparameterised():
    alpha = torch.zeros(3, 5, requires_grad=True)
    rel = Dirichlet()
    a, b = rel("x", alpha, training=False), rel("x", alpha, training=False)
    assert not torch.equal(a, b)  # upstream's forward samples whatever the mode
    (a * torch.arange(5.0)).sum().backward()
    assert alpha.grad is not None and alpha.grad.abs().sum() > 0


def test_drnas_supernet_forward_uses_one_fresh_draw_per_forward():
    torch.manual_seed(0)
    net = build_supernet("nb201", "drnas", num_classes=3, in_channels=1, channels=2, cells=1)
    assert isinstance(net.relaxation, Dirichlet)
    x = torch.randn(4, 1, 8, 8)
    torch.manual_seed(5)
    out = net(x)
    torch.manual_seed(5)
    w = torch.distributions.Dirichlet(F.elu(net.arch_params) + 1).rsample()
    net.mixing_override = {"cell": w}
    ref = net(x)
    net.mixing_override = None
    torch.testing.assert_close(out, ref)
    assert not torch.allclose(net(x), out)  # the next forward draws again


# -- R-DARTS -----------------------------------------------------------------------------------
def _feed(rule, values, total_epochs, spe=11):
    """Records of epochs 0.. with hessian_eig values[e]; the epoch at which the rule fired."""
    rule.at(0, total_epochs * spe)
    for e, v in enumerate(values):
        if rule.update({"epoch": e, "step": (e + 1) * spe, "hessian_eig": v,
                        "genotype": f"g{e}"}):
            return e
    return None


def test_early_stop_fires_exactly_where_the_rule_says():
    # Hessian epochs are the even ones (ev_freq 2); entry k is epoch 2k. ev = 1 up to epoch
    # 24, 2 from 26 on. At epoch 26 the newest average (entries 9..13) is 1.2 x the one four
    # entries earlier (5..9): no; at 28 it is (3 + 4) / 5 = 1.4 > 1.3: stop, and the returned
    # architecture is that of epoch 28 - 2*2 - 4*2 = 16. Odd epochs are not read.
    values = [1.0 if e <= 24 else 2.0 for e in range(40)]
    values = [v if e % 2 == 0 else 100.0 for e, v in enumerate(values)]
    rule = HessianEarlyStop()
    assert _feed(rule, values, 40) == 28
    assert rule.stopped_epoch == 28 and rule.chosen["genotype"] == "g16"
    # the same jump earlier: the first check is at epoch 22 (its earlier average's centre,
    # epoch 10, is es_start_epoch); entries 7..11 average 2 against 3..7's 1.2: stop at 22
    values = [1.0 if e <= 12 else 2.0 for e in range(40)]
    rule = HessianEarlyStop()
    assert _feed(rule, values, 40) == 22 and rule.chosen["genotype"] == "g10"


def test_early_stop_does_not_fire_on_a_flat_series_or_at_the_last_epoch():
    rule = HessianEarlyStop()
    assert _feed(rule, [3.0] * 60, 60) is None and rule.chosen is None
    assert rule.stopped_epoch is None
    values = [1.0 if e <= 24 else 2.0 for e in range(29)]  # 28 would fire, but it is the last
    rule = HessianEarlyStop()
    assert _feed(rule, values, 29) is None
    state = rule.state_dict()
    again = HessianEarlyStop()
    again.load_state_dict(json.loads(json.dumps(state)))
    assert again.ev == rule.ev and again.la_epochs == rule.la_epochs


def test_presets_and_registries():
    assert PERTURBATIONS.get("random") is RandomSmoothing
    assert PERTURBATIONS.get("adversarial") is Adversarial
    assert RELAXATIONS.get("dirichlet") is Dirichlet
    assert STOPS.get("hessian-es") is HessianEarlyStop and HessianEarlyStop.needs_hessian
    assert get_method("sdarts-rs").perturb == "random"
    assert get_method("sdarts-adv").perturb == "adversarial"
    assert get_method("drnas").arch_weight_decay == 1e-3
    assert get_method("rdarts-l2").w_weight_decay == pytest.approx(0.0243)
    assert L2_GRID == pytest.approx((3e-4, 9e-4, 2.7e-3, 8.1e-3, 2.43e-2))
    assert get_method("rdarts-es").stop == "hessian-es"


def test_darts_es_search_returns_the_architecture_of_the_epoch_it_names(tmp_path, monkeypatch):
    # one step per epoch (batch 360 of the 719 digits); the rule with every epoch read and no
    # start epoch (window 5, factor 1.3, delta 4 kept) so that it can fire within 12 epochs;
    # the eigenvalue 1 up to epoch 8, then 2: at epoch 9 the newest average (epochs 5..9) is
    # 1.2 x the one of 1..5, at 10 it is 1.4 x: stop at 10 with epoch 10 - 2 - 4 = 4's genotype
    monkeypatch.setattr(search_mod, "_plots", lambda run, history, space: None)
    monkeypatch.setattr(HessianEarlyStop.__init__, "__defaults__", (5, 1.3, 0, 4, 1))
    calls = []

    def fake_eig(net, x, y):
        calls.append(None)
        return 1.0 if len(calls) - 1 <= 8 else 2.0

    monkeypatch.setattr(diag, "hessian_eigenvalue", fake_eig)
    cfg = SearchConfig(space="nb201", method="rdarts-es", steps=14, channels=2, cells=1,
                       size=8, batch_size=360, diag_batch=8, augment=False)
    summary = run_search(cfg, tmp_path / "es")
    metrics = [json.loads(ln) for ln in (tmp_path / "es" / "metrics.jsonl").read_text()
               .splitlines()]
    assert summary["stopped_epoch"] == 10 and len(metrics) == 11 and len(calls) == 11
    assert summary["genotype"] == metrics[4]["genotype"]
    assert summary["method"] == "rdarts-es"
