import math

import numpy as np
import pytest
import torch
from torch import nn

from genlab.core.errors import ConfigError, DataError
from genlab.gaze.data.gazeset import GazeLabels
from genlab.gaze.models import GazeBaseline, MoEGaze
from genlab.gaze.models import build_gaze_model as build_model
from genlab.gaze.models.backbones import ResNetBackbone
from genlab.gaze.models.routing import (
    ExpertBank,
    kmeans,
    route,
    subject_contrastive_loss,
    switch_balance_loss,
)


def _labels(n, subjects=None, clusters=None):
    subjects = list(range(n)) if subjects is None else subjects
    return GazeLabels.build(np.zeros((n, 2)), subjects, clusters)


def _model(**kw):
    torch.manual_seed(0)
    kw = {
        "width": 4,
        "num_experts": 4,
        "appearance_dim": 8,
        "gaze_feat_dim": 8,
        "expert_hidden": 8,
        **kw,
    }
    return MoEGaze(**kw)


@pytest.mark.parametrize("routing", ["soft", "hard-train-soft-infer", "hard"])
@pytest.mark.parametrize("training", [True, False])
def test_router_weights_sum_to_one(routing, training):
    m = _model(routing=routing).train(training)
    w = m.outputs(torch.rand(6, 3, 20, 28)).router_weights
    assert w.shape == (6, 4)
    assert torch.allclose(w.sum(dim=1), torch.ones(6), atol=1e-6)
    assert (w >= -1e-6).all()
    hard = routing == "hard" or (routing == "hard-train-soft-infer" and training)
    if hard:  # one-hot values
        assert torch.allclose(w.max(dim=1).values, torch.ones(6), atol=1e-6)


def test_route_straight_through_value_and_gradient():
    logits = torch.tensor([[0.1, 2.0, -1.0]], requires_grad=True)
    soft = torch.softmax(logits, dim=1)
    w = route(soft, "hard-train-soft-infer", training=True)
    assert torch.allclose(w.detach(), torch.tensor([[0.0, 1.0, 0.0]]), atol=1e-7)
    (w * torch.tensor([[1.0, 2.0, 3.0]])).sum().backward()
    # straight-through: gradient equals that of the soft weights
    ref = logits.detach().clone().requires_grad_(True)
    (torch.softmax(ref, 1) * torch.tensor([[1.0, 2.0, 3.0]])).sum().backward()
    assert torch.allclose(logits.grad, ref.grad)


def _expert_grads(m):
    return [
        torch.cat(
            [p.grad[k].flatten() for p in (m.experts.w1, m.experts.b1, m.experts.w2, m.experts.b2)]
        )
        for k in range(m.num_experts)
    ]


def test_gradients_reach_every_expert_soft():
    m = _model(routing="soft").train()
    m(torch.rand(8, 3, 20, 28)).abs().mean().backward()
    for k, g in enumerate(_expert_grads(m)):
        assert g.abs().sum() > 0, f"expert {k} got no gradient"


def _assign_one_sample_per_expert(m, x):
    """Put prototype k on sample k's appearance so each expert owns one sample."""
    with torch.no_grad():
        m.prototypes.copy_(m.outputs(x).appearance[: m.num_experts])


def test_gradients_reach_every_assigned_expert_hard_train():
    m = _model(routing="hard-train-soft-infer", balance="none").train()
    torch.manual_seed(1)
    x = torch.rand(4, 3, 20, 28)
    _assign_one_sample_per_expert(m, x)
    out = m.outputs(x)
    assert sorted(out.router_weights.argmax(1).tolist()) == [0, 1, 2, 3]
    out.gaze.abs().mean().backward()
    for k, g in enumerate(_expert_grads(m)):
        assert g.abs().sum() > 0, f"expert {k} got no gradient"


def test_hard_training_trains_only_the_assigned_expert():
    m = _model(routing="hard-train-soft-infer", balance="none").train()
    torch.manual_seed(1)
    x = torch.rand(4, 3, 20, 28)
    _assign_one_sample_per_expert(m, x)
    out = m.outputs(x)
    owner = out.router_weights.argmax(1)
    out.gaze[owner == 2].abs().sum().backward()  # loss of expert 2's sample only
    grads = _expert_grads(m)
    assert grads[2].abs().sum() > 0
    for k in (0, 1, 3):
        assert torch.count_nonzero(grads[k]) == 0


def test_batched_experts_equal_a_loop_of_linear_layers():
    torch.manual_seed(0)
    bank = ExpertBank(3, 5, 7, 4)
    x = torch.randn(6, 5)
    out = bank(x)
    for k in range(3):
        l1, l2 = nn.Linear(5, 7), nn.Linear(7, 4)
        with torch.no_grad():
            l1.weight.copy_(bank.w1[k].T)
            l1.bias.copy_(bank.b1[k])
            l2.weight.copy_(bank.w2[k].T)
            l2.bias.copy_(bank.b2[k])
        assert torch.allclose(out[:, k], l2(torch.relu(l1(x))), atol=1e-6)
        assert torch.allclose(out[:, k], bank.forward_one(x, k), atol=1e-6)


