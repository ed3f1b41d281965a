"""The MobileNet-like space: layout, parameter count by hand, mixed blocks, genotype text."""

import pytest
import torch

from genlab.core.errors import SpecError
from genlab.nas import get_space
from genlab.nas.spaces.mobilenet.network import (
    MB_OPS,
    NUM_BLOCKS,
    ZERO,
    MobileNetGenotype,
    layout,
    make_divisible,
    mixed_block,
)

SPACE = get_space("mobilenet")


def test_layout_is_proxylessnas():
    first, c16, blocks = layout(32)
    assert (first, c16, NUM_BLOCKS) == (32, 16, 21)
    assert [b.c_out for b in blocks] == [24] * 4 + [40] * 4 + [80] * 4 + [96] * 4 + [192] * 4 \
        + [320]
    assert [b.stride for b in blocks if not b.skippable] == [2, 2, 2, 1, 2, 1]
    assert sum(b.skippable for b in blocks) == 15
    assert all(b.stride == 1 and b.c_in == b.c_out for b in blocks if b.skippable)
    assert make_divisible(40 * 0.25) == 16 and make_divisible(24 * 0.25) == 8  # >= 90% rule
    assert {k: v.shape for k, v in SPACE.alpha_specs().items()} == {
        "skippable": (15, 7), "transition": (6, 6)}


def hand_count(choices, num_classes=1000):
    """Parameters written out (BN: 2 per channel, convs without bias, linear with bias)."""
    def mb(cin, cout, k, e):
        mid = cin * e
        expand = cin * mid + 2 * mid if e != 1 else 0
        return expand + k * k * mid + 2 * mid + mid * cout + 2 * cout

    total = 3 * 32 * 9 + 2 * 32 + mb(32, 16, 3, 1)
    for block, op in zip(layout(32)[2], choices, strict=True):
        if op != ZERO:
            total += mb(block.c_in, block.c_out, int(op[0]), int(op[-1]))
    return total + 320 * 1280 + 2 * 1280 + 1280 * num_classes + num_classes


@pytest.mark.parametrize("seed", [0, 1])
def test_network_parameter_count_by_hand(seed):
    g = torch.Generator().manual_seed(seed)
    choices = [b.ops[int(torch.randint(len(b.ops), (1,), generator=g))] for b in layout()[2]]
    net = SPACE.build_network(",".join(choices), 1000)
    assert sum(p.numel() for p in net.parameters()) == hand_count(choices)
    assert net(torch.randn(2, 3, 64, 64)).shape == (2, 1000)


def test_mixed_block_is_the_weighted_sum_of_block_outputs():
    torch.manual_seed(0)
    net = SPACE.build_supernet(num_classes=3, in_channels=1, channels=8, stem="cifar").double()
    block, ops = net.blocks_spec[1], net.blocks[1]  # a skippable block
    x = torch.randn(4, block.c_in, 4, 4, dtype=torch.float64)
    w = torch.softmax(torch.randn(7, dtype=torch.float64), 0)
    outs = [op(x) + x for op in ops] + [x]  # every MBConv with its shortcut, zero = skip
    torch.testing.assert_close(mixed_block(x, ops, w, True),
                               sum(wk * o for wk, o in zip(w, outs, strict=True)))
    one_hot_zero = torch.zeros(7, dtype=torch.float64)
    one_hot_zero[6] = 1.0
    torch.testing.assert_close(mixed_block(x, ops, one_hot_zero, True), x)


def test_derivation_argmax_and_counts():
    alphas = {"skippable": torch.zeros(15, 7), "transition": torch.zeros(6, 6)}
    alphas["skippable"][:, 6] = 1.0  # zero wins every skippable block
    alphas["transition"][:, 3] = 1.0
    g = SPACE.derive(alphas)
    assert SPACE.op_counts(g) == {"param_free_ops": 15, "skip_ops": 15}
    assert [op for op, b in zip(g.blocks, layout()[2], strict=True) if not b.skippable] == \
        [MB_OPS[3]] * 6
    assert SPACE.parse(SPACE.format(g)) == g
    assert SPACE.parse("[" + ", ".join(f"'{c}'" for c in g.blocks) + "]") == g


@pytest.mark.parametrize("text, needle", [
    (",".join(["3x3_MBConv3"] * 22), "22 choice"),
    (",".join(["zero"] + ["3x3_MBConv3"] * 20), "'zero' of block 0"),
    (",".join(["3x3_MBConv3"] * 20 + ["9x9_MBConv3"]), "'9x9_MBConv3'"),
])
def test_bad_genotypes_name_the_token(text, needle):
    with pytest.raises(SpecError) as info:
        SPACE.parse(text)
    assert needle in str(info.value)


def test_genotype_type():
    g = MobileNetGenotype(tuple(["3x3_MBConv6"] * 21))
    assert str(g) == ",".join(["3x3_MBConv6"] * 21)
