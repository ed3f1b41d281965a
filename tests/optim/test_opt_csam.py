"""CSAM family against hand computations over two steps; K-FAC factors against explicit formulas."""

import pytest
import torch
from torch import nn

from genlab.core.errors import ConfigError
from genlab.optim import CSAM, ACSAM_Identity, CSAM_Identity


def _data():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(6, 3, generator=g, dtype=torch.float64),
            torch.randn(6, 2, generator=g, dtype=torch.float64))


def _model(bias=False):
    torch.manual_seed(2)
    return nn.Linear(3, 2, bias=bias).double()


def _closure(model, x, y):
    def closure():
        loss = 0.5 * ((model(x) - y) ** 2).sum(-1).mean()
        loss.backward()
        return loss
    return closure


def _grad(W, x, y, b=None):
    """Hand gradient of 0.5 * mean_i ||x_i W^T + b - y_i||^2: (dW, db)."""
    r = x @ W.T + (0 if b is None else b) - y             # (n, out)
    return r.T @ x / len(x), r.mean(0)


def test_csam_identity_two_steps_match_hand_computation():
    x, y = _data()
    model = _model()
    W = model.weight.detach().clone()
    rho1, rho2, alpha, lr = 0.2, 0.3, 0.4, 0.1
    opt = CSAM_Identity(model.parameters(), rho1=rho1, rho2=rho2, alpha=alpha, lr=lr)
    m = torch.zeros_like(W)
    for _ in range(2):
        opt.step(_closure(model, x, y))
        g0 = _grad(W, x, y)[0]
        g1 = _grad(W + rho1 * g0 / g0.norm(), x, y)[0]
        m = alpha * m + (1 - alpha) * (g1 - g0)
        v = g1 - g0 - m
        g2 = _grad(W + rho2 * v / v.norm(), x, y)[0]
        W = W - lr * g2
        torch.testing.assert_close(model.weight.detach(), W, rtol=0, atol=1e-10)
    torch.testing.assert_close(opt.state[model.weight]["csam_m"], m, rtol=0, atol=1e-12)


def test_acsam_identity_step_matches_hand_computation():
    x, y = _data()
    model = _model()
    W = model.weight.detach().clone()
    rho1, rho2, alpha, eta, lr = 0.1, 0.2, 0.4, 0.05, 0.1
    opt = ACSAM_Identity(model.parameters(), rho1=rho1, rho2=rho2, alpha=alpha, eta=eta, lr=lr)
    opt.step(_closure(model, x, y))
    g0 = _grad(W, x, y)[0]
    g1 = _grad(W + rho1 * g0 / g0.norm(), x, y)[0]
    v = (g1 - g0) * alpha                     # m = (1 - alpha) d at the first step
    t = W.abs() + eta
    e2 = rho2 * v * t**2 / (v * t).norm()
    torch.testing.assert_close(model.weight.detach(), W - lr * _grad(W + e2, x, y)[0],
                               rtol=0, atol=1e-12)


