"""Commands generated from config dataclasses: every option exists once, in its config.

``config_command(app, "search", SearchConfig, run)`` adds ``genlab ... search`` to a typer
app. Its options are exactly the config's declared fields (genlab.core.options.option:
type, default, help, choices from their registry, limits, spelling), plus

- ``--config FILE``: a run's config.json (or a YAML/JSON mapping) fills the options; flags
  given on the command line override it;
- ``--print-config``: print the resolved config as JSON and stop (nothing is written);
- ``--out DIR`` and ``--resume`` for commands that write a run folder. ``--out RUN --resume``
  alone continues the run with its own options: RUN's config.json fills them (as ``--config``
  would), a flag given with it overrides (the run then refuses a value that differs from
  its own, naming the option), and a folder that is not a run of this command is refused
  first (genlab.core.runs.check_run_folder);
- Ctrl-C ends a run command with :class:`CommandInterrupted`: where the run stopped and the
  command that continues it.

The generated function has a real signature (typer reads it), so typer/click parse, convert
and print help as for a hand-written command; help texts that list a registry's names are
filled in only when help is shown (registries import torch, the CLI's start-up does not).
``run(cfg, out, resume)`` (or ``run(cfg)`` for a command without a run folder) does the work.

Most configs live beside the code that runs them, in modules that import torch. An app made
by :func:`lazy_app` takes the config as ``"package.module:Class"`` and builds the command
only when it is invoked or its help is shown; ``genlab APP --help`` lists the commands from
the run functions' docstrings, so ``genlab`` starts without importing torch.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional  # noqa: UP035 - typer reads these annotations

import typer
from typer._click.core import ParameterSource  # typer >= 0.26 carries its own click
from typer._click.exceptions import UsageError
from typer._click.utils import make_default_short_help
from typer.core import TyperCommand, TyperGroup

from genlab.core.errors import ConfigError
from genlab.core.options import (
    check_options,
    config_dict,
    config_values,
    describe,
    field_default,
    field_types,
    option_fields,
    parse_value,
    read_config_file,
)
from genlab.core.registry import import_path

CONFIG_HELP = ("A config file: a run's config.json or a YAML/JSON mapping of options; flags "
               "given here override it.")
PRINT_HELP = "Print the resolved config as JSON and stop (nothing is run or written)."
OUT_HELP = ("Run folder to write (required): a new or empty folder, or this command's run to "
            "continue with --resume.")
RESUME_HELP = ("Continue the run in --out with its own options (read from its config.json; a "
               "finished run is left as it is; a folder with no run starts one, with a "
               "warning).")
#: the options every run command has beside its config's fields
RUN_OPTIONS = ("config", "print_config", "out", "resume")
COMMAND_OPTIONS = ("config", "print_config")


def _kebab(name: str) -> str:
    return "--" + name.replace("_", "-")


def _shown_default(value: Any, parse: str | None = None) -> str | None:
    """A default as its option spells it: a list ``a,b``, a size ``32x48``."""
    if value is None or value == [] or value == {}:
        return None
    if isinstance(value, (list, tuple)):
        return ("x" if parse == "size" else ",").join(map(str, value))
    return str(value)


def _parameter(f: dataclasses.Field, spec, annotation: Any) -> inspect.Parameter:
    """The typer parameter of one field: its type, flags and default as click shows them."""
    from genlab.core.options import base_type

    kind, _ = base_type(annotation)
    default = field_default(f)
    if spec.parse == "params":
        py_type: Any = Optional[list[str]]  # noqa: UP045 - typer needs typing's Optional
        info = typer.Option(None, _kebab(f.name), *spec.flags, help=spec.help,
                            metavar="KEY=VALUE", show_default=False)
    elif spec.parse == "list" and spec.argument:  # any number of positional values
        py_type = list[str]
        info = typer.Argument(... if spec.required else None, help=spec.help,
                              show_default=False)
    elif spec.parse == "list":  # a, b,c or the option repeated
        py_type = Optional[list[str]]  # noqa: UP045
        # the default list itself (help shows "a, b", not a string in parentheses); a value
        # left at it is not "given" (given_values reads where each value came from)
        info = typer.Option([str(v) for v in default] if default else None, _kebab(f.name),
                            *spec.flags, help=spec.help, metavar="A,B,...",
                            show_default=bool(default))
    elif spec.parse is not None:  # seeds, size, square: a text the field's parser reads
        py_type = Optional[str]  # noqa: UP045
        metavar = {"seeds": "SEEDS", "size": "N|HxW", "square": "N"}[spec.parse]
        shown = _shown_default(default, spec.parse)
        info = typer.Option(shown, _kebab(f.name), *spec.flags, help=spec.help,
                            metavar=metavar, show_default=shown is not None)
    elif kind is bool:
        py_type = Optional[bool] if default is None else bool  # noqa: UP045
        flag = f"{_kebab(f.name)}/--no-{f.name.replace('_', '-')}"
        info = typer.Option(default, flag, *spec.flags, help=spec.help,
                            show_default=default is not None)
    else:
        scalar = kind if kind in (int, float, str) else str
        py_type = Optional[scalar] if default is None else scalar  # noqa: UP045
        if spec.argument:
            info = typer.Argument(... if spec.required else default, help=spec.help,
                                  show_default=default is not None)
        else:
            info = typer.Option(default, _kebab(f.name), *spec.flags, help=spec.help,
                                show_default=default is not None)
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=info,
                             annotation=py_type)


def _help_command(cls) -> type[TyperCommand]:
    """A click command class whose options' help texts are completed (choices listed from
    their registries, limits) only when help is shown."""
    specs = {f.name: spec for f, spec in option_fields(cls)}

    class ConfigHelp(TyperCommand):
        def format_help(self, ctx, formatter) -> None:
            for param in self.params:
                if param.name in specs:
                    param.help = describe(specs[param.name])
            super().format_help(ctx, formatter)

    return ConfigHelp


def given_values(cls, ctx, values: dict) -> dict:
    """The config fields the command line set (not left at their defaults), parsed."""
    types = field_types(cls)
    out = {}
    for f, spec in option_fields(cls):
        if not spec.cli or f.name not in values:
            continue
        source = ctx.get_parameter_source(f.name)
        if source in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP, None):
            continue
        value = values[f.name]
        if spec.parse in ("params", "list") and not value:
            continue
        if spec.parse == "list" and not spec.argument:  # repeated options, each may hold
            value = ",".join(value)  # a comma-separated list (arguments: one value each)
        out[f.name] = parse_value(value, spec, types[f.name], f.name)
    return out


def build_config(cls, ctx, values: dict, config_file: Path | None):
    """The config of one invocation: the class's defaults, then the config file, then the
    flags given; checked against the fields' declarations."""
    merged = {}
    if config_file is not None:
        merged.update(config_values(cls, read_config_file(config_file),
                                    source=f"--config {config_file}"))
    merged.update(given_values(cls, ctx, values))
    cfg = cls(**merged)
    check_options(cfg)
    return cfg