def test_mixture_equals_weighted_sum_of_expert_outputs():
    m = _model(routing="soft").eval()
    x = torch.rand(5, 3, 20, 28)
    out = m.outputs(x)
    feats = m.backbone(x)
    z = sum(out.router_weights[:, k : k + 1] * m.experts.forward_one(feats, k) for k in range(4))
    assert torch.allclose(out.gaze, m.head(z), atol=1e-5)


@pytest.mark.parametrize("size", [(20, 28), (36, 60), (17, 23)])
def test_shapes(size):
    x = torch.rand(3, 3, *size)
    b = GazeBaseline(width=4, gaze_feat_dim=8, expert_hidden=8)
    assert b(x).shape == (3, 2)
    m = _model(num_experts=3)
    out = m.outputs(x, _labels(3, [0, 0, 1]))
    assert out.gaze.shape == (3, 2)
    assert out.appearance.shape == (3, 8)
    assert torch.allclose(out.appearance.norm(dim=1), torch.ones(3), atol=1e-5)
    assert set(out.losses) == {"balance", "appearance"}
    assert set(m.outputs(x).losses) == {"balance"}  # no labels: no subject-contrastive term
    feats, maps = ResNetBackbone(4)(x, return_stages=True)
    assert feats.shape == (3, 32) and [f.shape[1] for f in maps] == [4, 8, 16, 32]


def _toy_clusters():
    rng = np.random.default_rng(0)
    centres = np.array([[5.0, 0, 0], [0, 5.0, 0], [0, 0, 5.0]])
    labels = np.repeat(np.arange(3), 30)
    pts = centres[labels] + rng.normal(scale=0.3, size=(90, 3))
    means = np.stack([pts[labels == c].mean(0) for c in range(3)])
    return torch.tensor(pts, dtype=torch.float32), means


def test_kmeans_finds_cluster_means():
    pts, means = _toy_clusters()
    cents = kmeans(pts, 3, seed=4).numpy()
    for mu in means:  # every true cluster mean has a centroid equal to it
        assert np.abs(cents - mu).sum(1).min() < 1e-4


def test_init_prototypes_sets_kmeans_centroids():
    pts, means = _toy_clusters()
    m = _model(num_experts=3, appearance_dim=3)
    m.init_prototypes(pts, seed=1)
    protos = m.prototypes.detach().numpy()
    for mu in means:
        assert np.abs(protos - mu).sum(1).min() < 1e-4
    with pytest.raises(ConfigError, match="init_prototypes"):
        m.init_prototypes(torch.zeros(5, 4))


def test_switch_loss_hand_values():
    uniform = torch.full((4, 2), 0.5)
    uniform_top = torch.tensor([[0.6, 0.4], [0.4, 0.6]])
    assert math.isclose(float(switch_balance_loss(uniform_top)), 1.0, rel_tol=1e-6)
    collapsed = torch.tensor([[0.9, 0.1], [0.8, 0.2]])
    # f = (1, 0), P = (0.85, 0.15): 2 * 0.85
    assert math.isclose(float(switch_balance_loss(collapsed)), 1.7, rel_tol=1e-6)
    assert switch_balance_loss(uniform).shape == ()


def test_subject_contrastive_loss_matches_a_loop():
    torch.manual_seed(0)
    emb = torch.nn.functional.normalize(torch.randn(6, 4), dim=1)
    subj = torch.tensor([0, 0, 1, 1, 1, 2])
    tau = 0.2
    losses = []
    for i in range(6):
        others = [j for j in range(6) if j != i]
        denom = sum(math.exp(float(emb[i] @ emb[j]) / tau) for j in others)
        pos = [j for j in others if subj[j] == subj[i]]
        if pos:
            losses.append(
                -sum(float(emb[i] @ emb[p]) / tau - math.log(denom) for p in pos) / len(pos)
            )
    got = float(subject_contrastive_loss(emb, subj, tau))
    assert math.isclose(got, sum(losses) / len(losses), rel_tol=1e-5)


def test_rebalance_reseeds_starved_prototype():
    m = _model(num_experts=2, appearance_dim=2, balance="rebalance")
    assert not m.prototypes.requires_grad
    with torch.no_grad():
        m.prototypes.copy_(torch.tensor([[1.0, 0.0], [-1.0, 0.0]]))
    app = torch.nn.functional.normalize(torch.tensor([[1.0, 0.1], [1.0, -0.1], [0.0, 1.0]]), dim=1)
    for _ in range(40):  # expert 1 never wins: its running load decays below 1/(4K)
        m.rebalance_step(app, m.router_probs(app))
    loads = m.router_probs(app).argmax(1)
    assert 1 in loads.tolist()


@pytest.mark.parametrize(
    "kw",
    [
        {"num_experts": 0},
        {"temperature": 0.0},
        {"temperature": -1.0},
        {"routing": "top2"},
        {"balance": "capacity"},
        {"width": 0},
    ],
)
def test_bad_options_raise_config_error(kw):
    with pytest.raises(ConfigError):
        _model(**kw)


