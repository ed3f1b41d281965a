"""genlab.nas.fidelity.zero_cost: each proxy against a value computed by hand on a tiny net."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from genlab.nas.fidelity.zero_cost import (
    ZERO_COST,
    nwot_score,
    params_score,
    snip_score,
    synflow_score,
    zico_score,
)


def linear(weight) -> nn.Linear:
    w = torch.tensor(weight, dtype=torch.float32)
    layer = nn.Linear(w.shape[1], w.shape[0], bias=False)
    with torch.no_grad():
        layer.weight.copy_(w)
    return layer


def test_the_registry_holds_the_five_proxies():
    assert set(ZERO_COST.names()) == {"params", "synflow", "snip", "nwot", "zico"}


def test_params_counts_weights_and_biases():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1, bias=False))
    assert params_score(net, torch.zeros(1, 2), torch.zeros(1)) == 2 * 3 + 3 + 3


def test_synflow_by_hand_batchnorm_removed_and_signs_dropped():
    a = [[1.0, -2.0], [0.5, 3.0]]
    b = [[-1.5, 2.0]]
    net = nn.Sequential(linear(a), nn.BatchNorm1d(2), nn.ReLU(), linear(b))
    # |A| and |b|, no BN, input of ones: R = sum_i |b_i| sum_j |A_ij|;
    # dR/dA_ij = |b_i|, dR/db_i = sum_j |A_ij|, so score = 2 sum_ij |b_i| |A_ij|
    by_hand = 2 * sum(abs(b[0][i]) * abs(a[i][j]) for i in range(2) for j in range(2))
    assert synflow_score(net, torch.randn(5, 2), torch.zeros(5)) == pytest.approx(by_hand)
    assert net[0].weight[0, 1].item() == -2.0  # the scored network is a copy


def test_snip_by_hand_on_a_linear_classifier():
    w = np.array([[0.2, -0.4], [0.1, 0.3], [-0.5, 0.2]])
    x = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -0.7], [2.0, 1.0]])
    y = np.array([0, 2, 1, 2])
    logits = x @ w.T
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    grad = (p - np.eye(3)[y]).T @ x / len(x)  # d mean CE / dW
    by_hand = np.abs(w * grad).sum()
    got = snip_score(linear(w.tolist()), torch.tensor(x, dtype=torch.float32),
                     torch.tensor(y))
    assert got == pytest.approx(by_hand, rel=1e-5)


def test_nwot_is_the_log_determinant_of_the_agreement_counts():
    net = nn.Sequential(linear([[1.0, 0.0], [0.0, 1.0]]), nn.ReLU())
    x = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]])
    # codes (1,1), (1,0), (0,0); units on which two images agree:
    k = np.array([[2, 1, 0], [1, 2, 1], [0, 1, 2]], float)
    assert nwot_score(net, x, torch.zeros(3)) == pytest.approx(math.log(np.linalg.det(k)))
    two = nn.Sequential(linear([[1.0, 0.0], [0.0, 1.0]]), nn.ReLU(), nn.ReLU())
    assert nwot_score(two, x, torch.zeros(3)) == pytest.approx(math.log(np.linalg.det(2 * k)))


def test_zico_by_hand_on_a_linear_classifier():
    w = np.array([[0.3, -0.2], [-0.1, 0.4]])
    x = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -0.7], [2.0, 1.0]])
    y = np.array([0, 1, 1, 0])
    grads = []
    for part in (slice(0, 2), slice(2, 4)):  # two halves, each the mean CE's gradient
        logits = x[part] @ w.T
        p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        grads.append(((p - np.eye(2)[y[part]]).T @ x[part] / 2).ravel())
    g = np.stack(grads)
    std = g.std(axis=0)
    keep = std != 0
    by_hand = math.log(np.sum(np.abs(g).mean(0)[keep] / std[keep]))
    got = zico_score(linear(w.tolist()), torch.tensor(x, dtype=torch.float32), torch.tensor(y))
    assert got == pytest.approx(by_hand, rel=1e-5)


def test_every_proxy_scores_an_nb201_network():
    from genlab.nas.spaces.nb201.network import build_network

    torch.manual_seed(0)
    net = build_network("|nor_conv_3x3~0|+|skip_connect~0|nor_conv_1x1~1|+|none~0|"
                        "avg_pool_3x3~1|nor_conv_3x3~2|", 10, C=4, N=1, in_channels=3)
    x, y = torch.randn(8, 3, 16, 16), torch.arange(8) % 10
    for name, proxy in ZERO_COST.items():
        assert math.isfinite(proxy.score(net, x, y)), name