def test_kfac_factors_and_csam_step_match_explicit_kronecker():
    x, y = _data()
    model = _model(bias=True)
    W, b = model.weight.detach().clone(), model.bias.detach().clone()
    rho1, rho2, alpha, lr, damping = 0.1, 0.2, 0.4, 0.1, 1e-3
    opt = CSAM(model.parameters(), rho1=rho1, rho2=rho2, alpha=alpha, lr=lr, model=model,
               damping=damping)
    opt.step(_closure(model, x, y))
    # explicit factors: a = [x, 1]; per-sample output gradient of l_i is r_i = x_i W^T + b - y_i
    a = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)
    r = x @ W.T + b - y
    A = a.T @ a / len(x)
    G = r.T @ r / len(x)
    st = opt.state[model.weight]
    torch.testing.assert_close(st["kfac_A"], A, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(st["kfac_G"], G, rtol=1e-12, atol=1e-12)
    # the step: v on [W | b], F = G (x) A on the row-major flattening, damped
    gW0, gb0 = _grad(W, x, y, b)
    n0 = torch.sqrt((gW0**2).sum() + (gb0**2).sum())
    gW1, gb1 = _grad(W + rho1 * gW0 / n0, x, y, b + rho1 * gb0 / n0)
    V = alpha * torch.cat([gW1 - gW0, (gb1 - gb0)[:, None]], dim=1)
    F = torch.kron(G, A) + damping * torch.eye(V.numel(), dtype=V.dtype)
    pv = torch.linalg.solve(F, V.flatten())
    e = (rho2 * pv / torch.sqrt(V.flatten() @ pv)).view_as(V)
    gW2, gb2 = _grad(W + e[:, :-1], x, y, b + e[:, -1])
    torch.testing.assert_close(model.weight.detach(), W - lr * gW2, rtol=0, atol=1e-10)
    torch.testing.assert_close(model.bias.detach(), b - lr * gb2, rtol=0, atol=1e-10)


@pytest.mark.parametrize("length", ["fisher", "euclidean"])
def test_csam_perturbation_length_against_the_explicit_fisher(length):
    """e2's Euclidean length: rho2 |F^-1 v| / sqrt(v^T F^-1 v) (at most rho2 / sqrt(damping))
    in F's metric, rho2 exactly in the Euclidean one; same direction F^-1 v in both."""
    x, y = _data()
    model = _model(bias=True)
    W, b = model.weight.detach().clone(), model.bias.detach().clone()
    rho1, rho2, alpha, damping = 0.1, 0.2, 0.4, 1e-3
    opt = CSAM(model.parameters(), rho1=rho1, rho2=rho2, alpha=alpha, lr=0.1, model=model,
               damping=damping, length=length)
    seen = []
    direction = opt._direction
    opt._direction = lambda params, v: seen.append(direction(params, v)) or seen[-1]
    opt.step(_closure(model, x, y))
    e2 = torch.cat([seen[0][0], seen[0][1][:, None]], dim=1).flatten()
    a = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)
    r = x @ W.T + b - y
    F = torch.kron(r.T @ r / len(x), a.T @ a / len(x)) + damping * torch.eye(8, dtype=x.dtype)
    gW0, gb0 = _grad(W, x, y, b)
    n0 = torch.sqrt((gW0**2).sum() + (gb0**2).sum())
    gW1, gb1 = _grad(W + rho1 * gW0 / n0, x, y, b + rho1 * gb0 / n0)
    v = alpha * torch.cat([gW1 - gW0, (gb1 - gb0)[:, None]], dim=1).flatten()
    pv = torch.linalg.solve(F, v)
    length_ = rho2 if length == "euclidean" else rho2 * pv.norm() / torch.sqrt(v @ pv)
    torch.testing.assert_close(e2.norm(), torch.as_tensor(length_, dtype=x.dtype))
    torch.testing.assert_close(e2 / e2.norm(), pv / pv.norm())
    assert e2.norm() <= rho2 / damping ** 0.5 + 1e-12
    if length == "fisher":
        assert e2.norm() > 1.1 * rho2  # F's metric is not the Euclidean one here


def test_csam_length_choices_are_checked():
    with pytest.raises(ConfigError, match="length"):
        CSAM(_model().parameters(), lr=0.1, model=_model(), length="l1")


def test_kfac_conv_factor_shapes_and_running_average():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.Flatten(),
                        nn.Linear(3 * 4 * 4, 2))
    x, y = torch.randn(5, 1, 4, 4), torch.randint(0, 2, (5,))
    opt = CSAM(net.parameters(), lr=0.1, model=net, decay=0.5)

    def closure():
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        return loss

    opt.step(closure)
    A1 = opt.state[net[0].weight]["kfac_A"].clone()
    assert A1.shape == (10, 10) and opt.state[net[0].weight]["kfac_G"].shape == (3, 3)
    opt.step(closure)
    # second batch: same input patches, so A = 0.5 A1 + 0.5 A1 = A1
    torch.testing.assert_close(opt.state[net[0].weight]["kfac_A"], A1)
    assert torch.isfinite(net[0].weight).all()


@pytest.mark.parametrize("cls", [CSAM_Identity, ACSAM_Identity, CSAM])
def test_zero_gradient_no_nan_and_bn_untouched(cls):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    before = [p.detach().clone() for p in net.parameters()]
    opt = cls(net.parameters(), lr=0.1, model=net)
    x = torch.randn(8, 3)

    def closure():
        loss = 0.0 * net(x).sum()
        loss.backward()
        return loss

    opt.step(closure)
    for p, w in zip(net.parameters(), before, strict=True):
        assert torch.isfinite(p).all()
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=0)
    assert int(net[1].num_batches_tracked) == 1


def test_bad_options():
    params = list(nn.Linear(2, 1).parameters())
    for kw in (dict(rho1=0.0), dict(rho2=-1.0), dict(alpha=1.0), dict(lr=-1.0)):
        with pytest.raises(ConfigError):
            CSAM_Identity(params, **dict(dict(lr=0.1), **kw))
    with pytest.raises(ConfigError, match="model"):
        CSAM(params, lr=0.1)
