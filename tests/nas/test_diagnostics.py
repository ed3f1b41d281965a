"""Collapse diagnostics on the real supernets, against per-edge references and hand values."""

import math

import pytest
import torch
import torch.nn.functional as F

from genlab.nas.diagnostics import (
    alpha_hessian,
    hessian_eigenvalue,
    ib_point,
    lanczos_top_eigenvalue,
    mean_entropy,
)
from genlab.nas.entropy import gaussian_batch_entropy
from genlab.nas.spaces import get_space
from genlab.nas.spaces.nb201.supernet import NB201SuperNet
from genlab.nas.supernet.probe import CellPairs


def explicit_hessian(net, x, y):
    """Row-by-row double backward through the concatenated alphas (plain autograd)."""
    alphas = list(net.arch_parameters())
    loss = F.cross_entropy(net(x), y)
    grads = torch.autograd.grad(loss, alphas, create_graph=True)
    flat = torch.cat([g.reshape(-1) for g in grads])
    rows = []
    for gi in flat:
        parts = torch.autograd.grad(gi, alphas, retain_graph=True, allow_unused=True)
        rows.append(torch.cat([(p if p is not None else torch.zeros_like(a)).reshape(-1)
                               for p, a in zip(parts, alphas, strict=True)]))
    return torch.stack(rows)


def test_alpha_hessian_of_fused_supernet_equals_per_edge_reference(monkeypatch):
    # The fused supernet has a custom autograd kernel; its second derivatives must match
    # plain autograd through the textbook per-edge mixed ops (row-by-row double backward).
    # It runs in channels_last; the Hessian's copy runs in the default layout, so the rows
    # are batched (vmap has no channels_last layout query): no failed try is recorded.
    from genlab.nas import diagnostics

    monkeypatch.setattr(diagnostics, "_UNBATCHED", set())
    torch.manual_seed(0)
    ref = NB201SuperNet(C=2, N=1, num_classes=3, in_channels=1, per_edge=True).double()
    ours = NB201SuperNet(C=2, N=1, num_classes=3, in_channels=1).double()
    with torch.no_grad():
        ref.arch_params.normal_()
    ours.load_per_edge(ref)
    x = torch.randn(12, 1, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 3, (12,))
    expected = explicit_hessian(ref, x, y)
    buffers = {k: v.clone() for k, v in ours.state_dict().items()}
    assert ours.channels_last
    got = alpha_hessian(ours, x, y)
    assert torch.allclose(got, expected, atol=1e-10) and not diagnostics._UNBATCHED
    for k, v in ours.state_dict().items():  # BN running stats of the search untouched
        assert torch.equal(v, buffers[k])


def test_batched_rows_are_not_tried_again_where_they_failed(monkeypatch):
    # the exact Hessian either way; after a batched double backward fails on a device type,
    # the rows come one by one there without another failed try
    from genlab.nas import diagnostics

    monkeypatch.setattr(diagnostics, "_UNBATCHED", set())
    real, tries = torch.autograd.grad, []

    def grad(*args, **kwargs):
        if kwargs.get("is_grads_batched"):
            tries.append(1)
            raise RuntimeError("no vmap rule")
        return real(*args, **kwargs)

    torch.manual_seed(0)
    net = NB201SuperNet(C=2, N=1, num_classes=3, in_channels=1).double()
    x, y = torch.randn(8, 1, 8, 8, dtype=torch.float64), torch.randint(0, 3, (8,))
    expected = explicit_hessian(net.train(), x, y)
    monkeypatch.setattr(diagnostics.torch.autograd, "grad", grad)
    first, second = alpha_hessian(net, x, y), alpha_hessian(net, x, y)
    assert len(tries) == 1 and diagnostics._UNBATCHED == {"cpu"}
    assert torch.allclose(first, 0.5 * (expected + expected.T), atol=1e-10)
    assert torch.equal(first, second)


@pytest.mark.parametrize("space, entries", [
    ("s3", 84),  # normal + reduce, 14 x 3 each
    pytest.param("darts", 224, marks=pytest.mark.slow),  # max-pool: no vmap rule, row by row
])
def test_hessian_over_normal_and_reduce_alphas_and_lanczos(space, entries):
    # The Hessian spans both alpha tensors and matches plain autograd; the Lanczos estimate
    # of its top eigenvalue (what the search logs in these spaces) matches eigvalsh.
    torch.manual_seed(0)
    net = get_space(space).build_supernet(num_classes=3, in_channels=1, channels=2,
                                           cells=3).double()  # cells N, R, R
    with torch.no_grad():
        for a in net.arch_parameters():
            a.normal_()
    x = torch.randn(8, 1, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 3, (8,))
    expected = explicit_hessian(net, x, y)
    assert expected.shape == (entries, entries)
    got = alpha_hessian(net, x, y)
    torch.testing.assert_close(got, 0.5 * (expected + expected.T), atol=1e-9, rtol=1e-7)
    top = float(torch.linalg.eigvalsh(got)[-1])
    assert abs(lanczos_top_eigenvalue(net, x, y) - top) < 1e-3 * abs(top)
    assert abs(hessian_eigenvalue(net, x, y) - top) < 1e-3 * abs(top)


def test_diagnostics_leave_the_global_rng_alone():
    # S4's noise op draws from the global generator: diagnostics must not move the search's.
    net = get_space("s4").build_supernet(num_classes=3, in_channels=1, channels=2, cells=2)
    x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 3, (4,))
    torch.manual_seed(5)
    ib_point(net, x, y)
    hessian_eigenvalue(net, x, y)
    after = torch.rand(3)
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(3))


def test_ib_point_and_entropy_hand_values():
    torch.manual_seed(1)
    net = NB201SuperNet(C=2, N=1, num_classes=3, in_channels=1, init_scale=0.0)
    assert abs(mean_entropy(net.alphas()) - math.log(5)) < 1e-6
    x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 3, (16,))
    point = ib_point(net, x, y)
    probe = CellPairs()
    with torch.no_grad():  # the hand values are plain numbers
        logits = net(x, probe=probe)
    assert abs(point["val_ce"] - float(F.cross_entropy(logits, y))) < 1e-6
    # percent: 100 x the count of correct predictions
    correct = sum(int(p == t) for p, t in zip(logits.argmax(-1).tolist(), y.tolist(), strict=True))
    assert point["val_acc"] == pytest.approx(100.0 * correct / len(y), abs=1e-9)
    expected = sum(float(gaussian_batch_entropy(o)) for _, o in probe.pairs) / len(probe.pairs)
    assert abs(point["cell_batch_entropy"] - expected) < 1e-6


def test_mean_entropy_spans_every_alpha_row():
    # rows: 2 uniform rows of 3 ops (log 3 each) and one one-hot-like row of 2 ops (~0)
    alphas = {"a": torch.zeros(2, 3), "b": torch.tensor([[50.0, -50.0]])}
    assert abs(mean_entropy(alphas) - 2 * math.log(3) / 3) < 1e-6
