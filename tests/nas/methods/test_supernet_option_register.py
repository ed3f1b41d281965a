"""A supernet option is one declaration plus its use: an option declared outside genlab's
modules (alpha frozen after a fraction of the steps) is listed by `nas search --help`, taken
by ``--supernet-param``, checked in one line, recorded in config.json and used by the search.
Old search folders (the five SearchConfig fields it replaced) are read as this version's."""

from __future__ import annotations

import json

import pytest
from nas_reference import run_cli

from genlab.core.errors import ConfigError
from genlab.core.runs import config_differences
from genlab.nas.methods import (
    SUPERNET_OPTIONS,
    SupernetOption,
    build_parts,
    get_method,
    register_supernet_option,
)
from genlab.nas.search import SearchConfig, upgrade_search_options


@pytest.fixture()
def toy_freeze():
    option = register_supernet_option(SupernetOption(
        "toy_freeze", 1.0, "fraction of the steps after which alpha stops moving (a toy)",
        kind=float, ge=0, builds=None, arch_active=lambda value, step, total:
        step < value * total, capturable=True))
    yield option
    SUPERNET_OPTIONS.unregister("toy_freeze")


def test_its_use_is_combined_with_the_warm_up(toy_freeze):
    parts = build_parts(get_method("darts"), supernet={"toy_freeze": 0.5, "arch_start": 0.2})
    # by hand, 10 steps: alpha moves from step 2 (0.2 x 10) and stops at step 5 (0.5 x 10)
    assert [parts.arch_active(s, 10) for s in range(10)] == [s in (2, 3, 4) for s in range(10)]
    assert parts.supernet_options == {}  # it is no keyword of the space's builder
    pc = build_parts(get_method("pc-darts"))
    assert pc.supernet_params["toy_freeze"] == 1.0  # a method that does not set it: default


def test_it_is_checked_in_one_line(toy_freeze):
    with pytest.raises(ConfigError, match=r"^--supernet-param toy_freeze: expected a number "
                                          r">= 0, got -1$"):
        SearchConfig(supernet_params={"toy_freeze": -1}).validate()
    with pytest.raises(ConfigError, match=r"no supernet option toy_frieze; .*toy_freeze \(1.0\)"):
        SearchConfig(supernet_params={"toy_frieze": 0.5}).validate()


def test_the_search_command_lists_takes_and_uses_it(toy_freeze, tmp_path, capsys):
    code, out, _ = run_cli(["nas", "search", "--help"], capsys)
    assert code == 0 and "toy_freeze" in "".join(out.split())
    alphas = []
    for lr in (0.03, 3.0):  # alpha frozen from the start: its learning rate cannot matter
        out = tmp_path / f"lr{lr}"
        code, _, err = run_cli(["nas", "search", "--steps", 2, "--supernet-param",
                                "toy_freeze=0", "--arch-lr", lr, "--hessian-points", 0,
                                "--out", out], capsys)
        assert code == 0, err
        assert json.loads((out / "config.json").read_text())["supernet_params"] == \
            {"toy_freeze": 0}
        alphas.append(json.loads((out / "summary.json").read_text())["alpha"])
    assert alphas[0] == alphas[1]
    code, _, _ = run_cli(["nas", "search", "--steps", 2, "--arch-lr", 3.0, "--hessian-points",
                          0, "--out", tmp_path / "moving"], capsys)
    assert json.loads((tmp_path / "moving" / "summary.json").read_text())["alpha"] != alphas[0]


def test_an_older_search_config_is_read_as_this_versions():
    old = {**{k: v for k, v in vars(SearchConfig()).items() if k != "supernet_params"},
           "partial_channels": 8, "edge_norm": None, "aux_skip": None, "drop_path": 0.2,
           "arch_start": None, "genlab_version": "0.9"}
    new = upgrade_search_options(old)
    assert new["supernet_params"] == {"partial_channels": 8, "drop_path": 0.2}
    assert not {"partial_channels", "drop_path", "arch_start"} & set(new)
    same = vars(SearchConfig(supernet_params={"partial_channels": 8, "drop_path": 0.2}))
    assert config_differences(old, same) == []  # a resume of the old folder goes on
    assert config_differences(old, vars(SearchConfig())) == [
        "supernet_params.drop_path", "supernet_params.partial_channels"]
    nested = {"search": old, "seeds": [0]}  # a bench's template, compared option by option
    assert config_differences(nested, {"search": same, "seeds": [0]}) == []
    retrain = {"arch": "x", "space": "darts", "drop_path": 0.2}  # not a search: unchanged
    assert upgrade_search_options(retrain) is retrain
