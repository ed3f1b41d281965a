"""`genlab nas fidelity` and `genlab nas score`: the draw, resuming from cells.csv alone, the
report's taus against a brute-force count, bad input in one line (tiny budgets, the synthetic
NB201 table)."""

import csv
import itertools
import shutil

import numpy as np
import pytest
from nas_reference import run_cli
from nb201_world import nb201_synthetic_accuracy

import genlab.nas.retrain as retrain_mod
from genlab.nas.fidelity.draw import FEW_PFREE, draw_cells, output_connected
from genlab.nas.fidelity.report import tau
from genlab.nas.fidelity.train import FidelityConfig, interleaved, planned
from genlab.nas.spaces.nb201.genotype import Genotype

CELLS = ["|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|"
         "nor_conv_1x1~2|",
         "|avg_pool_3x3~0|+|skip_connect~0|avg_pool_3x3~1|+|skip_connect~0|none~1|"
         "avg_pool_3x3~2|",
         "|nor_conv_1x1~0|+|none~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_1x1~1|"
         "skip_connect~2|",
         "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|"]
TINY = ["--dataset", "digits", "-C", "2", "-N", "1", "--epochs", "1", "--batch-size", "128",
        "--no-augment", "--executor", "inline"]


@pytest.fixture
def quiet(monkeypatch):
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)
    monkeypatch.setattr(retrain_mod, "_plot_curves", lambda run: None)


def test_the_draw_is_seeded_disjoint_and_its_second_part_conv_rich():
    cells = draw_cells(30, 10, seed=5)
    assert cells == draw_cells(30, 10, seed=5) and cells != draw_cells(30, 10, seed=6)
    assert len({c.index for c in cells}) == 40
    assert all(c.param_free <= FEW_PFREE for c in cells[30:])
    all_cells = list(Genotype.all())
    assert all(all_cells[c.index].to_string() == c.arch for c in cells)
    # the uniform part is numpy's choice over the indices, as the doc states
    first = np.random.default_rng(5).choice(5 ** 6, 30, replace=False)
    assert [c.index for c in cells[:30]] == [int(i) for i in first]


def test_interleaving_keeps_the_parts_in_proportion():
    cells = draw_cells(9, 3, seed=0)
    order = interleaved(cells)
    assert sorted(c.index for c in order) == sorted(c.index for c in cells)
    assert [c.group for c in order[:4]] == ["uniform"] * 3 + ["few-pfree"]
    jobs = planned(FidelityConfig(uniform=9, few=3, repeat=2))
    assert len(jobs) == 2 * 2 + 10 and jobs[0][1] == 0 and jobs[1][1] == 1


def test_output_connected_by_brute_force():
    for ops in itertools.islice(itertools.product(["none", "skip_connect"], repeat=6), 64):
        arch = "|{}~0|+|{}~0|{}~1|+|{}~0|{}~1|{}~2|".format(*ops)
        assert output_connected(arch) == (nb201_synthetic_accuracy(ops)[0] != 10.0)


def test_tau_b_against_a_brute_force_pair_count():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 4, 12), rng.integers(0, 5, 12)  # with ties
    pairs = list(itertools.combinations(range(12), 2))
    conc = sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs)
    tx = sum(x[i] != x[j] for i, j in pairs)
    ty = sum(y[i] != y[j] for i, j in pairs)
    assert tau(x, y) == pytest.approx(conc / np.sqrt(tx * ty))


def test_fidelity_runs_reports_and_resumes_from_cells_csv_alone(tmp_path, capsys, quiet,
                                                               nb201_table):
    out = tmp_path / "fid"
    argv = ["nas", "fidelity", "--arch", ",".join(CELLS), *TINY, "--out", out,
            "--nb201-table", nb201_table]
    code, stdout, err = run_cli(argv, capsys)
    assert code == 0, err
    rows = list(csv.DictReader((out / "cells.csv").open()))
    assert len(rows) == 8 and {(r["arch"], r["seed"]) for r in rows} == {
        (a, s) for a in CELLS for s in ("0", "1")}
    assert "noise ceiling: seed 0 vs seed 1" in stdout and (out / "fidelity.png").is_file()
    # a new folder holding only the run's config.json and cells.csv: nothing is retrained
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("config.json", "cells.csv"):
        shutil.copy(out / name, copy / name)
    before = (copy / "cells.csv").read_text()
    code, stdout, err = run_cli([*argv[:-4], "--out", copy, "--resume", "--nb201-table",
                                 nb201_table], capsys)
    assert code == 0, err
    assert (copy / "cells.csv").read_text() == before
    assert not (copy / "trainings").exists()
    assert "8 of 8 trainings" in stdout
    # or a new folder that begins from the committed file, which is left as it is
    fresh = tmp_path / "fresh"
    code, again, err = run_cli([*argv[:-4], "--config", out / "config.json", "--cells-from",
                                copy / "cells.csv", "--no-train", "--out", fresh,
                                "--nb201-table", nb201_table], capsys)
    assert code == 0, err
    assert (fresh / "cells.csv").read_text() == before == (copy / "cells.csv").read_text()
    assert not (fresh / "trainings").exists() and "8 of 8 trainings" in again
    assert again.split("trainings in")[0] == stdout.split("trainings in")[0]


