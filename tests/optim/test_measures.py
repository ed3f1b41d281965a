"""Measures against independent truth: backward loops and explicit Hessians."""

import math

import pytest
import torch
from torch import nn
from torch.func import functional_call

from genlab.core.errors import ConfigError, DataError
from genlab.optim import measures as M
from genlab.optim.measures.per_sample import unflatten


def tiny_model(seed=0, bn=False):
    torch.manual_seed(seed)
    layers = [nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 3)]
    if bn:
        layers.insert(1, nn.BatchNorm1d(3))
    return nn.Sequential(*layers).double()


def tiny_data(n=12, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g, dtype=torch.float64)
    return x, torch.randint(0, 3, (n,), generator=g)


LOSS = nn.CrossEntropyLoss()


def flat_loss(model, x, y):
    """Loss as a function of the flat parameter vector (for explicit Hessians)."""
    like = {k: p.detach() for k, p in model.named_parameters()}
    buffers = dict(model.named_buffers())

    def f(w):
        return LOSS(functional_call(model, (unflatten(w, like), buffers), (x,)), y)

    w0 = torch.cat([p.detach().reshape(-1) for p in like.values()])
    return f, w0


def explicit_hessian(model, x, y):
    f, w0 = flat_loss(model, x, y)
    return torch.autograd.functional.hessian(f, w0)


def loop_grads(model, x, y):
    rows = []
    for i in range(len(x)):
        model.zero_grad()
        LOSS(model(x[i : i + 1]), y[i : i + 1]).backward()
        rows.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    return torch.stack(rows)


def test_per_sample_grads_match_backward_loop():
    model, (x, y) = tiny_model(), tiny_data()
    truth = loop_grads(model, x, y)
    for method in ("vmap", "loop"):
        got = M.per_sample_grads(model, LOSS, x, y, method=method, chunk_size=5)
        assert torch.allclose(got, truth, atol=1e-12)


def test_noise_trace_and_related_match_loop():
    model, (x, y) = tiny_model(), tiny_data()
    g = loop_grads(model, x, y)
    mean = g.mean(0)
    trace = float(((g - mean) ** 2).sum(1).mean())
    n = len(x)
    batches = [(x[:5], y[:5]), (x[5:], y[5:])]  # iterable-of-batches input
    stats = M.gradient_noise_stats(model, LOSS, batches, chunk_size=4)
    assert stats["trace_sigma"] == pytest.approx(trace, rel=1e-10)
    assert stats["gradient_diversity"] == pytest.approx(
        float((g**2).sum()) / float(g.sum(0) @ g.sum(0)), rel=1e-10)
    assert stats["noise_scale"] == pytest.approx(trace / float(mean @ mean), rel=1e-10)
    # a * tr Sigma equals E||g_B - g||^2 over every batch of 2 drawn without replacement
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    brute = sum(float(((g[i] + g[j]) / 2 - mean).pow(2).sum()) for i, j in pairs) / len(pairs)
    assert M.minibatch_noise(model, LOSS, x, y, batch_size=2) == pytest.approx(brute, rel=1e-10)


def test_zero_gradients_give_zero_not_nan():
    model = tiny_model()
    for p in model.parameters():
        nn.init.zeros_(p)
    x, y = tiny_data()
    y = torch.zeros_like(y)
    # all-zero weights: every logit 0; gradients of the last bias are nonzero, so zero the data
    x = torch.zeros_like(x)
    model[-1].bias.requires_grad_(False)
    model[-1].weight.requires_grad_(False)
    stats = M.gradient_noise_stats(model, LOSS, x, y)
    for key in ("trace_sigma", "gradient_diversity", "noise_scale"):
        assert stats[key] == 0.0 and not math.isnan(stats[key])
    assert M.curvature_nonuniformity(model, LOSS, x, y) == 0.0
    assert M.hessian_top_eigenvalue(model, LOSS, x, y) == 0.0


def test_hessian_top_eigenvalue_power_and_lanczos_match_eigvalsh():
    model, (x, y) = tiny_model(), tiny_data()
    eig = torch.linalg.eigvalsh(explicit_hessian(model, x, y))
    dominant = float(eig[eig.abs().argmax()])
    power = M.hessian_top_eigenvalue(model, LOSS, x, y, iterations=2000, tol=1e-12, chunk_size=5)
    assert power == pytest.approx(dominant, rel=1e-5)
    lanczos = M.hessian_top_eigenvalue(model, LOSS, x, y, method="lanczos", iterations=60)
    assert lanczos == pytest.approx(float(eig.max()), rel=1e-6)


def test_hessian_trace_within_standard_error():
    model, (x, y) = tiny_model(), tiny_data()
    truth = float(torch.trace(explicit_hessian(model, x, y)))
    est = M.hessian_trace(model, LOSS, x, y, probes=150, seed=3)
    assert abs(est.value - truth) < 4 * est.stderr
    assert est.stderr < 0.3 * abs(truth)


