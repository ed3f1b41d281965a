"""Options declared once: the field declarations, their spellings, config files, and the
commands generated from them (genlab.core.options, genlab.cli.commands)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest
import typer

from genlab.cli import _register, app, main
from genlab.cli.commands import COMMAND_OPTIONS, RUN_OPTIONS, config_command
from genlab.core.errors import ConfigError
from genlab.core.options import (
    check_options,
    config_values,
    option,
    option_fields,
    option_like,
    parse_seeds,
    read_config_file,
)


@dataclass
class Toy:
    """A config of every kind of field."""

    name: str = option("a", help="A name.", choices=("a", "b"))
    count: int = option(3, help="A count.", gt=0, le=10)
    rate: float | None = option(None, help="A rate.", ge=0)
    flag: bool = option(True, help="A flag.")
    seeds: list[int] = option(factory=lambda: [0, 1], help="Seeds.", parse="seeds")
    words: list[str] = option(factory=list, help="Words.", parse="list")
    params: dict = option(factory=dict, help="Parameters.", parse="params")


def _toy_app(seen: list) -> typer.Typer:
    toy_app = typer.Typer()

    def run(cfg, out, resume):
        seen.append((cfg, out, resume))

    config_command(toy_app, "toy", Toy, run)
    config_command(toy_app, "other", Toy, lambda cfg: seen.append(cfg), run_folder=False)
    return toy_app


def _invoke(toy_app, args):
    command = typer.main.get_command(toy_app)
    return command.main(args=args, standalone_mode=False)


def test_check_options_against_hand_written_rules():
    check_options(Toy())
    for bad, message in [(dict(name="c"), "unknown name 'c'"), (dict(count=0), "count must be > 0"),
                         (dict(count=11), "count must be <= 10"), (dict(rate=-1.0), "rate must"),
                         (dict(count=2.5), "count must be int"), (dict(flag="yes"), "flag must")]:
        with pytest.raises(ConfigError, match=message):
            check_options(Toy(**bad))


def test_option_like_takes_the_declaration_of_another_config():
    @dataclass
    class Flat:
        count: int | None = option_like(Toy, "count", default=None)
        words: list[str] = option_like(Toy, "words", help="Other words.")

    (_, count), (_, words) = option_fields(Flat)
    assert (count.help, count.gt, count.le) == ("A count.", 0, 10) and Flat().count is None
    assert (words.help, words.parse) == ("Other words.", "list")
    assert Flat().words == [] and Flat().words is not Flat().words  # the same factory
    with pytest.raises(ConfigError, match="count must be <= 10"):
        check_options(Flat(count=11))


def test_seeds_spelling_brute_force():
    assert parse_seeds("0-2,7") == [0, 1, 2, 7]
    assert parse_seeds("4") == [4]
    for bad in ("2-0", "1,1", "x", ""):
        with pytest.raises(ConfigError):
            parse_seeds(bad)


def test_generated_command_parses_every_spelling(tmp_path):
    seen: list = []
    _invoke(_toy_app(seen), ["toy", "--name", "b", "--count", "4", "--seeds", "3-5",
                             "--words", "x,y", "--params", "k=2", "--params", "z=text",
                             "--no-flag", "--out", str(tmp_path / "r")])
    cfg, out, resume = seen[-1]
    assert (cfg.name, cfg.count, cfg.rate, cfg.flag) == ("b", 4, None, False)
    assert cfg.seeds == [3, 4, 5] and cfg.words == ["x", "y"]
    assert cfg.params == {"k": 2, "z": "text"}
    assert str(out) == str(tmp_path / "r") and resume is False


def test_config_file_then_flags_override(tmp_path):
    seen: list = []
    toy_app = _toy_app(seen)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "b", "count": 7, "seeds": "1-2"}))
    _invoke(toy_app, ["other", "--config", str(path), "--count", "5"])
    cfg = seen[-1]
    assert (cfg.name, cfg.count, cfg.seeds) == ("b", 5, [1, 2])  # the flag wins, file fills
    yaml_path = tmp_path / "c.yaml"
    yaml_path.write_text("name: b\nwords: [p, q]\n")
    assert read_config_file(yaml_path) == {"name": "b", "words": ["p", "q"]}
    with pytest.raises(ConfigError, match="unknown option"):
        config_values(Toy, {"nmae": "b"})
    # a run's config.json records more than options: those keys are skipped
    assert config_values(Toy, {"name": "b", "genlab_version": "0", "reg_resolved": {}}) == \
        {"name": "b"}


def test_print_config_runs_nothing(capsys):
    seen: list = []
    _invoke(_toy_app(seen), ["toy", "--count", "2", "--print-config"])
    assert seen == []
    printed = json.loads(capsys.readouterr().out)
    assert printed["count"] == 2 and printed["seeds"] == [0, 1]



def test_every_command_has_exactly_its_configs_options():
    """For every command under ``genlab``: its options are its config's fields plus the
    options every command has; a command without a config is a defect."""
    from genlab.cli.commands import all_commands

    _register()
    without = []
    checked = 0
    for path, command in all_commands(typer.main.get_command(app)):
        if hasattr(command, "list_commands"):
            continue
        cls = getattr(getattr(command, "callback", None), "config_class", None)
        if cls is None and not [p for p in command.params if p.name != "help"]:
            continue  # a command without options (genlab nas spaces)
        if cls is None:  # options declared by hand: none is left
            without.append(" ".join(path))
            continue
        fields = {f.name for f, s in option_fields(cls) if s.cli}
        names = {p.name for p in command.params}
        extra = set(COMMAND_OPTIONS) | (names & set(RUN_OPTIONS))
        assert names == fields | extra, " ".join(path)
        if "resume" in names:
            assert "out" in names
        checked += 1
    assert checked >= 23 and without == []  # 23 commands today


def test_search_config_json_repeats_the_run(tmp_path):
    first, again = tmp_path / "first", tmp_path / "again"
    args = ["nas", "search", "--steps", "3", "--hessian-points", "0"]
    with pytest.raises(SystemExit) as done:
        main([*args, "--out", str(first)])
    assert done.value.code == 0
    with pytest.raises(SystemExit) as done:
        main(["nas", "search", "--config", str(first / "config.json"), "--out", str(again)])
    assert done.value.code == 0
    a, b = (json.loads((p / "summary.json").read_text()) for p in (first, again))
    assert a["genotype"] == b["genotype"]
    assert a["mean_entropy"] == b["mean_entropy"]


def test_bad_value_is_one_line_and_no_folder(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        main(["nas", "search", "--steps", "0", "--out", str(tmp_path / "x")])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("genlab: bad option: --steps must be > 0, got 0; see ")
    assert not (tmp_path / "x").exists()


def test_the_cli_starts_without_torch():
    code = ("import sys, typer, genlab.cli; genlab.cli._register(); "
            "typer.main.get_command(genlab.cli.app); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_resume_reads_a_sweeps_root_to_its_own_runner(tmp_path):
    # a gaze bench's or audit's folder is a sweep's root (bench_config.json, runs/): --resume
    # leaves it to the command's runner instead of refusing it as "not a genlab run folder"
    from types import SimpleNamespace

    from genlab.cli.commands import run_config_file

    ctx = SimpleNamespace(info_name="bench", parent=SimpleNamespace(
        info_name="gaze", parent=SimpleNamespace(info_name="genlab", parent=None)))
    root = tmp_path / "bench"
    (root / "runs" / "a").mkdir(parents=True)
    (root / "bench_config.json").write_text("{}")
    (root / "data").mkdir()
    assert run_config_file(ctx, {"out": str(root), "resume": True, "config": None}) is None
    # a folder with a config.json genlab did not write is still refused
    (root / "config.json").write_text("{}")
    with pytest.raises(Exception, match="not a genlab run folder"):
        run_config_file(ctx, {"out": str(root), "resume": True, "config": None})
