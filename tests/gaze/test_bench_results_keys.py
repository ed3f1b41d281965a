"""`genlab gaze bench`'s results file (results.json) in the layout that docs/results cites: for
each recovered file (gaze_bench.json: the realistic and appearance worlds; gaze_bench_anatomy
.json: the anatomy world), the keys the command writes for its worlds, on made-up tables,
cover every key that pages.json cites from that file, and every citing region renders."""

from __future__ import annotations

import json

import pytest
from results_regions import RESULTS, render_citing

from genlab.core.results.files import SPEC_FILE, load_result
from genlab.gaze.studies import bench
from genlab.gaze.studies.sizing import pilot_dicts
from genlab.gaze.studies.tables import bench_tables

#: a recovered file -> the worlds of the bench that replaces it
FILES = {"gaze_bench": ["realistic", "appearance", "control"],
         "gaze_bench_anatomy": ["anatomy", "control"]}


def cited_keys(node, name: str, out: set) -> set:
    """Every figure key that a part citing results file ``name`` reads (gates included)."""
    if isinstance(node, dict):
        if node.get("file") == name:
            out.update([node["key"]] if "key" in node else [])
            out.update(node.get("keys", []))
        for v in node.values():
            cited_keys(v, name, out)
    elif isinstance(node, list):
        for v in node:
            cited_keys(v, name, out)
    return out


def _summary(err: float, targets) -> dict:
    per = {s: [err + 0.5 * k, 10] for k, s in enumerate(("1", "2", "3"))}
    res = {"per_subject": per, "per_cluster": {"0": [err, 10]},
           "router": {"mean_max_weight": 0.5, "top1_share": [0.5, 0.5]},
           "constant": {"per_subject": {s: [20.0, 10] for s in per}}}
    return {"val": res, "targets": {t: res for t in targets}, "train_cpu_seconds": 1.0}


def made_up_results(specs) -> dict:
    """Baseline 10, MoEGaze 9.5, oracle 9, trained on target 6 (plus the seed, and 1 for the
    10 % runs), seed-dependent enough that every paired t has a spread."""
    err = {"baseline": 10.0, "moegaze": 9.5, "oracle": 9.0, "reference": 6.0}
    out = {}
    for s in specs:
        kind, seed = s.name.split("__")[2], s.config.seed
        e = (err[kind] + seed + (1.0 if s.config.fraction < 1 else 0.0)
             + (0.1 * seed * seed if kind != "baseline" else 0.0))
        out[s.name] = _summary(e, s.config.targets)
    return out


@pytest.mark.parametrize("name", sorted(FILES))
def test_written_keys_cover_every_key_the_pages_cite(name, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "current_commit", lambda where=None: "0123abc")
    cfg = bench.BenchConfig(worlds=FILES[name], seeds=3, reference_seeds=1, n_boot=50)
    specs = bench.bench_specs(cfg, tmp_path)
    tables = bench_tables(specs, made_up_results(specs), cfg)
    (tmp_path / "out").mkdir()
    written = bench.write_bench_results(cfg, tmp_path / "out", tables,
                                        pilot_dicts(tables.pop("pilot")), None)
    figures = set(load_result(written).figures)
    cited = cited_keys(json.loads((RESULTS / SPEC_FILE).read_text())["regions"], name, set())
    assert cited, f"pages.json cites no figure of {name}"
    assert cited <= figures, f"{name}: cited but not written: {sorted(cited - figures)}"
    prefixes = {bench.WORLD_KEYS[w] for w in FILES[name]}
    assert {k.split("_")[0] for k in cited} <= prefixes  # one world prefix per key
    regions = render_citing(written, name, tmp_path)
    assert all(regions.values())