def test_build_model_by_name():
    assert isinstance(build_model("baseline", width=4, num_experts=3), GazeBaseline)
    assert isinstance(build_model("moegaze", width=4, num_experts=3), MoEGaze)
    with pytest.raises(ConfigError, match="model"):
        build_model("vit")


def test_oracle_routing_is_the_true_cluster_one_hot():
    m = _model(routing="oracle").eval()
    x = torch.rand(4, 3, 20, 28)
    out = m.outputs(x, _labels(4, clusters=[3, 0, 2, 0]))
    assert out.router_weights.argmax(1).tolist() == [3, 0, 2, 0]
    assert torch.equal(out.router_weights.sum(1), torch.ones(4))
    feats = m.backbone(x)
    ref = m.head(torch.stack([m.experts.forward_one(feats[i:i + 1], k)[0]
                              for i, k in enumerate([3, 0, 2, 0])]))
    assert torch.allclose(out.gaze, ref, atol=1e-5)
    assert "balance" not in out.losses
    with pytest.raises(ConfigError, match="oracle"):
        m(x)  # no labels, no clusters
    with pytest.raises(DataError, match="oracle"):
        m.outputs(x, _labels(4, clusters=[0, 1, 4, 0]))  # cluster 4 with 4 experts
    with pytest.raises(DataError, match="oracle"):
        m.outputs(x, _labels(4))  # clusters unknown (-1)


def test_same_seed_gives_identical_shared_parts_across_models():
    kw = {"width": 4, "gaze_feat_dim": 8, "expert_hidden": 8}
    b = build_model("baseline", init_seed=3, **kw)
    m = build_model("moegaze", init_seed=3, num_experts=2, appearance_dim=8, **kw)
    other = build_model("baseline", init_seed=4, **kw)
    for part in ("backbone", "head"):
        sb, sm = getattr(b, part).state_dict(), getattr(m, part).state_dict()
        assert sb.keys() == sm.keys()
        assert all(torch.equal(sb[k], sm[k]) for k in sb), part
    assert not torch.equal(b.backbone.conv1.weight, other.backbone.conv1.weight)
    state = torch.get_rng_state()
    build_model("baseline", init_seed=5, **kw)
    assert torch.equal(state, torch.get_rng_state())  # the global RNG is left alone


def test_models_share_one_interface_and_hooks():
    x = torch.rand(3, 3, 20, 28)
    for name in ("baseline", "moegaze"):
        m = build_model(name, width=4, gaze_feat_dim=8, expert_hidden=8, num_experts=2,
                        appearance_dim=8)
        out = m.outputs(x, _labels(3, [1, 1, 2]))
        assert out.gaze.shape == (3, 2) and torch.allclose(m(x), out.gaze)
        m.after_step(out)  # never raises, whatever the model


@pytest.mark.parametrize("kw, reaches", [({}, False), ({"router_grad": True}, True)])
def test_gaze_loss_reaches_the_appearance_mlp_only_with_router_grad(kw, reaches):
    m = _model(**kw).train()
    m(torch.rand(4, 3, 20, 28)).abs().mean().backward()  # gaze only: no contrastive term
    g = m.appearance[0].weight.grad
    assert (g is not None and bool(g.abs().sum() > 0)) == reaches
    # the backbone gets gaze gradient either way, but never through the appearance branch
    assert m.backbone.conv1.weight.grad.abs().sum() > 0


def test_shared_expert_starts_as_the_seeds_baseline_and_experts_learn_corrections():
    kw = {"width": 4, "gaze_feat_dim": 8, "expert_hidden": 8}
    b = build_model("baseline", init_seed=3, **kw).eval()
    m = build_model("moegaze", init_seed=3, num_experts=3, appearance_dim=8, shared_expert=True,
                    routing="oracle", **kw).eval()
    x = torch.rand(6, 3, 20, 28)
    labels = _labels(6, clusters=[0, 1, 2, 0, 1, 2])
    # at initialisation the model is the baseline: same backbone, head and MLP, zero experts
    assert torch.equal(m.outputs(x, labels).gaze, b(x))
    # z = shared(f) + sum_k r_k expert_k(f), by hand on perturbed experts
    with torch.no_grad():
        m.experts.w2.normal_()
        m.experts.b2.normal_()
    feats = m.backbone(x)
    z = torch.stack([m.shared(feats[i:i + 1])[0] + m.experts.forward_one(feats[i:i + 1], k)[0]
                     for i, k in enumerate(labels.cluster.tolist())])
    assert torch.allclose(m.outputs(x, labels).gaze, m.head(z), atol=1e-5)
    assert torch.allclose(m.expert_predictions(x)[torch.arange(6), labels.cluster],
                          m.head(z), atol=1e-5)
    # an image trains the shared expert and its own cluster's expert only
    m.train()
    m.outputs(x[:2], _labels(2, clusters=[1, 1])).gaze.abs().sum().backward()
    assert m.shared[0].weight.grad.abs().sum() > 0 and m.experts.w2.grad[1].abs().sum() > 0
    assert torch.count_nonzero(m.experts.w2.grad[[0, 2]]) == 0
    assert build_model("moegaze", num_experts=2, **kw).shared is None  # off by default
