"""`nas bench --versus ROW`: ROW minus every other row, paired by seed, against a brute-force
sign-flip count and Holm worked by hand; a row not in the bench is refused in one line."""

import itertools

import pytest

from genlab.core.errors import ConfigError
from genlab.nas.bench import BenchConfig
from genlab.nas.bench.run import check_bench
from genlab.nas.bench.versus import versus_family, versus_rows


def _records(values: dict[str, list[float]], metric="cifar10"):
    return [{"reg": row, "seed": seed, metric: v}
            for row, vs in values.items() for seed, v in enumerate(vs)]


def _sign_flip_p(d):
    """Two-sided p of the mean by enumerating every sign pattern (ties count)."""
    observed = abs(sum(d))
    hits = sum(abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-12
               for signs in itertools.product((1, -1), repeat=len(d)))
    return hits / 2 ** len(d)


def test_versus_rows_against_brute_force_and_hand_holm():
    values = {"ber": [94.0, 93.5, 94.2, 93.9, 94.1, 93.8],
              "darts": [54.3, 60.0, 58.1, 70.2, 54.3, 61.0],   # far below: p = 2/64
              "gdas": [93.9, 93.6, 94.0, 93.7, 94.3, 93.6]}    # close: undecided
    table = versus_family(_records(values), list(values), "ber", "cifar10")
    assert [r["row"] for r in table] == ["ber - darts", "ber - gdas"]
    d_darts = [a - b for a, b in zip(values["ber"], values["darts"], strict=True)]
    d_gdas = [a - b for a, b in zip(values["ber"], values["gdas"], strict=True)]
    p = [_sign_flip_p(d_darts), _sign_flip_p(d_gdas)]
    assert p[0] == 2 / 64
    # Holm by hand: the smaller p times 2, the larger times 1 (monotone)
    holm = [min(1.0, 2 * p[0]), max(min(1.0, 2 * p[0]), p[1])]
    assert table[0]["p (Holm)"] == pytest.approx(holm[0])
    assert table[1]["p (Holm)"] == pytest.approx(holm[1])
    assert table[0]["effect"] == pytest.approx(sum(d_darts) / 6)
    assert table[0]["verdict"] == "better" and table[1]["verdict"] == "undecided"
    assert table[0]["n"] == 6 and table[0]["seeds"] == "0-5"


def test_fewer_parameter_free_edges_read_as_better_and_missing_seeds_unpaired():
    records = _records({"ber": [0, 1, 0, 0, 1, 0], "darts": [6, 5, 6, 6, 4, 6]},
                       "param_free_ops")
    records.append({"reg": "darts", "seed": 9, "param_free_ops": 6})  # no ber seed 9
    table = versus_rows(records, ["ber", "darts"], "ber")
    assert [r["metric"] for r in table] == ["p-free edges"]
    assert table[0]["n"] == 6 and table[0]["effect"] < 0 and table[0]["verdict"] == "better"


def test_a_versus_row_outside_the_bench_is_refused():
    cfg = BenchConfig(methods=["darts", "gdas"], seeds=[0], versus="ber")
    with pytest.raises(ConfigError, match="--versus ber: not a row of this bench"):
        check_bench(cfg, 1)
