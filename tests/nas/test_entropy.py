"""Entropy estimators against hand computations and a brute-force loop over units."""

import math
import statistics

import pytest
import torch

from genlab.core.errors import ConfigError
from genlab.nas.entropy import (
    batch_entropy,
    conditional_batch_entropy,
    edge_entropy,
    gaussian_batch_entropy,
    label_information,
)
from genlab.nas.regularizers import make_regularizer

# three samples of two units: unit 0 = (1, 3, 5), unit 1 = (2, 6, 4)
HAND = torch.tensor([[1.0, 2.0], [3.0, 6.0], [5.0, 4.0]], dtype=torch.float64)


def test_peer_batch_entropy_hand_value():
    # unbiased variances: unit 0 (4 + 0 + 4) / 2 = 4, unit 1 (4 + 4 + 0) / 2 = 4
    expected = 0.5 * math.log(math.pi * math.e * 4 + 1)
    assert float(batch_entropy(HAND)) == pytest.approx(expected, rel=1e-12)


def test_gaussian_batch_entropy_hand_value():
    # population variances: 8/3 for both units
    expected = 0.5 * math.log(2 * math.pi * math.e * 8 / 3 + 1)
    assert float(gaussian_batch_entropy(HAND)) == pytest.approx(expected, rel=1e-12)
    # two samples +-a: population variance a^2 for every unit
    a = 0.7
    t = torch.tensor([[a, -a, a], [-a, a, -a]])
    assert float(gaussian_batch_entropy(t)) == pytest.approx(
        0.5 * math.log(2 * math.pi * math.e * a * a + 1))


def test_the_two_estimators_differ_by_the_hand_computed_gap():
    gap = 0.5 * math.log((2 * math.pi * math.e * 8 / 3 + 1) / (math.pi * math.e * 4 + 1))
    got = float(gaussian_batch_entropy(HAND) - batch_entropy(HAND))
    assert got == pytest.approx(gap, rel=1e-12) and got > 0.1
    # a large spread: the gap tends to 0.5 ln(2 (n - 1) / n) per unit (n = 64: 0.339 nats)
    wide = 1e4 * torch.randn(64, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got = float(gaussian_batch_entropy(wide) - batch_entropy(wide))
    assert got == pytest.approx(0.5 * math.log(2 * 63 / 64), abs=1e-6)
    # no spread: both are exactly 0
    flat = torch.ones(8, 3)
    assert float(batch_entropy(flat)) == 0.0 and float(gaussian_batch_entropy(flat)) == 0.0


def test_batch_entropy_matches_a_loop_over_units_of_a_feature_map():
    g = torch.Generator().manual_seed(3)
    t = torch.randn(5, 2, 3, 3, dtype=torch.float64, generator=g) * torch.tensor([0.1, 2.0]).view(
        1, 2, 1, 1)
    units = t.reshape(5, -1).T.tolist()  # every (channel, row, column) is one unit
    peer = statistics.fmean(0.5 * math.log(math.pi * math.e * statistics.stdev(u) ** 2 + 1)
                            for u in units)
    gauss = statistics.fmean(0.5 * math.log(2 * math.pi * math.e * statistics.pvariance(u) + 1)
                             for u in units)
    assert float(batch_entropy(t)) == pytest.approx(peer, rel=1e-10)
    assert float(gaussian_batch_entropy(t)) == pytest.approx(gauss, rel=1e-10)


def test_batch_entropy_gradient_matches_finite_differences():
    t = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for estimator in (batch_entropy, gaussian_batch_entropy):
        assert torch.autograd.gradcheck(estimator, (t.clone().requires_grad_(),))


def test_batch_entropy_refuses_a_batch_of_one_and_a_scalar():
    with pytest.raises(ConfigError, match=r"at least 2 samples.*\(1, 4\)"):
        batch_entropy(torch.randn(1, 4))
    with pytest.raises(ConfigError, match="batch dimension"):
        batch_entropy(torch.tensor(1.0))


def test_edge_entropy_hand_values():
    assert torch.allclose(edge_entropy(torch.zeros(2, 5)), torch.full((2,), math.log(5)))
    alpha = torch.log(torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64))
    assert float(edge_entropy(alpha)[0]) == pytest.approx(1.5 * math.log(2), rel=1e-12)
    assert float(edge_entropy(torch.tensor([[60.0, 0.0, 0.0]]))[0]) == pytest.approx(0, abs=1e-20)


def test_ber_batch_keeps_the_earlier_estimator():
    # relu(H_G(cell input) - H_G(cell output)): unchanged numbers since the estimators split
    reg = make_regularizer("ber-batch", strength=1.0, schedule="constant")
    narrow = HAND / 2  # population variances 2/3
    expected = 0.5 * math.log(2 * math.pi * math.e * 8 / 3 + 1) - \
        0.5 * math.log(2 * math.pi * math.e * 2 / 3 + 1)
    probe = reg.make_probe()
    probe.pairs.append((HAND, narrow))
    assert float(reg.penalty({"cell": torch.zeros(6, 5)}, probe)) == pytest.approx(expected)


def test_conditional_batch_entropy_and_label_information_hand_values():
    t = torch.tensor([[1.0], [3.0], [2.0], [6.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    # class means 2 and 4; squared deviations 1 + 1 + 4 + 4 = 10 over 4 - 2 dof: s^2 = 5
    cond = 0.5 * math.log(math.pi * math.e * 5 + 1)
    assert float(conditional_batch_entropy(t, y)) == pytest.approx(cond, rel=1e-12)
    total = 0.5 * math.log(math.pi * math.e * 14 / 3 + 1)  # unbiased variance 14 / 3
    assert float(label_information(t, y)) == pytest.approx(total - cond, rel=1e-12)


def test_conditional_batch_entropy_matches_a_loop_over_units_and_classes():
    g = torch.Generator().manual_seed(3)
    t = torch.randn(20, 2, 3, dtype=torch.float64, generator=g)
    y = torch.tensor([5, 1, 1, 7] * 5)  # labels need not be 0..c-1
    flat = t.reshape(20, -1)
    terms = []
    for j in range(flat.shape[1]):
        ss = 0.0
        for c in (1, 5, 7):
            vals = [float(flat[i, j]) for i in range(20) if int(y[i]) == c]
            m = sum(vals) / len(vals)
            ss += sum((v - m) ** 2 for v in vals)
        terms.append(0.5 * math.log(math.pi * math.e * ss / (20 - 3) + 1))
    assert float(conditional_batch_entropy(t, y)) == pytest.approx(sum(terms) / len(terms),
                                                                   rel=1e-12)
    # labels that carry the classes exactly: a unit equal to the label has all its spread
    # between classes, so it carries more label information than pure noise
    signal = y.to(torch.float64)[:, None] + 0.01 * torch.randn(20, 1, dtype=torch.float64,
                                                               generator=g)
    assert float(label_information(signal, y)) > 2.0
    assert abs(float(label_information(t, y))) < 0.3


def test_conditional_batch_entropy_refuses_bad_labels():
    with pytest.raises(ConfigError, match="one label per sample"):
        conditional_batch_entropy(torch.randn(4, 3), torch.tensor([0, 1]))
    with pytest.raises(ConfigError, match="more samples than classes"):
        conditional_batch_entropy(torch.randn(3, 3), torch.tensor([0, 1, 2]))
