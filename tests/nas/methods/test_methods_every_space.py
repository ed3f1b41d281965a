"""Every registered method searches in nb201, darts and s3 through the CLI, at a tiny size,
and records itself in summary.json; the selection rule composes with any of them."""

import json

import pytest
from nas_reference import run_cli

from genlab.nas import diagnostics as diag
from genlab.nas import search as search_mod
from genlab.nas.methods import method_names, part_names
from genlab.nas.methods import pt as pt_mod

TINY = ["--steps", "3", "--channels", "4", "--size", "8", "--hessian-points", "0",
        "--batch-size", "16"]
CELLS = {"nb201": ["--cells", "1"], "darts": ["--cells", "2"], "s3": ["--cells", "2"]}


@pytest.fixture(autouse=True)
def _fast(monkeypatch):
    """No plots, and a stand-in for the Hessian eigenvalue that DARTS-ES reads every epoch
    (the real one is tested in test_diagnostics, its use by the rule in test_methods_loop)."""
    monkeypatch.setattr(search_mod, "_plots", lambda run, history, space: None)
    monkeypatch.setattr(diag, "hessian_eigenvalue", lambda net, x, y: 1.0)
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)


@pytest.mark.parametrize("space", sorted(CELLS))
@pytest.mark.parametrize("method", method_names())
def test_method_searches_in_space(tmp_path, capsys, method, space):
    out = tmp_path / "r"
    code, stdout, stderr = run_cli(["nas", "search", "--space", space, "--method", method,
                                    "--out", out, *TINY, *CELLS[space]], capsys)
    assert code == 0, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == method and summary["select"] == "argmax"
    assert f"method          {method}" in stdout


@pytest.mark.parametrize("method", method_names())
def test_pt_selection_composes_with_every_method(tmp_path, capsys, monkeypatch, method):
    assert "pt" in part_names()["select"]
    # one val batch, no fine-tuning: the rule's own figures are tested in test_methods_pt
    monkeypatch.setattr(pt_mod.PTSelection, "val_batches", 1)
    monkeypatch.setattr(pt_mod.PTSelection, "tune_epochs", 0)
    out = tmp_path / "r"
    code, _, stderr = run_cli(["nas", "search", "--space", "nb201", "--method", method,
                               "--select", "pt", "--out", out, *TINY, *CELLS["nb201"]], capsys)
    assert code == 0, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["method"], summary["select"]) == (method, "pt")
    decisions = [json.loads(line) for line in (out / "selection.jsonl").read_text().splitlines()]
    assert len(decisions) == 6  # one per NB201 edge


def _penalty_names():
    from genlab.nas.regularizers import PENALTIES

    return PENALTIES.names()


@pytest.mark.parametrize("reg", _penalty_names())
def test_every_registered_penalty_runs_a_two_step_search(tmp_path, capsys, reg):
    """Each penalty of the registry (a new one included, with no list to edit) searches
    through the CLI and is recorded as the run's regulariser."""
    out = tmp_path / "r"
    code, _, stderr = run_cli(["nas", "search", "--space", "nb201", "--reg", reg, "--out", out,
                               *TINY, *CELLS["nb201"], "--steps", "2"], capsys)
    assert code == 0, stderr
    summary = json.loads((out / "summary.json").read_text())
    config = json.loads((out / "config.json").read_text())
    assert config["reg"] == reg and summary["steps"] == 2
