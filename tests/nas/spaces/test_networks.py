"""Discrete NB201 networks: parameter counts by hand, and agreement with a one-hot supernet cell."""

import random

import pytest
import torch

from genlab.core.errors import ConfigError, SpecError
from genlab.nas.spaces.nb201.genotype import NB201_EDGES, NB201_OPS, Genotype
from genlab.nas.spaces.nb201.network import InferCell, build_network, count_parameters
from genlab.nas.spaces.nb201.supernet import SearchCell

ALL_NONE = Genotype.from_edges(["none"] * 6).to_string()
ALL_3X3 = Genotype.from_edges(["nor_conv_3x3"] * 6).to_string()
EXAMPLE = ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+"
           "|skip_connect~0|nor_conv_3x3~1|nor_conv_1x1~2|")


def analytic_count(ops, num_classes, C=16, N=5, in_channels=3):
    """Parameters written out: conv k*k*cin*cout (no bias), BN 2*c, linear in*out + out."""
    def conv(k, cin, cout):
        return k * k * cin * cout

    def bn(c):
        return 2 * c

    def cell(c):
        kernels = {"nor_conv_1x1": 1, "nor_conv_3x3": 3}
        return sum(conv(kernels[o], c, c) + bn(c) for o in ops if o in kernels)

    def residual(cin, cout):
        return conv(3, cin, cout) + bn(cout) + conv(3, cout, cout) + bn(cout) + conv(1, cin, cout)

    total = conv(3, in_channels, C) + bn(C)
    total += N * cell(C) + residual(C, 2 * C) + N * cell(2 * C)
    total += residual(2 * C, 4 * C) + N * cell(4 * C)
    return total + bn(4 * C) + 4 * C * num_classes + num_classes


@pytest.mark.parametrize("arch", [ALL_NONE, ALL_3X3, EXAMPLE])
@pytest.mark.parametrize("num_classes", [10, 100])
def test_parameter_count_matches_formula(arch, num_classes):
    ops = Genotype.from_string(arch).ops()
    assert count_parameters(build_network(arch, num_classes)) == analytic_count(ops, num_classes)


def test_parameter_count_random_small_configs():
    rng = random.Random(0)
    for _ in range(5):
        ops = [rng.choice(NB201_OPS) for _ in range(6)]
        C, N, k, nc = rng.randint(1, 6), rng.randint(1, 2), rng.randint(1, 3), rng.randint(2, 9)
        net = build_network(Genotype.from_edges(ops).to_string(), nc, C=C, N=N, in_channels=k)
        assert count_parameters(net) == analytic_count(ops, nc, C, N, k)


def test_forward_shapes_and_none_cell_is_zero():
    net = build_network(EXAMPLE, 10, C=4, N=1, in_channels=1)
    assert net(torch.randn(2, 1, 16, 16)).shape == (2, 10)
    cell = InferCell(Genotype.from_string(ALL_NONE), 4)
    assert torch.equal(cell(torch.randn(2, 4, 5, 5)), torch.zeros(2, 4, 5, 5))
    with pytest.raises(SpecError):
        build_network("|nor_conv_3x3~0|", 10)
    with pytest.raises(ConfigError):
        build_network(EXAMPLE, 0)


@pytest.mark.parametrize("arch", [EXAMPLE, ALL_NONE,
                                  "|avg_pool_3x3~0|+|nor_conv_1x1~0|none~1|+"
                                  "|skip_connect~0|avg_pool_3x3~1|nor_conv_3x3~2|"])
def test_one_hot_supernet_cell_equals_discrete_cell(arch):
    g = Genotype.from_string(arch)
    torch.manual_seed(0)
    discrete = InferCell(g, 4).double()
    mixed = SearchCell(4).double()
    onehot = torch.zeros(6, 5, dtype=torch.float64)
    for row, (edge, op) in enumerate(g.edges().items()):
        assert NB201_EDGES[row] == edge
        onehot[row, NB201_OPS.index(op)] = 1.0
        if op.startswith("nor_conv"):
            with torch.no_grad():
                mixed.edge_weight(edge, op).copy_(discrete.edges[edge].op[1].weight)
    x = torch.randn(3, 4, 6, 6, dtype=torch.float64)
    torch.testing.assert_close(mixed(x, onehot)[-1], discrete(x), atol=1e-10, rtol=1e-10)