class CommandInterrupted(Exception):  # noqa: N818 - it reports an interruption, not an error
    """Ctrl-C ended a command: ``line`` says where the run stopped and how to continue it."""

    def __init__(self, line: str):
        super().__init__(line)
        self.line = line


def interrupted_line(exc: KeyboardInterrupt, ctx, out: Path | None, resume: bool) -> str:
    """"interrupted at step N of M; continue with: genlab ... --out RUN --resume"."""
    import shlex

    where = str(exc) if str(exc).startswith("interrupted") else "interrupted"
    if out is None or not resume:
        return where
    command = f"genlab {command_kind(ctx)}"
    return f"{where}; continue with: {command} --out {shlex.quote(str(out))} --resume"


def command_kind(ctx) -> str:
    """The command as a run records it: "nas search", "optim train" (the names below the
    root)."""
    names = []
    while ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(reversed(names))


def run_config_file(ctx, values: dict) -> Path | None:
    """The config file of an invocation: --config, else with ``--out RUN --resume`` the
    run's own config.json (RUN checked first: a folder that is not a run of this command is
    refused; genlab.core.runs.check_run_folder)."""
    if values.get("config") is not None or not values.get("resume") or \
            values.get("out") is None:
        return values.get("config")
    from genlab.core.runs import CONFIG, check_run_folder

    out = Path(values["out"])
    if not (out / CONFIG).is_file():
        return None  # a new folder, or a sweep's root (gaze bench, audit): its runner checks it
    return out / CONFIG if check_run_folder(out, command_kind(ctx)) is not None else None


