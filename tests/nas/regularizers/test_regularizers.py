import math

import pytest
import torch
import torch.nn.functional as F

from genlab.core.errors import ConfigError
from genlab.nas.diagnostics import alpha_hessian, hessian_eigenvalue
from genlab.nas.entropy import edge_entropy, gaussian_batch_entropy
from genlab.nas.regularizers import make_regularizer
from genlab.nas.supernet.probe import CellPairs


def test_beta_gradient_is_softmax_over_edges():
    # beta-DARTS: d/d alpha_{e,k} of mean_e LSE(alpha_e) = softmax(alpha_e)_k / |E|
    alpha = torch.randn(6, 5, requires_grad=True)
    reg = make_regularizer("beta", strength=50.0, steps_per_epoch=10)
    reg.penalty(alpha).backward()
    assert torch.allclose(alpha.grad, F.softmax(alpha.detach(), -1) / 6, atol=1e-6)


def test_beta_schedule_is_strength_times_epoch_over_100():
    reg = make_regularizer("beta", strength=50.0, steps_per_epoch=10)
    assert reg.lam(0, 1000) == 0.0
    assert reg.lam(990, 1000) == pytest.approx(50 * 99 / 100)  # their code after 100 epochs: 49.5


def test_ber_kl_is_mean_kl_to_uniform_and_zero_at_uniform():
    alpha = torch.randn(6, 5, dtype=torch.float64)
    reg = make_regularizer("ber-kl", strength=1.0)
    p = F.softmax(alpha, -1)
    kl = (p * (p * 5).log()).sum(-1).mean()  # explicit KL(p || uniform)
    assert reg.penalty(alpha) == pytest.approx(float(kl))
    assert float(reg.penalty(torch.zeros(6, 5))) == pytest.approx(0.0, abs=1e-7)
    assert torch.allclose(edge_entropy(torch.zeros(2, 5)), torch.full((2,), math.log(5)))


def test_ber_schedules_up_and_down():
    up = make_regularizer("ber-kl", strength=2.0, schedule="up")
    down = make_regularizer("ber-kl", strength=2.0, schedule="down")
    assert (up.lam(0, 100), up.lam(50, 100), up.lam(100, 100)) == (0.0, 1.0, 2.0)
    assert (down.lam(0, 100), down.lam(50, 100), down.lam(100, 100)) == (2.0, 1.0, 0.0)
    # `ber` is round three's selected setting (docs/ber_round3.md, "Selection of ber-anchor")
    ber = make_regularizer("ber")
    assert (ber.name, ber.strength, ber.schedule) == ("ber-anchor", 1.75, "constant")


def test_batch_entropy_hand_value():
    # two samples +-a: batch variance a^2 for every unit
    a = 0.7
    t = torch.tensor([[a, -a, a], [-a, a, -a]])
    expected = 0.5 * math.log(2 * math.pi * math.e * a * a + 1)
    assert float(gaussian_batch_entropy(t)) == pytest.approx(expected)


def _pairs_probe(reg, pairs):
    probe = reg.make_probe()
    probe.pairs.extend(pairs)
    return probe


def test_ber_batch_penalises_only_compression():
    reg = make_regularizer("ber-batch", strength=1.0, schedule="constant")
    assert reg.needs_probe and isinstance(reg.make_probe(), CellPairs)
    assert make_regularizer("beta").make_probe() is None
    wide, narrow = torch.randn(32, 4) * 3, torch.randn(32, 4) * 0.1
    alphas = {"cell": torch.zeros(6, 5)}
    assert float(reg.penalty(alphas, _pairs_probe(reg, [(wide, narrow)]))) > 0
    assert float(reg.penalty(alphas, _pairs_probe(reg, [(narrow, wide)]))) == 0.0
    with pytest.raises(ConfigError, match="probe"):
        reg.penalty(alphas)


def test_penalties_per_alpha_tensor_summed():
    # beta-DARTS in the DARTS space: mean_e LSE per cell type, summed over normal and reduce;
    # its gradient on each tensor is that tensor's softmax / |E|. KL the same way.
    g = torch.Generator().manual_seed(0)
    normal = torch.randn(14, 8, generator=g, dtype=torch.float64, requires_grad=True)
    reduce = torch.randn(14, 8, generator=g, dtype=torch.float64, requires_grad=True)
    alphas = {"normal": normal, "reduce": reduce}
    beta = make_regularizer("beta", strength=50.0)
    value = beta.penalty(alphas)
    expected = (sum(math.log(sum(math.exp(v) for v in row)) for row in normal.tolist()) / 14
                + sum(math.log(sum(math.exp(v) for v in row)) for row in reduce.tolist()) / 14)
    assert float(value.detach()) == pytest.approx(expected)
    value.backward()
    for a in (normal, reduce):
        torch.testing.assert_close(a.grad, F.softmax(a.detach(), -1) / 14)
    kl = make_regularizer("ber-kl").penalty(alphas)
    probs = [F.softmax(a.detach(), -1) for a in (normal, reduce)]
    hand = sum(float((p * (p * 8).log()).sum(-1).mean()) for p in probs)
    assert float(kl.detach()) == pytest.approx(hand)
    # one tensor: exactly the single-alpha value (the NB201 search is unchanged)
    single = torch.randn(6, 5, generator=g)
    assert torch.equal(beta.penalty({"cell": single}), torch.logsumexp(single, -1).mean())


def test_bad_regulariser_options():
    with pytest.raises(ConfigError, match="regulariser"):
        make_regularizer("dropout")
    with pytest.raises(ConfigError, match="schedule"):
        make_regularizer("ber-kl", schedule="sideways")
    with pytest.raises(ConfigError, match="reg-strength"):
        make_regularizer("ber-kl", strength=-1)


class _ToyNet(torch.nn.Module):
    """logits = sum_k softmax(alpha)_{e,k} * (x @ W_{e,k}) summed over edges: a tiny mixed op."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.arch_params = torch.nn.Parameter(torch.randn(2, 3, generator=g, dtype=torch.float64))
        self.w = torch.randn(2, 3, 4, 3, generator=g, dtype=torch.float64)

    def arch_parameters(self):
        return [self.arch_params]

    def forward(self, x):
        p = F.softmax(self.arch_params, -1)
        return torch.tanh(torch.einsum("ek,bi,ekic->bc", p, x, self.w))


def test_alpha_hessian_matches_autograd_functional():
    net = _ToyNet()
    x = torch.randn(8, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (8,))

    def loss_of(alpha):
        p = F.softmax(alpha, -1)
        return F.cross_entropy(torch.tanh(torch.einsum("ek,bi,ekic->bc", p, x, net.w)), y)

    explicit = torch.autograd.functional.hessian(loss_of, net.arch_params.detach()).reshape(6, 6)
    assert torch.allclose(alpha_hessian(net, x, y), explicit, atol=1e-10)
    assert hessian_eigenvalue(net, x, y) == pytest.approx(
        float(torch.linalg.eigvalsh(explicit)[-1]), rel=1e-6)
