"""COV and SAMGCM against explicit computations (per-sample Hessians, Python loops, dense C)."""

import pytest
import torch
from torch import nn
from torch.func import functional_call

from genlab.core.errors import ConfigError
from genlab.optim.optimizers.cov import COV, noise_factor
from genlab.optim.optimizers.per_sample_source import per_sample_closure
from genlab.optim.optimizers.samgcm import SAMGCM, covariance_direction


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()


def _data(n=6, d=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, d, generator=g, dtype=torch.float64),
            torch.randn(n, 1, generator=g, dtype=torch.float64))


def _sq_loss(out, y):
    return 0.5 * ((out - y) ** 2).sum(-1)


def _flat_loss(model, names, shapes, x, y):
    """Loss of one sample as a function of the flat parameter vector."""
    def f(w):
        parts, i = {}, 0
        for name, shape in zip(names, shapes, strict=True):
            k = int(torch.tensor(shape).prod())
            parts[name] = w[i:i + k].view(shape)
            i += k
        return _sq_loss(functional_call(model, parts, (x[None],)), y[None]).sum()
    return f


@pytest.mark.parametrize("n_total", [None, 20])
def test_cov_gradient_matches_per_sample_hessians(n_total):
    model = _mlp()
    x, y = _data()
    b = len(x)
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    w0 = torch.cat([p.detach().flatten() for p in model.parameters()])
    gs, Hs = [], []
    for i in range(b):
        f = _flat_loss(model, names, shapes, x[i], y[i])
        w = w0.clone().requires_grad_(True)
        gs.append(torch.autograd.grad(f(w), w)[0])
        Hs.append(torch.autograd.functional.hessian(f, w0))
    G, H = torch.stack(gs), torch.stack(Hs)
    a = 1 / b if n_total is None else (n_total - b) / (b * (n_total - 1))
    lam, lr = 0.7, 0.1
    penalty = (torch.einsum("bij,bj->i", H, G) / b) - H.sum(0) @ G.sum(0) / b**2
    expected_grad = G.mean(0) + a * lam * penalty
    opt = COV(model.parameters(), lr=lr, lam=lam, n_total=n_total, per_sample="autograd")
    loss = opt.step(per_sample_closure(model, _sq_loss, x, y))
    w1 = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.testing.assert_close(w1, w0 - lr * expected_grad, rtol=0, atol=1e-12)
    trace = ((G - G.mean(0)) ** 2).sum() / b
    assert opt.last_trace == pytest.approx(float(trace), rel=1e-10)
    with torch.no_grad():
        expected_loss = float(_sq_loss(model_at(model, w0)(x), y).mean())
    assert float(loss) == pytest.approx(expected_loss)


def model_at(model, w):
    clone = _mlp()
    torch.nn.utils.vector_to_parameters(w, clone.parameters())
    return clone


def test_cov_rejects_mean_loss_closure_and_bad_n():
    model = _mlp()
    x, y = _data()
    opt = COV(model.parameters(), lr=0.1, lam=1.0, per_sample="autograd")
    with pytest.raises(ConfigError, match="per-sample"):
        opt.step(lambda: _sq_loss(model(x), y).mean())
    with pytest.raises(ConfigError):
        noise_factor(10, 5)
    with pytest.raises(ConfigError):
        COV(model.parameters(), lr=-0.1, lam=1.0)


