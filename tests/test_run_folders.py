"""Run folders refuse what is not theirs (issue 48), across the apps: another command's run
is named ("RUN is a nas search run; optim train needs its own --out"), a folder of other
files or an unrelated config.json is refused, each in one line with exit code 2, with no
advice to --resume, and the folder is left as it was."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "nas"))

from nas_reference import run_cli  # noqa: E402

import genlab.nas.search as search_mod  # noqa: E402
from genlab.nas.search import SearchConfig, run_search  # noqa: E402


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "search"
    plots, search_mod._plots = search_mod._plots, lambda run, history, space: None
    try:
        run_search(SearchConfig(channels=2, steps=1, batch_size=8, hessian_points=0), out)
    finally:
        search_mod._plots = plots
    assert json.loads((out / "config.json").read_text())["command"] == "nas search"
    return out


def _files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.parametrize("argv", [
    ["optim", "train", "--epochs", "1", "--resume"],
    ["optim", "train", "--epochs", "1"],
    ["gaze", "train", "--resume"],
    ["gaze", "train"],
])
def test_another_commands_run_is_named(argv, search, capsys):
    before = _files(search)
    code, _, err = run_cli([*argv, "--out", search], capsys)
    command = " ".join(argv[:2])
    assert (code, err.splitlines()) == (2, [f"genlab: run exists: {search} is a nas search "
                                            f"run; {command} needs its own --out"])
    assert _files(search) == before


@pytest.mark.parametrize("resume", [[], ["--resume"]])
def test_an_unrelated_config_json_is_not_a_run(resume, tmp_path, capsys):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "config.json").write_text('{"learning_rate": 3}')
    before = _files(folder)
    code, _, err = run_cli(["optim", "train", "--epochs", "1", "--out", folder, *resume],
                           capsys)
    assert (code, err.splitlines()) == (2, [
        f"genlab: bad option: {folder} is not a genlab run folder (its config.json was not "
        "written by genlab: no genlab_version); --out must be a new or empty folder, or a "
        "run of optim train"])
    assert _files(folder) == before
