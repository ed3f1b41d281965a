"""A random NB201 cell's exact accuracy distribution (NB201Table.chance, chance_record)
against a direct count over the synthetic table's cells (tests/nb201_world.py)."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter

from nb201_world import NB201_OP_WEIGHT, nb201_synthetic_accuracy

from genlab.core.results import load_result
from genlab.nas.spaces.nb201.table import NB201Table, chance_record


def test_the_chance_distribution_is_the_direct_count(nb201_table, tmp_path):
    counts = Counter(nb201_synthetic_accuracy(ops)[0]
                     for ops in itertools.product(list(NB201_OP_WEIGHT), repeat=6))
    table = NB201Table.load(nb201_table)
    dist = table.chance("cifar10")
    assert len(table) == 5 ** 6 == sum(counts.values())
    assert sorted(dist.values.tolist()) == sorted(counts)
    for value, p in zip(dist.values, dist.probabilities, strict=True):
        assert math.isclose(p, counts[float(value)] / 5 ** 6)
    # a cell at least as good as 94 (only all-3x3 cells score 70 + 6 x 4)
    assert counts[94.0] == 1 and math.isclose(dist.at_least(94.0), 1 / 5 ** 6)
    assert math.isclose(dist.at_least(10.0), 1.0)
    assert math.isclose(dist.mean(), sum(v * c for v, c in counts.items()) / 5 ** 6)
    record = chance_record(table, command="python experiments/nb201_chance.py",
                           commit="abc1234")
    assert record["chance"]["population"] == 5 ** 6
    assert dict(zip(record["chance"]["values"], record["chance"]["counts"], strict=True)) == \
        dict(counts)
    path = tmp_path / "nb201_chance.json"
    path.write_text(json.dumps(record))
    assert load_result(path).chance["counts"] == record["chance"]["counts"]
