"""A wrapper config takes the options of the config it wraps (genlab.core.options.takes_options):
every option but those it sets itself, declared as the wrapped config declares it, with the
wrapper's own declarations kept; the generated command accepts them."""

from __future__ import annotations

from dataclasses import dataclass, fields

import pytest
import typer
from typer._click.exceptions import UsageError

from genlab.cli.commands import config_command
from genlab.core.errors import ConfigError
from genlab.core.options import Options, check_options, option, option_fields, takes_options


@dataclass
class Inner:
    """The config of a command that another one wraps."""

    size: int = option(3, help="A size.", gt=0, le=10)
    kind: str = option("a", help="A kind.", choices=("a", "b"))
    seed: int = option(0, help="A seed.", ge=0)
    tags: list[str] = option(factory=lambda: ["x"], parse="list", help="Tags.")
    jobs: int = option(0, help="Loader jobs.", ge=0)


@dataclass
@takes_options(Inner, sets=("seed", "jobs"))
class Outer(Options):
    """Runs Inner once per seed, several at a time."""

    seeds: list[int] = option(factory=lambda: [0, 1], parse="seeds", help="Seeds.")
    size: int = option(5, help="A larger size.", gt=0, le=10)  # another default
    jobs: int = option(2, help="Runs at the same time.", gt=0)  # its own, same name

    def runs(self) -> list[Inner]:
        return [Inner(seed=s, **self.wrapping.values(self)) for s in self.seeds]


def test_wrapper_fields_are_its_own_then_the_wrapped_ones_it_takes():
    assert [f.name for f in fields(Outer)] == ["seeds", "size", "jobs", "kind", "tags"]
    assert Outer.wrapping.names == ("size", "kind", "tags") and Outer.wrapping.sets == (
        "seed", "jobs")
    specs = {f.name: s for f, s in option_fields(Outer)}
    assert (specs["kind"].help, specs["kind"].choices) == ("A kind.", ("a", "b"))
    assert specs["size"].help == "A larger size." and specs["jobs"].help == "Runs at the same time."
    outer = Outer()
    assert (outer.size, outer.kind, outer.tags, outer.jobs) == (5, "a", ["x"], 2)
    assert Outer().tags is not outer.tags  # the wrapped field's factory, a list per instance


def test_values_reach_the_wrapped_runs_and_the_wrapped_checks_hold():
    outer = Outer(seeds=[3, 4], size=7, kind="b", tags=["p", "q"])
    runs = outer.runs()
    assert [(r.seed, r.size, r.kind, r.tags, r.jobs) for r in runs] == [
        (3, 7, "b", ["p", "q"], 0), (4, 7, "b", ["p", "q"], 0)]
    runs[0].tags.append("r")
    assert outer.tags == ["p", "q"]  # each run has its own list
    assert Outer.wrapping.values(outer, but=("kind",)) == {"size": 7, "tags": ["p", "q"]}
    with pytest.raises(ConfigError, match="unknown kind 'c'"):
        check_options(Outer(kind="c"))


def test_the_generated_command_takes_the_wrapped_options():
    seen: list = []
    app = typer.Typer()
    config_command(app, "outer", Outer, seen.append, run_folder=False)
    config_command(app, "other", Inner, seen.append, run_folder=False)
    command = typer.main.get_command(app)
    command.main(args=["outer", "--kind", "b", "--tags", "u,v", "--jobs", "3"],
                 standalone_mode=False)
    assert (seen[-1].kind, seen[-1].tags, seen[-1].jobs, seen[-1].size) == ("b", ["u", "v"], 3, 5)
    with pytest.raises(UsageError, match="No such option"):
        command.main(args=["outer", "--seed", "1"], standalone_mode=False)


def test_a_name_that_is_not_a_wrapped_option_is_refused():
    with pytest.raises(ValueError, match="speed"):
        takes_options(Inner, sets=("speed",))
