"""Per-layer per-sample gradients against a per-sample backward loop and the autograd reference."""

import copy

import pytest
import torch
from torch import nn

from genlab.core.errors import ConfigError
from genlab.optim import make_optimizer
from genlab.optim import measures as M
from genlab.optim.measures.ghost import LayerRecorder, per_sample_factors, per_sample_losses
from genlab.optim.measures.ghost_rules import RULES, generic_factors, rule_for
from genlab.optim.optimizers.samgcm import covariance_direction, woodbury_weights
from genlab.optim.training.models import build_model

LOSS = nn.CrossEntropyLoss()


class Shared(nn.Module):
    """One Linear called twice (its per-sample gradient sums both calls)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.out = nn.Linear(6, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.lin(torch.tanh(self.lin(x.flatten(1)[:, :6])))))


class OwnParam(nn.Module):
    """A module with a parameter of its own and children: the generic (vmap) rule."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 6))
        self.inner = nn.Linear(6, 3)

    def forward(self, x):
        return self.inner(x.flatten(1)[:, :6] * self.scale)


def _conv_zoo():
    return nn.Sequential(nn.Conv2d(1, 3, 3, stride=2, padding=1, bias=False), nn.ReLU(),
                         nn.Conv2d(3, 4, 2, dilation=2), nn.Flatten(), nn.LayerNorm(16),
                         nn.Linear(16, 3))


def _sequence_model():
    # Linear on (b, tokens, features) inputs, LayerNorm over the last dimension
    return nn.Sequential(nn.Flatten(2), nn.Linear(64, 5), nn.LayerNorm(5), nn.GELU(),
                         nn.Flatten(), nn.Linear(5, 3))


MODELS = {
    "mlp": lambda: build_model("mlp", 6, 2),
    "cnn_bn_eval": lambda: build_model("cnn", 4, 2),
    "transformer": lambda: build_model("transformer", 4, 1),
    "resnet": lambda: build_model("resnet", 2, 1),
    "conv_zoo": _conv_zoo,
    "sequence": _sequence_model,
    "shared": Shared,
    "own_param": OwnParam,
}


def _data(n=7, seed=1, classes=3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 8, 8, generator=g, dtype=torch.float64)
    return x, torch.randint(0, classes, (n,), generator=g)


def _setup(name):
    torch.manual_seed(0)
    model = MODELS[name]().double().eval()
    x, y = _data(classes=10 if name in ("mlp", "cnn_bn_eval", "transformer", "resnet") else 3)
    return model, x, y


def _loop(model, x, y):
    """Independent truth: one backward pass per sample."""
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for i in range(len(x)):
        gs = torch.autograd.grad(LOSS(model(x[i:i + 1]), y[i:i + 1]), params, allow_unused=True)
        rows.append(torch.cat([torch.zeros(p.numel(), dtype=p.dtype) if g is None
                               else g.reshape(-1) for g, p in zip(gs, params, strict=True)]))
    return torch.stack(rows)


