"""SAM / ASAM steps against hand computations, plus the checks every SAM user needs."""

import io

import pytest
import torch
from torch import nn

from genlab.core.errors import ConfigError
from genlab.core.trainer import Trainer
from genlab.optim import SAM, make_optimizer


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64)
    y = torch.randn(5, 1, generator=g, dtype=torch.float64)
    return x, y


def _linear(bias: bool):
    torch.manual_seed(1)
    return nn.Linear(3, 1, bias=bias).double()


def _closure(model, opt, x, y):
    def closure():
        opt.zero_grad()
        loss = 0.5 * ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss
    return closure


def _grads(W, b, x, y):
    """Hand gradient of 0.5*mean((xW^T + b - y)^2) w.r.t. W (1x3) and b (1)."""
    r = x @ W.T + (b if b is not None else 0) - y          # (n, 1)
    gW = (r * x).mean(0, keepdim=True)
    gb = r.mean(0) if b is not None else None
    return gW, gb


def test_sam_step_matches_hand_computation():
    x, y = _data()
    model = _linear(bias=False)
    W0 = model.weight.detach().clone()
    rho, lr = 0.3, 0.1
    opt = SAM(model.parameters(), torch.optim.SGD, rho=rho, lr=lr)
    loss = opt.step(_closure(model, opt, x, y))
    g, _ = _grads(W0, None, x, y)
    eps = rho * g / g.norm()
    g_pert, _ = _grads(W0 + eps, None, x, y)
    expected = W0 - lr * g_pert
    torch.testing.assert_close(model.weight.detach(), expected, rtol=0, atol=1e-12)
    # the returned loss is the one at the unperturbed weights
    torch.testing.assert_close(loss.detach(), 0.5 * ((x @ W0.T - y) ** 2).mean())


@pytest.mark.parametrize("include_1d", [False, True])
def test_asam_step_matches_hand_computation(include_1d):
    x, y = _data()
    model = _linear(bias=True)
    W0, b0 = model.weight.detach().clone(), model.bias.detach().clone()
    rho, lr = 0.5, 0.2
    opt = make_optimizer("asam", model.parameters(), rho=rho, lr=lr,
                         adaptive_include_1d=include_1d)
    opt.step(_closure(model, opt, x, y))
    gW, gb = _grads(W0, b0, x, y)
    tW = W0.abs()
    tb = b0.abs() if include_1d else torch.ones_like(b0)
    norm = torch.sqrt(((tW * gW) ** 2).sum() + ((tb * gb) ** 2).sum())
    eW, eb = rho * tW**2 * gW / norm, rho * tb**2 * gb / norm
    gW2, gb2 = _grads(W0 + eW, b0 + eb, x, y)
    torch.testing.assert_close(model.weight.detach(), W0 - lr * gW2, rtol=0, atol=1e-12)
    torch.testing.assert_close(model.bias.detach(), b0 - lr * gb2, rtol=0, atol=1e-12)


def test_trainer_closure_works_and_returns_unperturbed_loss():
    x, y = _data()
    model = _linear(bias=True)
    W0, b0 = model.weight.detach().clone(), model.bias.detach().clone()
    opt = SAM(model.parameters(), rho=0.1, lr=0.1)
    trainer = Trainer(model, opt, lambda out, t: 0.5 * ((out - t) ** 2).mean())
    loss = trainer.step(x, y)
    assert loss == pytest.approx(float(0.5 * ((x @ W0.T + b0 - y) ** 2).mean()), abs=1e-12)
    assert not torch.equal(model.weight.detach(), W0)


def test_batchnorm_statistics_updated_once_per_step():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    ref = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    ref.load_state_dict(net.state_dict())
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    ref.train()(x)                      # a single plain forward in train mode
    opt = SAM(net.parameters(), rho=0.5, lr=0.1, model=net)
    opt.step(_ce_closure(net, x, y))
    bn, bn_ref = net[1], ref[1]
    torch.testing.assert_close(bn.running_mean, bn_ref.running_mean, rtol=0, atol=0)
    torch.testing.assert_close(bn.running_var, bn_ref.running_var, rtol=0, atol=0)
    assert int(bn.num_batches_tracked) == 1
    # without model= the second pass would have updated them again (the check can fail)
    net2 = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    net2.load_state_dict(ref.state_dict())
    net2[1].reset_running_stats()
    opt2 = SAM(net2.parameters(), rho=0.5, lr=0.1)
    opt2.step(_ce_closure(net2, x, y))
    assert int(net2[1].num_batches_tracked) == 2


def _ce_closure(model, x, y):
    def closure():
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss
    return closure


