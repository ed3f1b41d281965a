"""Genotype strings, derivation and the search-space registry."""

import random

import pytest
import torch

from genlab.core.errors import ConfigError, SpecError
from genlab.nas.spaces import get_space, space_names
from genlab.nas.spaces.nb201.genotype import NB201_EDGES, NB201_OPS, Genotype, derive_genotype
from genlab.nas.supernet.ops import PARAM_FREE_OPS

EXAMPLE = ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+"
           "|skip_connect~0|nor_conv_3x3~1|nor_conv_1x1~2|")


def _format_by_hand(ops):
    """Independent formatter: the official string written from a flat op list."""
    a, b, c, d, e, f = ops
    return f"|{a}~0|+|{b}~0|{c}~1|+|{d}~0|{e}~1|{f}~2|"


def test_example_parses_to_the_documented_edges():
    g = Genotype.from_string(EXAMPLE)
    assert g.edges() == {"1<-0": "nor_conv_3x3", "2<-0": "nor_conv_3x3", "2<-1": "nor_conv_3x3",
                         "3<-0": "skip_connect", "3<-1": "nor_conv_3x3", "3<-2": "nor_conv_1x1"}
    assert list(g.edges()) == list(NB201_EDGES)
    assert g.nodes[2] == (("skip_connect", 0), ("nor_conv_3x3", 1), ("nor_conv_1x1", 2))
    assert g.param_free_count() == 1
    assert g.to_string() == EXAMPLE


def test_all_15625_round_trip_and_match_hand_formatter():
    seen = set()
    for g in Genotype.all():
        s = g.to_string()
        assert s == _format_by_hand(g.ops())
        assert Genotype.from_string(s) == g
        seen.add(s)
    assert len(seen) == 5 ** 6


def test_param_free_count_matches_brute_force():
    rng = random.Random(0)
    for _ in range(200):
        ops = [rng.choice(NB201_OPS) for _ in range(6)]
        g = Genotype.from_edges(ops)
        assert g.param_free_count() == sum(op in PARAM_FREE_OPS for op in ops)


def test_genotype_is_immutable_and_hashable():
    g = Genotype.from_string(EXAMPLE)
    with pytest.raises(AttributeError):
        g.nodes = ()
    assert hash(g) == hash(Genotype.from_string(EXAMPLE))


@pytest.mark.parametrize("bad, token", [
    ("|nor_conv_3x3~0|+|nor_conv_3x3~0|conv_5x5~1|+|skip_connect~0|nor_conv_3x3~1|none~2|",
     "conv_5x5"),
    ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~2|+|skip_connect~0|none~1|none~2|", "~2"),
    ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~x|+|skip_connect~0|none~1|none~2|", "'x'"),
    ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3|+|skip_connect~0|none~1|none~2|",
     "'nor_conv_3x3'"),
    ("|nor_conv_3x3~0|+|nor_conv_3x3~0|+|skip_connect~0|none~1|none~2|", "node 2"),
    ("|nor_conv_3x3~0|+|nor_conv_3x3~0|none~1|", "2 node"),
    ("|a~0|+|b~0|c~1|+|d~0|e~1|f~2|+|g~0|", "4 node"),
    ("nor_conv_3x3~0+|none~0|none~1|+|none~0|none~1|none~2|", "nor_conv_3x3~0"),
    ("", "empty"),
])
def test_malformed_strings_name_the_token(bad, token):
    with pytest.raises(SpecError) as info:
        Genotype.from_string(bad)
    assert token in str(info.value)


def test_error_gives_character_position():
    bad = "|none~0|+|none~0|none~1|+|none~0|oops~1|none~2|"
    with pytest.raises(SpecError) as info:
        Genotype.from_string(bad)
    assert f"character {bad.index('oops')}" in str(info.value)


def test_derive_genotype_matches_brute_force_argmax():
    gen = torch.Generator().manual_seed(0)
    for trial in range(50):
        w = torch.randn(6, 5, generator=gen)
        if trial % 5 == 0:
            w = torch.softmax(w, -1)
        expected = []
        for row in w.tolist():
            best = 0
            for k, v in enumerate(row):
                if v > row[best]:
                    best = k
            expected.append(NB201_OPS[best])
        assert derive_genotype(w).ops() == tuple(expected)


def test_derive_genotype_ties_take_first_op_and_none_counts():
    w = torch.zeros(6, 5)
    assert derive_genotype(w).ops() == ("none",) * 6
    w[:, 3] = 1.0
    assert derive_genotype(w).ops() == ("nor_conv_3x3",) * 6
    with pytest.raises(SpecError):
        derive_genotype(torch.zeros(6, 4))


def test_spaces_registry():
    assert get_space("nb201").ops == NB201_OPS
    assert get_space("nb201").num_architectures == 15625
    assert {"nb201", "darts", "s1", "s2", "s3", "s4", "mobilenet"} <= set(space_names())
    with pytest.raises(ConfigError, match="nb201") as info:
        get_space("nope")
    assert "'nope'" in str(info.value)


def test_space_builds_supernet_and_network():
    space = get_space("nb201")
    net = space.build_supernet(channels=2, cells=1, num_classes=3, in_channels=1)
    assert net.arch_params.shape == (len(space.edges), len(space.ops))
    g = space.parse(EXAMPLE)
    assert space.format(g) == EXAMPLE
    assert space.build_network(g.to_string(), 3, channels=2, cells=1, in_channels=1)(
        torch.randn(2, 1, 8, 8)).shape == (2, 3)
