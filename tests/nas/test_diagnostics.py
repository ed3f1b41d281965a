"""Collapse diagnostics on the real supernet, against a per-edge reference and hand values."""

import math

import torch
import torch.nn.functional as F

from genlab.nas.diagnostics import alpha_hessian, ib_point, mean_entropy
from genlab.nas.entropy import gaussian_batch_entropy
from genlab.nas.supernet import NB201SuperNet


def test_alpha_hessian_of_fused_supernet_equals_per_edge_reference(nas_step_bench):
    # The fused supernet has a custom autograd kernel; its second derivatives must match
    # plain autograd through the textbook per-edge mixed ops (row-by-row double backward).
    bench = nas_step_bench
    torch.manual_seed(0)
    ours = NB201SuperNet(C=2, N=1, num_classes=3, in_channels=1).double()
    ref = bench.ReferenceSuperNet(C=2, N=1, num_classes=3, in_channels=1).double()
    bench.copy_reference_into(ours, ref)
    with torch.no_grad():
        ours.arch_params.normal_()
        ref.arch_params.copy_(ours.arch_params)
    x = torch.randn(12, 1, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 3, (12,))
    loss = F.cross_entropy(ref(x), y)
    (g,) = torch.autograd.grad(loss, ref.arch_params, create_graph=True)
    rows = [torch.autograd.grad(gi, ref.arch_params, retain_graph=True)[0].reshape(-1)
            for gi in g.reshape(-1)]
    expected = torch.stack(rows)
    buffers = {k: v.clone() for k, v in ours.state_dict().items()}
    got = alpha_hessian(ours, x, y)
    assert torch.allclose(got, expected, atol=1e-10)
    for k, v in ours.state_dict().items():  # BN running stats of the search untouched
        assert torch.equal(v, buffers[k])


def test_ib_point_and_entropy_hand_values():
    torch.manual_seed(1)
    net = NB201SuperNet(C=2, N=1, num_classes=3, in_channels=1, init_scale=0.0)
    assert abs(mean_entropy(net.arch_params) - math.log(5)) < 1e-6
    x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 3, (16,))
    point = ib_point(net, x, y)
    logits, cells = net(x, return_cells=True)
    assert abs(point["val_ce"] - float(F.cross_entropy(logits, y))) < 1e-6
    expected = sum(float(gaussian_batch_entropy(o)) for _, o in cells) / len(cells)
    assert abs(point["cell_batch_entropy"] - expected) < 1e-6