@pytest.mark.parametrize("name", list(MODELS))
def test_layer_path_matches_per_sample_loop(name):
    model, x, y = _setup(name)
    truth = _loop(model, x, y)
    got = M.per_sample_grads(model, LOSS, x, y, method="layers", chunk_size=3)
    torch.testing.assert_close(got, truth, rtol=1e-10, atol=1e-12)
    rec = LayerRecorder(model)
    with rec.recording():
        out = model(x)
    psg = per_sample_factors(rec, per_sample_losses(LOSS, out, y))
    torch.testing.assert_close(psg.sq_norms(), (truth**2).sum(1), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(psg.gram(), truth @ truth.T, rtol=1e-10, atol=1e-12)
    w = torch.linspace(-1, 2, len(x), dtype=torch.float64)
    sums = psg.weighted_sum(w)
    flat = torch.cat([sums[p].reshape(-1) if p in sums else torch.zeros(p.numel(),
                                                                        dtype=torch.float64)
                      for p in model.parameters()])
    torch.testing.assert_close(flat, w @ truth, rtol=1e-10, atol=1e-12)


def test_rules_cover_the_study_layers_without_the_generic_fallback():
    for arch in ("mlp", "cnn", "transformer", "resnet"):
        model = build_model(arch, 4, 1)
        owners = LayerRecorder(model).owned
        assert owners and all(rule_for(m) is not generic_factors for m in owners), arch
    assert rule_for(OwnParam()) is generic_factors
    assert {kind for kind, _, _ in RULES} >= {nn.Linear, nn.Conv2d, nn.LayerNorm}


def test_noise_stats_layers_equal_the_vmap_reference_and_stream():
    model, x, y = _setup("cnn_bn_eval")
    ref = M.gradient_noise_stats(model, LOSS, x, y, method="vmap", chunk_size=4)
    for chunk in (2, 7):
        got = M.gradient_noise_stats(model, LOSS, x, y, method="layers", chunk_size=chunk)
        for key in ("trace_sigma", "grad_norm_sq", "gradient_diversity", "noise_scale"):
            assert got[key] == pytest.approx(ref[key], rel=1e-9), key


def test_train_mode_batchnorm_gives_per_sample_contributions():
    """With batch statistics the rows are each sample's share of the batch gradient:
    B_i^T A_i with B = d(sum_j L_j)/d(layer output), checked layer by layer by backpropagating
    B restricted to sample i through that layer alone; their sum is the batch gradient."""
    torch.manual_seed(0)
    model = build_model("cnn", 3, 2).double().train()
    x, y = _data(n=6, classes=10)
    rec = LayerRecorder(model)
    with rec.recording():
        out = model(x)
    losses = nn.functional.cross_entropy(out, y, reduction="none")
    sites = list(rec._sites)
    outputs = [s.output for s in sites]
    B = torch.autograd.grad(losses.sum(), outputs, retain_graph=True)
    params = list(model.parameters())
    batch = torch.autograd.grad(losses.sum(), params, retain_graph=True)
    psg = per_sample_factors(rec, losses)
    G = psg.materialise(params)
    starts = {}
    pos = 0
    for p in params:
        starts[p] = pos
        pos += p.numel()
    for site, b_out in zip(sites, B, strict=True):
        own = rec.owned[site.module]
        for i in range(len(x)):
            mask = torch.zeros_like(b_out)
            mask[i] = b_out[i]
            # the layer alone: recompute its output from the recorded (detached) input
            x_in = site.args[0].detach()
            with torch.enable_grad():
                if isinstance(site.module, nn.modules.batchnorm._BatchNorm):
                    x_hat = nn.functional.batch_norm(x_in, None, None, None, None, True, 0.0,
                                                     site.module.eps)
                    again = x_hat * site.module.weight[None, :, None, None] \
                        + site.module.bias[None, :, None, None]
                else:
                    again = site.module(x_in)
                gs = torch.autograd.grad(again, own, grad_outputs=mask)
            for p, g in zip(own, gs, strict=True):
                got = G[i, starts[p]:starts[p] + p.numel()]
                torch.testing.assert_close(got, g.reshape(-1), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(G.sum(0), torch.cat([g.reshape(-1) for g in batch]),
                               rtol=1e-10, atol=1e-12)


def test_layer_path_refuses_what_it_cannot_do():
    class Tied(nn.Module):  # a layer's weight also used outside the layer
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(64, 3)

        def forward(self, x):
            h = torch.tanh(self.enc(x.flatten(1)))
            return h + torch.tanh(x.flatten(1) @ self.enc.weight.T)

    x, y = _data(classes=3)
    tied = Tied().double()
    assert LayerRecorder(tied).covers  # ownership is fine; the use is not
    torch.testing.assert_close(M.per_sample_grads(tied, LOSS, x, y), _loop(tied, x, y))
    with pytest.raises(ConfigError, match="outside the module"):
        M.per_sample_grads(tied, LOSS, x, y, method="layers")
    # the optimisers' "auto" falls back to the autograd reference for such a model
    ref, auto = copy.deepcopy(tied), copy.deepcopy(tied)
    for net, per_sample in ((ref, "autograd"), (auto, "auto")):
        opt = make_optimizer("cov", net.parameters(), lr=0.1, lam=1.0, model=net,
                             per_sample=per_sample)
        for _ in range(2):
            opt.step(lambda net=net: nn.functional.cross_entropy(net(x), y, reduction="none"))
    assert opt.source.recorder is None
    torch.testing.assert_close(auto.enc.weight, ref.enc.weight)
    with pytest.raises(ConfigError, match="outside the module"):
        opt = make_optimizer("samgcm", tied.parameters(), lr=0.1, model=tied,
                             per_sample="layers")
        opt.step(lambda: nn.functional.cross_entropy(tied(x), y, reduction="none"))
    lin = nn.Linear(8, 8)
    two_owners = nn.Sequential(lin, nn.Tanh(), nn.Linear(8, 8))
    two_owners[2].weight = lin.weight
    assert not LayerRecorder(two_owners).covers

    class InPlace(nn.Module):  # a layer output modified in place afterwards
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(64, 3)

        def forward(self, x):
            out = self.lin(x.flatten(1))
            out.mul_(2.0)
            return out

    model = InPlace().double()
    torch.testing.assert_close(M.per_sample_grads(model, LOSS, x, y), _loop(model, x, y))
    with pytest.raises(ConfigError, match="in place"):
        M.per_sample_grads(model, LOSS, x, y, method="layers")


def test_per_sample_losses_fast_path_equals_the_vmapped_definition():
    g = torch.Generator().manual_seed(0)
    out, y = torch.randn(5, 4, generator=g), torch.randint(0, 4, (5,), generator=g)
    weights = torch.tensor([1.0, 2.0, 0.5, 1.0])
    for loss in (nn.CrossEntropyLoss(), nn.CrossEntropyLoss(label_smoothing=0.1),
                 nn.CrossEntropyLoss(weight=weights)):
        truth = torch.stack([loss(out[i:i + 1], y[i:i + 1]) for i in range(5)])
        torch.testing.assert_close(per_sample_losses(loss, out, y), truth)
    target = torch.randn(5, 4, generator=g)
    truth = torch.stack([nn.MSELoss()(out[i:i + 1], target[i:i + 1]) for i in range(5)])
    torch.testing.assert_close(per_sample_losses(nn.MSELoss(), out, target), truth)
    # any callable: vmapped
    hinge = lambda o, t: (1 - o.gather(1, t[:, None])).clamp_min(0).mean()  # noqa: E731
    truth = torch.stack([hinge(out[i:i + 1], y[i:i + 1]) for i in range(5)])
    torch.testing.assert_close(per_sample_losses(hinge, out, y), truth)


@pytest.mark.parametrize("name", ["mlp", "cnn_bn_eval", "transformer", "sequence", "shared"])
def test_cov_layers_equals_the_autograd_reference(name):
    model, x, y = _setup(name)
    outs = []
    for per_sample in ("autograd", "layers"):
        net = copy.deepcopy(model)
        opt = make_optimizer("cov", net.parameters(), lr=0.1, lam=0.7, n_total=50,
                             momentum=0.9, model=net, per_sample=per_sample)
        traces = []
        for _ in range(2):
            opt.step(lambda net=net: nn.functional.cross_entropy(net(x), y, reduction="none"))
            traces.append(opt.last_trace)
        outs.append((torch.cat([p.detach().reshape(-1) for p in net.parameters()]), traces))
    torch.testing.assert_close(outs[1][0], outs[0][0], rtol=1e-10, atol=1e-12)
    assert outs[1][1] == pytest.approx(outs[0][1], rel=1e-10)


@pytest.mark.parametrize("solver", ["woodbury", "dense"])
@pytest.mark.parametrize("name", ["mlp", "cnn_bn_eval", "transformer"])
def test_samgcm_layers_equals_the_autograd_reference(name, solver):
    model, x, y = _setup(name)
    outs = []
    for per_sample in ("autograd", "layers"):
        net = copy.deepcopy(model)
        opt = make_optimizer("samgcm", net.parameters(), lr=0.1, rho=0.05, xi=1e-4,
                             solver=solver, model=net, per_sample=per_sample)
        for _ in range(2):
            opt.step(lambda net=net: nn.functional.cross_entropy(net(x), y, reduction="none"))
        outs.append((torch.cat([p.detach().reshape(-1) for p in net.parameters()]),
                     opt.last_perturbation_norm))
    torch.testing.assert_close(outs[1][0], outs[0][0], rtol=1e-9, atol=1e-11)
    assert outs[1][1] == pytest.approx(outs[0][1], rel=1e-8)


def test_float32_models_agree_with_the_reference_to_rounding():
    torch.manual_seed(0)
    model = build_model("cnn", 8, 2).eval()
    x, y = torch.randn(32, 1, 8, 8), torch.randint(0, 10, (32,))
    for name, kw in (("cov", dict(lam=0.5)), ("samgcm", dict(rho=0.05, xi=1e-6))):
        outs = []
        for per_sample in ("autograd", "layers"):
            net = copy.deepcopy(model)
            opt = make_optimizer(name, net.parameters(), lr=0.1, model=net,
                                 per_sample=per_sample, **kw)
            opt.step(lambda net=net: nn.functional.cross_entropy(net(x), y, reduction="none"))
            outs.append(torch.cat([p.detach().reshape(-1) for p in net.parameters()]))
        start = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        step = (outs[0] - start).norm()
        assert float((outs[1] - outs[0]).norm()) < 1e-4 * float(step), name


def test_woodbury_weights_give_the_dense_direction():
    g = torch.Generator().manual_seed(3)
    for b, d in ((10, 300), (12, 5)):  # g outside the span of G_c, and d < b
        G = torch.randn(b, d, generator=g, dtype=torch.float64)
        for xi in (1e-6, 1e-2):
            dense = covariance_direction(G, xi, "dense")
            torch.testing.assert_close(G.T @ woodbury_weights(G @ G.T, xi), dense,
                                       rtol=1e-6, atol=1e-7 * float(dense.abs().max()))


def test_optimizers_need_a_model_for_the_layer_path():
    model = build_model("mlp", 4, 1)
    with pytest.raises(ConfigError, match="model="):
        make_optimizer("cov", model.parameters(), lr=0.1, lam=1.0, per_sample="layers")
    with pytest.raises(ConfigError, match="per_sample"):
        make_optimizer("samgcm", model.parameters(), lr=0.1, model=model, per_sample="fast")
    auto = make_optimizer("cov", model.parameters(), lr=0.1, lam=1.0, model=model)
    assert auto.source.recorder is not None
    for name, kw in (("cov", dict(lam=1.0)), ("samgcm", {})):  # never a silent slow path
        with pytest.raises(ConfigError, match="pass model=.*per_sample='autograd'"):
            make_optimizer(name, model.parameters(), lr=0.1, **kw)
    plain = make_optimizer("cov", model.parameters(), lr=0.1, lam=1.0, per_sample="autograd")
    assert plain.source.recorder is None


def _hessian(model, x, y):
    """Explicit Hessian of the mean loss over the flat parameter vector."""
    from torch.func import functional_call

    from genlab.optim.measures.per_sample import unflatten

    like = {k: p.detach() for k, p in model.named_parameters()}
    w0 = torch.cat([p.reshape(-1) for p in like.values()])
    return torch.autograd.functional.hessian(
        lambda w: LOSS(functional_call(model, unflatten(w, like), (x,)), y), w0)


def test_hessian_top_eigenvalue_default_is_accurate_to_1e5():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 8, generator=g), torch.randint(0, 4, (64,), generator=g)
    exact = float(torch.linalg.eigvalsh(_hessian(copy.deepcopy(model).double(), x.double(),
                                                 y))[-1])
    got = M.hessian_top_eigenvalue(model, LOSS, x, y)
    assert abs(got - exact) / exact < 1e-5
    old_default = M.hessian_top_eigenvalue(model, LOSS, x, y, method="power", tol=1e-4)
    assert abs(old_default - exact) / exact > 1e-5  # what the power iteration's stop gave