def test_zero_gradient_gives_no_nan_and_skips_params_without_grad():
    torch.manual_seed(0)
    used, unused = nn.Linear(3, 1), nn.Linear(3, 1)
    before = [p.detach().clone() for p in list(used.parameters()) + list(unused.parameters())]
    opt = SAM(list(used.parameters()) + list(unused.parameters()), rho=0.1, lr=0.1,
              adaptive=True)

    def closure():
        loss = 0.0 * used(torch.ones(2, 3)).sum()
        loss.backward()
        return loss

    opt.step(closure)
    after = [p.detach() for p in list(used.parameters()) + list(unused.parameters())]
    for a, b in zip(after, before, strict=True):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert unused.weight.grad is None


@pytest.mark.parametrize("kw", [dict(rho=0.0), dict(rho=-1.0), dict(lr=-0.1),
                                dict(max_grad_norm=0.0)])
def test_bad_options_raise_config_error(kw):
    kw = dict(dict(rho=0.05, lr=0.1), **kw)
    with pytest.raises(ConfigError):
        SAM(nn.Linear(2, 1).parameters(), **kw)


def test_unknown_optimizer_name():
    with pytest.raises(ConfigError, match="optimizer"):
        make_optimizer("adamw-sam", nn.Linear(2, 1).parameters(), lr=0.1)


def test_registry_entries_state_their_facts():
    # the declared facts hold: needs_model <=> the name refuses to build without model=,
    # and every name builds with model= and the options it declares
    from genlab.optim import OPTIMIZER_REGISTRY, OPTIMIZERS, PER_SAMPLE_CLOSURE

    assert OPTIMIZERS == OPTIMIZER_REGISTRY.names()
    values = {"rho": 0.05, "rho1": 0.05, "rho2": 0.05, "lam": 0.1, "xi": 1e-6, "n_total": 100}
    for name, entry in OPTIMIZER_REGISTRY.items():
        net = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
        kw = {k: v for k, v in values.items() if k in entry.accepts}
        opt = make_optimizer(name, net.parameters(), lr=0.1, model=net, **kw)
        assert isinstance(opt, entry.cls) and (name in PER_SAMPLE_CLOSURE) == entry.per_sample
        if entry.needs_model:
            with pytest.raises(ConfigError, match="model="):
                make_optimizer(name, net.parameters(), lr=0.1, **kw)
        else:
            make_optimizer(name, net.parameters(), lr=0.1, **kw)
    assert OPTIMIZER_REGISTRY.get("asam").fixed == {"adaptive": True}


def test_scheduler_changes_base_lr():
    x, y = _data()
    model = _linear(bias=False)
    opt = SAM(model.parameters(), rho=0.05, lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
    opt.step(_closure(model, opt, x, y))
    sched.step()
    assert opt.base_optimizer.param_groups[0]["lr"] == pytest.approx(0.01)
    W0 = model.weight.detach().clone()
    opt.step(_closure(model, opt, x, y))
    g = _grads(W0, None, x, y)[0]
    g_pert = _grads(W0 + 0.05 * g / g.norm(), None, x, y)[0]
    torch.testing.assert_close(model.weight.detach(), W0 - 0.01 * g_pert, rtol=0, atol=1e-12)


def test_max_grad_norm_clips_the_update_gradient():
    x, y = _data()
    model = _linear(bias=False)
    W0 = model.weight.detach().clone()
    opt = SAM(model.parameters(), rho=0.1, lr=1.0, max_grad_norm=1e-3)
    opt.step(_closure(model, opt, x, y))
    g_pert, _ = _grads(W0 + 0.1 * _grads(W0, None, x, y)[0] / _grads(W0, None, x, y)[0].norm(),
                       None, x, y)
    expected = W0 - 1e-3 * g_pert / g_pert.norm()
    torch.testing.assert_close(model.weight.detach(), expected, rtol=0, atol=1e-9)


def test_state_dict_round_trip_continues_identically():
    torch.manual_seed(0)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    a = nn.Linear(3, 1)
    opt_a = SAM(a.parameters(), rho=0.1, lr=0.1, momentum=0.9)
    for _ in range(2):
        opt_a.step(_closure(a, opt_a, x, y))
    buf = io.BytesIO()
    torch.save({"model": a.state_dict(), "opt": opt_a.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf, weights_only=True)
    b = nn.Linear(3, 1)
    b.load_state_dict(saved["model"])
    opt_b = SAM(b.parameters(), rho=0.1, lr=0.1, momentum=0.9)
    opt_b.load_state_dict(saved["opt"])
    assert opt_b.base_optimizer.param_groups is opt_b.param_groups
    for _ in range(3):
        opt_a.step(_closure(a, opt_a, x, y))
        opt_b.step(_closure(b, opt_b, x, y))
    torch.testing.assert_close(a.weight, b.weight, rtol=0, atol=0)
    # momentum was restored: a fresh optimiser (no momentum buffer) ends elsewhere
    c = nn.Linear(3, 1)
    c.load_state_dict(saved["model"])
    opt_c = SAM(c.parameters(), rho=0.1, lr=0.1, momentum=0.9)
    for _ in range(3):
        opt_c.step(_closure(c, opt_c, x, y))
    assert not torch.allclose(a.weight, c.weight)