def test_hessian_trace_exact_for_diagonal_hessian():
    # a diagonal Hessian: z^T H z = tr H for every Rademacher z
    class Quad(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(5, dtype=torch.float64))

        def forward(self, x):
            return x * self.w

    a = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]], dtype=torch.float64)
    est = M.hessian_trace(Quad(), lambda out, t: 0.5 * (out**2).sum(), a, a, probes=3)
    # loss = 0.5 * sum (a_j w_j)^2: H = diag(a_j^2)
    assert est.value == pytest.approx(float((a**2).sum()))
    assert est.stderr == pytest.approx(0.0)


def test_curvature_nonuniformity_matches_explicit_per_sample_hessians():
    model, (x, y) = tiny_model(seed=2), tiny_data(n=8)
    hs = torch.stack([explicit_hessian(model, x[i : i + 1], y[i : i + 1]) for i in range(len(x))])
    h = hs.mean(0)
    sigma_h = (hs @ hs).mean(0) - h @ h
    truth = math.sqrt(float(torch.linalg.eigvalsh(sigma_h).max()))
    for method in ("vmap", "loop"):
        got = M.curvature_nonuniformity(model, LOSS, x, y, iterations=27, solver="lanczos",
                                        method=method, chunk_size=3)
        assert got == pytest.approx(truth, rel=1e-6)
    # power iteration: a few iterations already give a lower bound close to the truth
    power = M.curvature_nonuniformity(model, LOSS, x, y, iterations=30, tol=0)
    assert 0.9 * truth < power <= truth * (1 + 1e-9)


def test_batchnorm_measured_without_changing_running_stats():
    model, (x, y) = tiny_model(bn=True), tiny_data()
    model.train()
    before = {k: b.clone() for k, b in model.state_dict().items()}
    M.hessian_top_eigenvalue(model, LOSS, x, y, iterations=5, bn_mode="batch")
    M.average_sharpness(model, LOSS, x, y, draws=2, bn_mode="batch")
    M.noise_trace(model, LOSS, x, y)
    assert model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    with pytest.raises(ConfigError, match="bn_mode"):
        M.noise_trace(model, LOSS, x, y, bn_mode="batch")
    # eval mode: per-sample gradients agree with a loop in eval mode
    model.eval()
    truth = loop_grads(model, x, y)
    assert torch.allclose(M.per_sample_grads(model, LOSS, x, y), truth, atol=1e-12)


def test_sharpness_measures():
    model, (x, y) = tiny_model(), tiny_data(n=40)
    f, w0 = flat_loss(model, x[:20], y[:20])
    wc = M.worst_case_sharpness(model, LOSS, x, y, rho=0.05, m=20, n_samples=40, steps=5)
    assert wc > 0
    # adaptive ball: the first-order max is rho * || |w| * g ||; the ascent gets close to it
    one_batch = M.worst_case_sharpness(model, LOSS, x[:20], y[:20], rho=1e-3, m=20,
                                       n_samples=20, steps=5)
    g = torch.autograd.functional.jacobian(f, w0)
    assert one_batch == pytest.approx(1e-3 * float((w0.abs() * g).norm()), rel=0.05)


class Bowl(nn.Module):
    """loss 0.5 * sum_j a_j (w_j - c_j)^2 through the output; minimum at w = c."""

    def __init__(self, c):
        super().__init__()
        self.w = nn.Parameter(c.clone())
        self.register_buffer("c", c.clone())

    def forward(self, a):
        return a * (self.w - self.c) ** 2


def test_average_sharpness_at_a_quadratic_minimum():
    # E 0.5 sum a_j delta_j^2, delta_j ~ N(0, sigma^2 c_j^2) = 0.5 sigma^2 sum a_j c_j^2
    c = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)
    a = torch.tensor([[2.0, 1.0, 4.0, 0.5]], dtype=torch.float64)
    loss = lambda out, t: 0.5 * out.sum()  # noqa: E731
    got = M.average_sharpness(Bowl(c), loss, a, a, sigma=0.1, draws=2000, seed=1)
    assert got == pytest.approx(0.5 * 0.01 * float((a[0] * c**2).sum()), rel=0.1)


def test_bad_input():
    model, (x, y) = tiny_model(), tiny_data()
    with pytest.raises(DataError):
        M.noise_trace(model, LOSS, [])
    with pytest.raises(DataError):
        M.noise_trace(model, LOSS, x[:0], y[:0])
    with pytest.raises(ConfigError):
        M.minibatch_noise(model, LOSS, x, y, batch_size=0)
    with pytest.raises(ConfigError):
        M.hessian_trace(model, LOSS, x, y, probes=-1)
    with pytest.raises(ConfigError):
        M.per_sample_grads(model, LOSS, x, y, method="magic")


def test_all_measures_keys_and_finite():
    model, (x, y) = tiny_model(), tiny_data(n=30)
    cfg = M.MeasureConfig(n_samples=30, curvature_samples=10, power_iterations=5,
                          trace_probes=3, m=10, sharpness_samples=30, ascent_steps=2, draws=2)
    out = M.all_measures(model, LOSS, x, y, cfg)
    for key in M.measure_names():
        assert math.isfinite(out[key]), key
    assert out["bn_mode"] == "eval"
