"""`genlab nas train --from RUN` (issue 48): a search run's genotype and space in one step;
each wrong use is one line, exit 2, and no --out folder."""

import json

import pytest
from nas_reference import NB201_CELL, run_cli

import genlab.nas.search as search_mod
from genlab.nas.search import SearchConfig, run_search

TINY = dict(channels=2, steps=2, batch_size=8, hessian_points=0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    plots = search_mod._plots
    search_mod._plots = lambda run, history, space: None
    try:
        run_search(SearchConfig(**TINY), root / "search")
        run_search(SearchConfig(**TINY), root / "unfinished", stop_at=1)
    finally:
        search_mod._plots = plots
    return root


def test_from_takes_the_runs_genotype_and_space(runs, capsys):
    code, printed, err = run_cli(["nas", "train", "--from", runs / "search", "--print-config"],
                                 capsys)
    assert code == 0, err
    summary = json.loads((runs / "search" / "summary.json").read_text())
    config = json.loads(printed)
    assert (config["arch"], config["space"]) == (summary["genotype"], summary["space"])


@pytest.mark.parametrize(("argv", "line"), [
    (["--from", "RUNS/search", "--space", "darts"],
     "--from RUNS/search: the run searched the nb201 space, not darts; leave --space out or "
     "pass --space nb201"),
    ([NB201_CELL, "--from", "RUNS/search"], "give ARCH or --from RUN, not both"),
    ([], "missing ARCH: give a genotype, or --from RUN (a nas search run folder)"),
    (["--from", "RUNS/unfinished"],
     "--from RUNS/unfinished: the search has not finished (no summary.json); finish it with: "
     "genlab nas search --out RUNS/unfinished --resume"),
    (["--from", "RUNS"], "--from RUNS: no genlab run there (no config.json); give the --out "
                         "folder of a nas search"),
])
def test_each_wrong_use_is_one_line_and_no_folder(argv, line, runs, tmp_path, capsys):
    out = tmp_path / "train"
    argv = [a.replace("RUNS", str(runs)) for a in argv]
    code, _, err = run_cli(["nas", "train", *argv, "--epochs", "1", "--out", out], capsys)
    assert (code, err.splitlines()) == (2, ["genlab: bad option: " + line.replace("RUNS",
                                                                                  str(runs))])
    assert not out.exists()


def test_from_a_training_run_names_its_kind(runs, tmp_path, capsys):
    first = tmp_path / "first"
    code, _, err = run_cli(["nas", "train", "--from", runs / "search", "--epochs", "1",
                            "-C", "2", "--batch-size", "128", "--out", first], capsys)
    assert code == 0, err
    out = tmp_path / "second"
    code, _, err = run_cli(["nas", "train", "--from", first, "--out", out], capsys)
    assert (code, err.splitlines()) == (2, [f"genlab: bad option: --from {first}: a nas train "
                                            "run, not a nas search run; give the --out folder "
                                            "of a nas search"])
    assert not out.exists()