def test_a_users_image_folder_is_a_proxy_like_any_other(tmp_path, capsys, quiet, nb201_table):
    # the instrument a user checks their own stand-in with: --dataset folder:PATH
    from image_folders import write_folder

    folder = write_folder(tmp_path / "mine")
    out = tmp_path / "fid"
    argv = ["nas", "fidelity", "--arch", ",".join(CELLS), "--dataset", f"folder:{folder}",
            "--size", "8", "-C", "2", "-N", "1", "--epochs", "1", "--batch-size", "4",
            "--seeds", "0", "--executor", "inline", "--out", out, "--nb201-table", nb201_table]
    code, stdout, err = run_cli(argv, capsys)
    assert code == 0, err
    rows = list(csv.DictReader((out / "cells.csv").open()))
    assert [r["arch"] for r in rows] == CELLS and {r["seed"] for r in rows} == {"0"}
    assert all(0 <= float(r["val_acc"]) <= 100 for r in rows)
    assert "4 of 4 trainings" in stdout and "sanity: parameter count" in stdout
    # and the zero-cost proxies that read a batch, on the same images
    code, stdout, err = run_cli(["nas", "score", "--arch", ",".join(CELLS), "--proxy",
                                 "nwot,snip", "--dataset", f"folder:{folder}", "--size", "8",
                                 "-C", "2", "-N", "1", "--out", tmp_path / "score"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "score" / "scores.csv").open()))
    assert [r["arch"] for r in rows] == CELLS and all(r["snip"] for r in rows)


def test_a_kill_between_trainings_loses_no_finished_row(tmp_path, capsys, quiet):
    out = tmp_path / "fid"
    argv = ["nas", "fidelity", "--arch", ",".join(CELLS[:2]), *TINY, "--out", out]
    assert run_cli(argv, capsys)[0] == 0
    text = (out / "cells.csv").read_text().splitlines(keepends=True)
    (out / "cells.csv").write_text("".join(text[:2]) + text[2][:10])  # a row cut by a kill
    shutil.rmtree(out / "trainings")
    code, stdout, err = run_cli([*argv, "--resume"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader((out / "cells.csv").open()))
    assert len(rows) == 4 and rows[0]["val_acc"] == text[1].split(",")[5]


def test_score_writes_rows_resumes_and_ranks(tmp_path, capsys, quiet, nb201_table):
    out = tmp_path / "score"
    argv = ["nas", "score", "--arch", ",".join(CELLS), "--proxy", "params,synflow",
            "--dataset", "digits", "--size", "8", "-C", "2", "-N", "1", "--out", out,
            "--nb201-table", nb201_table]
    code, stdout, err = run_cli(argv, capsys)
    assert code == 0, err
    rows = list(csv.DictReader((out / "scores.csv").open()))
    assert [r["arch"] for r in rows] == CELLS
    assert float(rows[3]["params"]) < float(rows[0]["params"])  # all-none has no cell convs
    lines = (out / "scores.csv").read_text().splitlines(keepends=True)
    (out / "scores.csv").write_text("".join(lines[:3]))  # two cells scored before a kill
    code, stdout, err = run_cli([*argv, "--resume"], capsys)
    assert code == 0, err
    again = (out / "scores.csv").read_text().splitlines()
    assert [r.rsplit(",", 1)[0] for r in again] == [r.rsplit(",", 1)[0] for r in lines]
    assert "| params |" in stdout
    # a new folder begun from the file scores nothing again: its rows are the file's
    code, copied, err = run_cli([*argv[:-4], "--scores-from", out / "scores.csv", "--out",
                                 tmp_path / "copy", "--nb201-table", nb201_table], capsys)
    assert code == 0, err
    assert (tmp_path / "copy" / "scores.csv").read_text().splitlines() == again
    seconds = sum(float(r["seconds"]) for r in csv.DictReader((out / "scores.csv").open()))
    assert f"4 cells scored ({seconds / 3600:.2f} CPU-hours)" in copied
    assert copied.split("cells scored")[0] == stdout.split("cells scored")[0]


@pytest.mark.parametrize(("argv", "word"), [
    (["score", "--proxy", "grasp", "--arch", CELLS[0]], "grasp"),
    (["score", "--arch", "|conv~0|"], "conv"),
    (["fidelity", "--arch", CELLS[0], "--seeds", ""], "--seeds"),
    (["fidelity", "--arch", CELLS[0], "--dataset", "mnist"], "--dataset"),
    (["fidelity", "--few", "10000"], "--few"),
], ids=["unknown-proxy", "bad-cell", "no-seeds", "unknown-dataset", "too-many-few"])
def test_bad_input_is_one_line_and_leaves_nothing(argv, word, tmp_path, capsys, quiet):
    out = tmp_path / "run"
    code, _, err = run_cli(["nas", *argv, "--out", out], capsys)
    assert code == 2, err
    assert len(err.splitlines()) == 1 and word in err, err
    assert not out.exists()


def test_an_infinite_score_ranks_at_its_end():
    from genlab.nas.fidelity.report import ordinal, tau_row

    # NWOT's -inf (a singular kernel) is the lowest rank; the order of the rest is kept
    x = [float("-inf"), 2.0, float("-inf"), 5.0, 3.0, float("inf")]
    y = [0.0, 2.0, 0.5, 5.0, 3.0, 9.0]
    assert list(ordinal(x)) == [1.0, 2.0, 1.0, 5.0, 3.0, 6.0]
    assert tau(x, y) == pytest.approx(tau(ordinal(x), y))
    assert tau_row("nwot", x, y)["tau"] == pytest.approx(tau([1, 2, 1, 5, 3, 6], y))