def resolved(cfg):
    """The config with every "resolved later" field filled, where the config knows how."""
    method = getattr(cfg, "resolved", None)
    return method() if callable(method) else cfg


def print_config(cfg) -> None:
    typer.echo(json.dumps(config_dict(resolved(cfg)), indent=2, default=str))


@dataclasses.dataclass(frozen=True)
class CommandShape:
    """What a generated command has beside its config's options: ``run_folder`` (--out, and
    ``run(cfg, out, ...)``; False: ``run(cfg)``), ``resume`` (False: a run-folder command
    without --resume, ``run(cfg, out)``), its ``help`` and ``short_help`` (default: the run
    function's docstring), and ``resume_help``: what --resume does, where a command's resume
    does more than continue one run."""

    run_folder: bool = True
    resume: bool = True
    help: str | None = None
    short_help: str | None = None
    resume_help: str = RESUME_HELP


def config_command(app: typer.Typer, name: str, cls, run: Callable[..., Any],
                   **shape: Any) -> None:
    """Add the command ``name`` to ``app``, its options generated from ``cls`` (see the
    module doc), shaped by ``shape`` (the fields of :class:`CommandShape`). ``cls`` may be
    ``"package.module:Class"`` on an app made by :func:`lazy_app`: the command is then built
    when first used."""
    form = CommandShape(**shape)
    lazy = getattr(app, "lazy_commands", None)
    if isinstance(cls, str):
        if lazy is None:
            raise ValueError(f"{name}: a config named by its path needs an app made by lazy_app")
        lazy[name] = (cls, run, form)
        return
    _add_command(app, name, cls, run, form)


def _add_command(app: typer.Typer, name: str, cls, run: Callable[..., Any],
                 form: CommandShape) -> None:
    params = _command_parameters(cls, form)
    command = _command_function(cls, run, form)
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__name__ = name.replace("-", "_")
    command.__doc__ = form.help or run.__doc__
    command.config_class = cls  # type: ignore[attr-defined]
    app.command(name, cls=_help_command(cls), short_help=form.short_help)(command)


def _command_parameters(cls, form: CommandShape) -> list[inspect.Parameter]:
    """The generated command's signature: the context, one parameter per option of ``cls``,
    then --config, --print-config and, for a run-folder command, --out and --resume."""
    run_folder, resume = form.run_folder, form.resume
    types = field_types(cls)
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=typer.Context)]
    fields = [(f, spec) for f, spec in option_fields(cls) if spec.cli]
    taken = set(RUN_OPTIONS if run_folder else COMMAND_OPTIONS)
    clash = taken & {f.name for f, _ in fields}
    if clash:
        raise ValueError(f"{cls.__name__}: fields {sorted(clash)} clash with the options every "
                         "command has")
    params += [_parameter(f, spec, types[f.name]) for f, spec in fields]
    params.append(inspect.Parameter(
        "config", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path],  # noqa: UP045
        default=typer.Option(None, "--config", help=CONFIG_HELP, metavar="FILE")))
    params.append(inspect.Parameter(
        "print_config", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
        default=typer.Option(False, "--print-config", help=PRINT_HELP)))
    if run_folder:
        params.append(inspect.Parameter(
            "out", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path],  # noqa: UP045
            default=typer.Option(None, "--out", help=OUT_HELP, metavar="DIR")))
    if run_folder and resume:
        params.append(inspect.Parameter(
            "resume", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
            default=typer.Option(False, "--resume", help=form.resume_help)))
    return params


