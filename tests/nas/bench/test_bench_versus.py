"""`nas bench --versus ROW`: ROW minus every other row, paired by seed, against a brute-force
sign-flip count and Holm worked by hand; a row not in the bench is refused in one line."""

import itertools
import statistics

import pytest

from genlab.core.errors import ConfigError
from genlab.core.stats import minimum_detectable_effect
from genlab.nas.bench import BenchConfig
from genlab.nas.bench.run import check_bench
from genlab.nas.bench.versus import (
    best_rival,
    primary_row,
    rival_row,
    versus_family,
    versus_rows,
)


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


def test_the_primary_comparison_is_the_best_rival_alone_with_its_goal_and_power():
    values = {"ber": [93.4, 93.3, 93.3, 93.7, 92.2],
              "beta": [93.4, 93.8, 93.7, 93.5, 93.6],     # the best rival: mean 93.60
              "gdas": [93.0, 93.1, 92.9, 93.2, 93.0]}
    records = _records(values)
    row = primary_row(records, list(values), "ber", margin=0.3, planned_seeds=10)
    d = [a - b for a, b in zip(values["ber"], values["beta"], strict=True)]
    assert row["row"] == "ber - beta (best rival)" and row["n"] == 5 and row["seeds"] == "0-4"
    assert row["effect"] == pytest.approx(sum(d) / 5)
    assert row["p"] == pytest.approx(_sign_flip_p(d))  # uncorrected: the pair alone
    # at n=5 the exact 90% interval is the range of the 32 sign patterns' means but the
    # extreme ones: its lower end lies below -0.3 here, so the goal is missed
    assert row["low"] < -0.3 and row["low > -0.3"] == "missed"
    sd = statistics.stdev(d)
    assert row["MDE (80%, n=10)"] == pytest.approx(
        minimum_detectable_effect(sd, 10, alpha=0.10, test="sign-flip"))
    # before two paired seeds exist there is nothing to judge
    assert primary_row(records[:1] + records[5:6], list(values), "ber", margin=0.3,
                       planned_seeds=10) is None


def test_a_named_rival_is_judged_alone_and_the_best_rival_by_its_own_seeds():
    """rival_row against any rival (the court's power table): the pair's own sign-flip p and
    MDE; best_rival by the mean over the rival's seeds, even those ROW lacks."""
    values = {"ber": [93.4, 93.3, 93.3], "gdas": [93.0, 93.1, 92.9],
              "beta": [93.4, 93.2, 93.1]}
    records = _records(values) + [{"reg": "beta", "seed": 7, "cifar10": 99.0}]
    row = rival_row(records, "ber", "gdas", margin=0.3, planned_seeds=6)
    d = [a - b for a, b in zip(values["ber"], values["gdas"], strict=True)]
    assert row["row"] == "ber - gdas" and row["rival"] == "gdas" and row["n"] == 3
    assert row["p"] == pytest.approx(_sign_flip_p(d))
    assert row["MDE (80%, n=6)"] == pytest.approx(
        minimum_detectable_effect(statistics.stdev(d), 6, alpha=0.10, test="sign-flip"))
    assert best_rival(records, list(values), "ber") == "beta"  # seed 7 lifts its mean
    assert rival_row(records, "ber", "beta", margin=0.3, planned_seeds=6)["n"] == 3
    assert best_rival(records, ["ber"], "ber") is None


def test_the_results_file_names_the_best_rival_as_its_paper_does():
    from genlab.nas.bench.results import primary_figures
    from genlab.nas.methods import method_names, row_title

    titles = [row_title(m) for m in method_names()]
    assert len(set(titles)) == len(titles) and all(t and t.strip() == t for t in titles)
    assert (row_title("drnas"), row_title("beta"), row_title("ber")) == (
        "DrNAS", "beta-DARTS", "ber")  # a regulariser row keeps its name
    primary = {"rival": "pc-darts", "effect": -0.1, "low": -0.4, "high": 0.2, "n": 10,
               "seeds": "0-9", "low > -0.3": "missed", "MDE (80%, n=10)": 0.36}
    figures = primary_figures(primary, 0.9)
    assert figures["versus_best_rival"] == "PC-DARTS"
    assert figures["versus_primary"]["mde"] == 0.36