def _diag_net_problem(d=4, b=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(b, d, generator=g, dtype=torch.float64)
    y = torch.randn(b, generator=g, dtype=torch.float64)
    u = (0.5 * torch.randn(d, generator=g, dtype=torch.float64)).requires_grad_(True)
    v = (0.5 * torch.randn(d, generator=g, dtype=torch.float64)).requires_grad_(True)
    return X, y, u, v


def _diag_losses(X, y, u, v):
    return 0.5 * (X @ (u * v) - y) ** 2


def test_samgcm_step_matches_explicit_dense_computation():
    X, y, u, v = _diag_net_problem()
    u0, v0 = u.detach().clone(), v.detach().clone()
    rho, xi, lr = 0.05, 1e-3, 0.1
    # per-sample gradients by a Python loop, then C, e and the update by hand
    rows = []
    for i in range(len(X)):
        r = float(X[i] @ (u0 * v0) - y[i])
        rows.append(torch.cat([r * X[i] * v0, r * X[i] * u0]))
    G = torch.stack(rows)
    g = G.mean(0)
    C = G.T @ G / len(X) - torch.outer(g, g) + xi * torch.eye(G.shape[1], dtype=G.dtype)
    cg = torch.linalg.solve(C, g)
    e = rho * cg / torch.sqrt(g @ cg)
    up, vp = u0 + e[:4], v0 + e[4:]
    r = X @ (up * vp) - y
    grad_u = (r[:, None] * X * vp).mean(0)
    grad_v = (r[:, None] * X * up).mean(0)
    opt = SAMGCM([u, v], rho=rho, xi=xi, lr=lr, solver="dense", per_sample="autograd")
    opt.step(lambda: _diag_losses(X, y, u, v))
    torch.testing.assert_close(u.detach(), u0 - lr * grad_u, rtol=0, atol=1e-12)
    torch.testing.assert_close(v.detach(), v0 - lr * grad_v, rtol=0, atol=1e-12)
    assert opt.last_perturbation_norm == pytest.approx(float(e.norm()), rel=1e-9)


def test_woodbury_equals_dense_d300_b10():
    g = torch.Generator().manual_seed(3)
    G = torch.randn(10, 300, generator=g, dtype=torch.float64)
    for xi in (1e-6, 1e-2):
        dense = covariance_direction(G, xi, "dense")
        wood = covariance_direction(G, xi, "woodbury")
        torch.testing.assert_close(wood, dense, rtol=1e-6, atol=1e-6 * float(dense.abs().max()))
        # the direction lies on the unit C-ellipsoid: e^T C e = 1
        gm = G.mean(0)
        Gc = G - gm
        Ce = Gc.T @ (Gc @ dense) / 10 + xi * dense
        assert float(dense @ Ce) == pytest.approx(1.0, rel=1e-6)


def test_samgcm_zero_gradient_no_nan_and_bad_xi():
    X, y, u, v = _diag_net_problem()
    u0 = u.detach().clone()
    opt = SAMGCM([u, v], rho=0.1, xi=1e-6, lr=0.1, per_sample="autograd")
    opt.step(lambda: 0.0 * _diag_losses(X, y, u, v))
    assert torch.isfinite(u).all() and torch.equal(u.detach(), u0)
    assert opt.last_perturbation_norm == 0.0
    for bad in (dict(xi=0.0), dict(xi=-1.0), dict(rho=0.0), dict(lr=-1.0)):
        with pytest.raises(ConfigError):
            SAMGCM([u, v], **dict(dict(rho=0.1, xi=1e-6, lr=0.1), **bad))
    with pytest.raises(ConfigError):
        SAMGCM([u, v], lr=0.1, solver="cg")


def test_small_xi_sets_perturbation_length_rho_over_sqrt_xi():
    # b = 10 gradients in 300 dims: g has a part outside the span of the centred rows,
    # on which C^-1 = 1/xi, so ||e|| -> rho / sqrt(xi) (derivation in the module doc)
    g = torch.Generator().manual_seed(4)
    G = torch.randn(10, 300, generator=g, dtype=torch.float64)
    e = 5e-4 * covariance_direction(G, 1e-6, "woodbury")
    assert float(e.norm()) == pytest.approx(5e-4 / 1e-3, rel=1e-3)
    # with d < b the centred rows span everything: no g_perp, and ||e|| stays ~ rho / sqrt(eig C)
    e_full = 5e-4 * covariance_direction(G[:, :5], 1e-6, "dense")
    assert float(e_full.norm()) < 0.01 * 0.5


def test_with_model_the_default_is_the_layer_path_and_its_result():
    # model= (per_sample "auto") takes the per-layer path: the same steps as asking for it,
    # and the autograd reference's to rounding; without model= "auto" refuses (no silent
    # ~60x autograd path)
    from genlab.optim import make_optimizer

    x, y = torch.randn(6, 3, dtype=torch.float64), torch.randn(6, 1, dtype=torch.float64)
    for name, kw in (("cov", dict(lam=0.5)), ("samgcm", dict(rho=0.05, xi=1e-4))):
        ends = {}
        for per_sample in ("auto", "layers", "autograd"):
            net = _mlp()
            opt = make_optimizer(name, net.parameters(), lr=0.1, model=net,
                                 per_sample=per_sample, **kw)
            for _ in range(2):
                opt.step(lambda net=net: ((net(x) - y) ** 2).squeeze(1))
            ends[per_sample] = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
        assert torch.equal(ends["auto"], ends["layers"]), name
        torch.testing.assert_close(ends["auto"], ends["autograd"], rtol=1e-10, atol=1e-12)
        with pytest.raises(ConfigError, match="pass model="):
            make_optimizer(name, _mlp().parameters(), lr=0.1, **kw)
