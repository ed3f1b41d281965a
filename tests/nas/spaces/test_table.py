"""NB201Table: CSVs in the real format written here (published rows, the synthetic whole table)."""

import csv

import pytest

from genlab.core.errors import ConfigError, DataError, GenlabError, SpecError
from genlab.nas.spaces.nb201.genotype import Genotype
from genlab.nas.spaces.nb201.table import NB201Table

HEADER = ["CIFAR10TestAccuracy200Epochs", "CIFAR100TestAccuracy200Epochs",
          "ImageNetTestAccuracy200Epochs", "ArchitectureString", "UniqueString"]
BEST = ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+"
        "|skip_connect~0|nor_conv_3x3~1|nor_conv_1x1~2|")
ROWS = [
    (94.0, 73.0, 46.0, BEST),
    (10.0, 1.0, 0.8, Genotype.from_edges(["none"] * 6).to_string()),
    (90.0, 60.0, 30.0, Genotype.from_edges(["skip_connect"] * 3 + ["nor_conv_3x3"] * 3)
     .to_string()),
    (80.0, 50.0, 20.0, Genotype.from_edges(["avg_pool_3x3"] * 6).to_string()),
]


def _write(path, rows=ROWS, header=HEADER):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rows:
            w.writerow([*r, "(0)@x"][: len(header)])
    return path


def test_lookup_and_stats_on_tiny_table(tmp_path):
    t = NB201Table.load(_write(tmp_path / "t.csv"))
    assert len(t) == 4
    assert t.lookup(BEST) == {"cifar10": 94.0, "cifar100": 73.0, "imagenet16": 46.0}
    assert t.lookup(Genotype.from_string(BEST))["cifar10"] == 94.0
    s = t.stats()
    assert s["count"] == 4
    assert s["cifar10"]["mean"] == pytest.approx((94 + 10 + 90 + 80) / 4)
    # <= 3 param-free edges: BEST (1) and the skip/conv cell (3)
    s3 = t.stats(max_param_free=3)
    assert s3["count"] == 2 and s3["cifar100"]["mean"] == pytest.approx(66.5)
    assert t.best("cifar10") == (BEST, 94.0)
    assert t.percentile(BEST) == 75.0
    assert t.percentile(ROWS[1][3]) == 0.0


def test_missing_architecture_and_malformed_string(tmp_path):
    t = NB201Table.load(_write(tmp_path / "t.csv"))
    absent = Genotype.from_edges(["nor_conv_1x1"] * 6)
    with pytest.raises(GenlabError, match="not in the NAS-Bench-201 table"):
        t.lookup(absent)
    with pytest.raises(KeyError):
        t.lookup(absent)
    with pytest.raises(SpecError, match="bogus"):
        t.lookup("|bogus~0|+|none~0|none~1|+|none~0|none~1|none~2|")


def test_bad_files(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="nope.csv"):
        NB201Table.load(tmp_path / "nope.csv")
    p = _write(tmp_path / "cols.csv", header=HEADER[:2] + HEADER[3:])
    with pytest.raises(DataError, match="ImageNetTestAccuracy200Epochs") as info:
        NB201Table.load(p)
    assert "cols.csv" in str(info.value)
    p = _write(tmp_path / "row.csv", rows=[*ROWS, ("n/a", 1.0, 1.0, BEST)])
    with pytest.raises(DataError, match="line 6"):
        NB201Table.load(p)
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)
    with pytest.raises(ConfigError, match="--nb201-table"):
        NB201Table.load(None)
    monkeypatch.setenv("GENLAB_NB201_TABLE", str(_write(tmp_path / "env.csv")))
    assert len(NB201Table.load(None)) == 4


def test_cache_is_per_file_version(tmp_path):
    p = _write(tmp_path / "t.csv")
    assert NB201Table.load(p) is NB201Table.load(str(p))
    _write(p, rows=ROWS[:2])
    assert len(NB201Table.load(p)) == 2


def test_published_rows_in_the_published_format(tmp_path):
    """Two rows as the published table has them (CIFAR-10 / CIFAR-100 / ImageNet16-120 of
    NAS-Bench-201's best CIFAR-10 cell and of the all-`none` cell), read back exactly."""
    p = tmp_path / "published.csv"
    none = Genotype.from_edges(["none"] * 6).to_string()
    _write(p, rows=[(94.37333333333333, 73.21999999999998, 46.71111101277669, BEST),
                    (10.0, 0.999999999109904, 0.8333333320617675, none)])
    t = NB201Table.load(p)
    acc = t.lookup(BEST)
    assert [round(acc[k], 2) for k in ("cifar10", "cifar100", "imagenet16")] == [
        94.37, 73.22, 46.71]
    assert t.lookup(none)["cifar10"] == pytest.approx(10.0, abs=0.5)


def test_whole_table(nb201_table):
    """All 15,625 cells; lookups, best and percentiles against the rule that wrote them."""
    import itertools

    from nb201_world import NB201_OP_WEIGHT, nb201_arch_string, nb201_synthetic_accuracy

    t = NB201Table.load(nb201_table)
    assert len(t) == 15625
    every = list(itertools.product(list(NB201_OP_WEIGHT), repeat=6))
    for ops in every[::97]:
        acc = t.lookup(nb201_arch_string(ops))
        want = nb201_synthetic_accuracy(ops)
        assert [acc[k] for k in ("cifar10", "cifar100", "imagenet16")] == pytest.approx(want)
    assert t.best("cifar10") == (nb201_arch_string(["nor_conv_3x3"] * 6), 94.0)
    values = sorted(nb201_synthetic_accuracy(ops)[0] for ops in every)
    arch = nb201_arch_string(["skip_connect", "none", "none", "none", "none", "nor_conv_1x1"])
    mine = nb201_synthetic_accuracy(["skip_connect"] + ["none"] * 4 + ["nor_conv_1x1"])[0]
    assert t.percentile(arch) == pytest.approx(100 * sum(v < mine for v in values) / 15625)
