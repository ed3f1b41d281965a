"""genlab.nas.studies.proxy_fidelity: the fixed draw, connectivity, tau, and a tiny study."""

import itertools
import json

import numpy as np
import pytest

import genlab.nas.studies.proxy_fidelity as proxy_fidelity_module
from genlab.nas.spaces.nb201.genotype import Genotype


@pytest.fixture(scope="module")
def fid():
    return proxy_fidelity_module


def test_draw_is_fixed_distinct_and_indexes_all_cells(fid):
    cells = fid.draw_cells()
    assert cells == fid.draw_cells() and len({i for i, _ in cells}) == 30
    everything = [g.to_string() for g in Genotype.all()]
    assert len(everything) == 15625
    assert all(everything[i] == arch for i, arch in cells)
    expected = sorted(np.random.default_rng(0).choice(15625, 30, replace=False).tolist())
    assert [i for i, _ in cells] == expected


@pytest.mark.parametrize("arch, connected", [
    ("|none~0|+|none~0|none~1|+|none~0|none~1|none~2|", False),
    ("|none~0|+|none~0|nor_conv_1x1~1|+|none~0|skip_connect~1|nor_conv_1x1~2|", False),
    ("|none~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|", True),
    ("|avg_pool_3x3~0|+|none~0|none~1|+|none~0|none~1|skip_connect~2|", False),
    ("|avg_pool_3x3~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|", True),
])
def test_output_connected_hand_cases(fid, arch, connected):
    assert fid.output_connected(arch) is connected


def _tau_b(x, y):
    """Kendall's tau-b by a loop over all pairs (ties in either ranking counted apart)."""
    conc = disc = tx = ty = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            tx += 1
        elif dy == 0:
            ty += 1
        elif dx == dy:
            conc += 1
        else:
            disc += 1
    return (conc - disc) / np.sqrt((conc + disc + tx) * (conc + disc + ty))


def test_tau_row_is_kendall_tau_b_with_ties(fid):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 6, 25).astype(float)  # many ties, like accuracies on a small val set
    y = x + rng.normal(0, 2, 25)
    row = fid.tau_row("t", x, y, np.random.default_rng(0))
    assert row["tau"] == pytest.approx(_tau_b(x, y), abs=1e-12)
    assert row["ci_low"] < row["tau"] < row["ci_high"] and row["cells"] == 25


def test_tiny_study_writes_results_and_reuses_runs(fid, tmp_path, monkeypatch, nb201_table):
    from genlab.nas.spaces.nb201.table import NB201Table

    monkeypatch.setitem(fid.PROXIES, "tiny", {"dataset": "digits", "size": 8, "channels": 2,
                                              "cells": 1, "epochs": 1})
    monkeypatch.setattr(fid, "BOOTSTRAP", 50)
    cells = fid.draw_cells()[:4]
    table = NB201Table.load(nb201_table)
    assert fid.study(tmp_path, "tiny", table, shard="0/2", cells=cells) is None
    result = fid.study(tmp_path, "tiny", table, cells=cells)
    on_disk = json.loads((tmp_path / "tiny" / "fidelity.json").read_text())
    assert [r["index"] for r in on_disk["records"]] == [i for i, _ in cells]
    assert on_disk["records"][0]["nb201_cifar10"] == table.lookup(cells[0][1])["cifar10"]
    assert {t["ranking"] for t in result["taus"]} >= {"noise ceiling: retrain seed 0 vs seed 1"}
    assert (tmp_path / "tiny" / "fidelity.png").stat().st_size > 1000
    again = fid.study(tmp_path, "tiny", table, cells=cells)  # every run reused, same figures
    assert again["taus"] == result["taus"]
    best = fid.compare(tmp_path, ["tiny"])
    assert best["best"] == "tiny" and (tmp_path / "proxies.md").exists()