def _command_function(cls, run: Callable[..., Any], form: CommandShape) -> Callable[..., Any]:
    """The generated command's body: the config from its values (and --config, or a resumed
    run's config.json), printed with --print-config, else handed to ``run``."""
    run_folder, resume = form.run_folder, form.resume

    def command(ctx: typer.Context, **values):
        config_file = run_config_file(ctx, values) if run_folder and resume else \
            values.get("config")
        try:
            try:
                cfg = build_config(cls, ctx, values, config_file)
            except ConfigError:
                if config_file == values.get("config"):
                    raise
                # the run's options do not fit this command (a run of another kind that
                # records none): the run folder's own checks name what it holds
                cfg = build_config(cls, ctx, values, None)
        except ConfigError as exc:  # a value the declarations refuse: as click's own refusals
            raise UsageError(str(exc), ctx) from exc
        if values.get("print_config"):
            print_config(cfg)
            return None
        if not run_folder:
            return run(cfg)
        if values.get("out") is None:
            raise ConfigError("--out is required: the run folder to write")
        try:
            if not resume:
                return run(cfg, values["out"])
            return run(cfg, values["out"], values.get("resume", False))
        except KeyboardInterrupt as exc:  # before click turns it into a bare Abort
            raise CommandInterrupted(interrupted_line(exc, ctx, values["out"], resume)) \
                from exc

    return command


def _first_line(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


def lazy_app(base: type[TyperGroup] = TyperGroup, **kwargs) -> typer.Typer:
    """A typer app (``kwargs`` as for typer.Typer; its group class derives from ``base``)
    whose commands added by :func:`config_command` with a config path are built only when
    used."""
    table: dict[str, tuple[str, Callable[..., Any], CommandShape]] = {}

    def build(name: str):
        path, run, form = table[name]
        one = typer.Typer(rich_markup_mode=None, add_completion=False)
        _add_command(one, name, import_path(path, what="ConfigClass"), run, form)
        command = typer.main.get_command(one)
        command.name = name
        return command

    class LazyGroup(base):  # type: ignore[valid-type,misc]
        def list_commands(self, ctx) -> list[str]:
            known = super().list_commands(ctx)
            return [*known, *(n for n in table if n not in known)]

        def get_command(self, ctx, cmd_name: str):
            if cmd_name in table and cmd_name not in self.commands:
                self.add_command(build(cmd_name), cmd_name)
            return super().get_command(ctx, cmd_name)

        def format_commands(self, ctx, formatter) -> None:
            """The commands and their first docstring lines, without building lazy ones."""
            rows = []
            for name in self.list_commands(ctx):
                if name in table and name not in self.commands:
                    _, run, form = table[name]
                    rows.append((name, form.short_help or make_default_short_help(
                        _first_line(form.help or run.__doc__), formatter.width)))
                    continue
                command = super().get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(formatter.width)))
            if rows:
                with formatter.section("Commands"):
                    formatter.write_dl(rows)

    app = typer.Typer(cls=LazyGroup, **kwargs)
    app.lazy_commands = table  # type: ignore[attr-defined]
    return app


def all_commands(group, ctx=None, path: tuple[str, ...] = ()):
    """(path, click command) of every command under ``group``, lazy ones built."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None:
            continue
        yield (*path, name), command
        if hasattr(command, "list_commands"):
            yield from all_commands(command, ctx, (*path, name))
