"""`genlab nas bench`'s results file (results.json): it loads, and every region of the pages
that cites the recovered file it replaces (docs/results/court_*.json, ber_nb201.json) renders
from it with the run's per-seed figures."""

from __future__ import annotations

import json

import pytest
from results_regions import RESULTS, render_citing

from genlab.core.results import files as results_files
from genlab.nas.bench.config import BenchCommandConfig
from genlab.nas.bench.results import write_bench_results
from genlab.nas.bench.run import bench_command
from genlab.nas.spaces import get_space

#: a recovered file -> the space its bench searched
FILES = {"court_nb201": "nb201", "ber_nb201": "nb201", "court_s1": "s1", "court_s2": "s2",
         "court_s3": "s3", "court_darts": "darts", "court_darts_o2": "darts",
         "court_mobilenet": "mobilenet"}
#: a recovered file's metric -> the bench record's key
KEYS = {"C10": "cifar10", "p-free": "param_free_ops", "skip": "skip_ops",
        "entropy": "mean_entropy", "zero": "param_free_ops", "params": "params_m",
        "macs": "macs_m"}


def made_up_records(name: str) -> list[dict]:
    """A bench's records with the recovered file's rows, metrics and seeds (a row recorded
    as mean ± std gets seeds 0-2 at its mean); accuracies and sizes moved by +0.01, so
    that the rendered figures are the run's and not the recovered file's."""
    data = json.loads((RESULTS / f"{name}.json").read_text())
    records: dict[tuple, dict] = {}
    for metric, rows in data.get("values", {}).items():
        for row, seeds in rows.items():
            for seed, v in seeds.items():
                rec = records.setdefault((row, seed), {"reg": row, "seed": int(seed)})
                rec[KEYS[metric]] = v if isinstance(v, int) else v + 0.01
    for metric, rows in data.get("summaries", {}).items():
        for row, (mean, _, _) in rows.items():
            for seed in ("0", "1", "2"):
                rec = records.setdefault((row, seed), {"reg": row, "seed": int(seed)})
                rec[KEYS[metric]] = mean + 0.01 * (int(seed) - 1)
    return list(records.values())


@pytest.mark.parametrize("name", sorted(FILES))
def test_bench_results_replace_recovered_file(name, tmp_path):
    space = get_space(FILES[name])
    records = made_up_records(name)
    written = write_bench_results({"records": records, "steps": 300}, space,
                                  "genlab nas bench --out runs/x", tmp_path / "run")
    assert written == tmp_path / "run" / "results.json"
    rendered = render_citing(written, name, tmp_path)
    values = next(text for r, text in rendered.items() if r.startswith(("court-", "ber-")))
    assert "`genlab nas bench --out runs/x` at commit" in values
    assert "recovered" not in values
    # the per-seed figures of the run: one float value of each row and seed, as rendered
    shown = [r for r in records if isinstance(r.get("cifar10", r.get("params_m")), float)]
    for r in shown:
        v = r.get("cifar10", r.get("params_m"))
        assert f"{v:.2f}" in values, (r, values)
    # the bench's counts: every row's per-seed counts of the first count the region shows
    seeds_line = values.split("Seeds, in the order listed: ")[1]
    metric = next(m for m in ("skip", "p-free", "zero") if f"{m} 0" in seeds_line)
    key = KEYS[metric]
    for row in {r["reg"] for r in records if key in r}:
        seeds = sorted((r for r in records if r["reg"] == row and key in r),
                       key=lambda r: r["seed"])
        assert ", ".join(str(r[key]) for r in seeds) in values


def test_no_results_file_outside_a_git_checkout(tmp_path, monkeypatch):
    monkeypatch.setattr(results_files, "current_commit", lambda where=None: None)
    records = made_up_records("court_s1")
    assert write_bench_results({"records": records}, get_space("s1"), "x",
                               tmp_path) is None
    assert not (tmp_path / "results.json").exists()


def test_bench_command_spells_the_options():
    cfg = BenchCommandConfig(space="s2", methods=["darts+ber", "darts"], seeds=[0, 1, 2, 6],
                             retrain_epochs=0).bench()
    line = bench_command(cfg, "runs/court/s2", "process", 2, None)
    assert line.startswith("genlab nas bench --out runs/court/s2 ")
    for part in ("--space s2", "--methods darts+ber,darts", "--seeds 0-2,6",
                 "--retrain-epochs 0", "--executor process", "--workers 2"):
        assert part in line, line


def test_two_runs_of_one_space_merge_by_seed(tmp_path):
    """court_s2 is two benches (every row at seeds 0-2, two rows again at 6-8): their files,
    merged, hold each row's seeds of both; a seed run twice is refused."""
    from genlab.core.errors import DataError
    from genlab.core.results.files import merge_results

    records = made_up_records("court_s2")
    space = get_space("s2")
    first = write_bench_results({"records": [r for r in records if r["seed"] < 3]}, space,
                                "genlab nas bench --seeds 0-2", tmp_path / "a")
    second = write_bench_results({"records": [r for r in records if r["seed"] >= 6]}, space,
                                 "genlab nas bench --seeds 6-8", tmp_path / "b")
    merged = merge_results([first, second], tmp_path / "court_s2.json", title="S2")
    assert merged.command == "genlab nas bench --seeds 0-2; genlab nas bench --seeds 6-8"
    expected = {str(r["seed"]): r["skip_ops"] for r in records if r["reg"] == "darts+ber"}
    assert merged.seeds("skip", "darts+ber") == expected and len(expected) == 6
    assert "darts+ber" in render_citing(tmp_path / "court_s2.json", "court_s2",
                                        tmp_path)["court-s2"]
    with pytest.raises(DataError, match="repeats seeds of row"):
        merge_results([first, first], tmp_path / "twice.json", title="S2")
