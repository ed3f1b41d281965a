"""Options and parsers every ``genlab`` command shares (docs/cli.md states the convention).

One meaning per option name across the three apps:

- ``--out DIR``: the run folder; ``--resume``: a flag that continues the run in ``--out``.
- ``--seed N``: one seed; ``--seeds LIST``: the seeds of a study, ``0,1,2`` or a range
  ``0-4`` (both ends included), mixed as ``0-2,7``.
- ``--size S``: an image size, ``32`` (square) or ``HEIGHTxWIDTH`` (``32x48``).
- ``--threads N``: torch's intra-op CPU threads, recorded in config.json; ``0`` leaves
  torch's default (the machine's cores), which makes the last bits machine-dependent.
- ``--device``: ``cpu``, ``cuda`` (or ``cuda:N``) or ``auto``.

Every command ends with the line ``outputs in PATH`` (``closing``). Parsers raise
ConfigError naming the option, so that the CLI prints one line and exits with 2.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer
from typer.core import TyperCommand

from genlab.core import options as declared
from genlab.core.errors import ConfigError

RESUME_HELP = ("Continue the run in --out with the same options (a finished run is left as "
               "it is; a folder with no run starts one, with a warning).")
THREADS_HELP = ("torch CPU threads, recorded in config.json (0: torch's default, the "
                "machine's cores; the last bits of a result depend on the count).")
DEVICE_HELP = "cpu | cuda | cuda:N | auto (cuda when there is one)."
SEEDS_HELP = "Seeds: a list 0,1,2 or a range 0-4 (both ends included)."
SIZE_HELP = "Image size: N (square) or HEIGHTxWIDTH"


def registry_help_command(helps: dict[str, Callable[[], str]]) -> type[TyperCommand]:
    """A command class whose options named in ``helps`` get their help text from it when
    help is shown: the texts list a registry's names, and registries import torch, which the
    CLI does not import at start-up."""

    class RegistryHelp(TyperCommand):
        def format_help(self, ctx, formatter) -> None:
            for param in self.params:
                if param.name in helps:
                    param.help = helps[param.name]()
            super().format_help(ctx, formatter)

    return RegistryHelp


def resume_option() -> bool:
    """``--resume``: a flag (there is no --no-resume: leaving it out is the default)."""
    return typer.Option(False, "--resume", help=RESUME_HELP)


def threads_option(default: int = 1) -> int:
    return typer.Option(default, "--threads", min=0, help=THREADS_HELP)


def device_option(default: str = "cpu") -> str:
    return typer.Option(default, "--device", help=DEVICE_HELP)


def seeds_option(default: str, what: str = "") -> str:
    return typer.Option(default, "--seeds", help=SEEDS_HELP + (f" {what}" if what else ""))


def size_option(default: str | None, what: str = "") -> str:
    suffix = f" ({what})." if what else "."
    return typer.Option(default, "--size", help=SIZE_HELP + suffix)


def parse_seeds(text: str, option: str = "--seeds") -> list[int]:
    """'0,1,2' -> [0, 1, 2]; '0-4' -> [0, 1, 2, 3, 4] (core.options' spelling, named as
    the hand-written commands name the option)."""
    return declared.parse_seeds(text, option)


def parse_size(text: str | int, option: str = "--size", *, square: bool = False,
               minimum: int = 1) -> tuple[int, int]:
    """'32' -> (32, 32); '32x48' -> (32, 48) (core.options' spelling)."""
    return declared.parse_size(text, option, square=square, minimum=minimum)


def parse_list(text: str, kind=str, option: str = "") -> list:
    """'a,b' -> [a, b] converted by ``kind`` (empty items dropped)."""
    try:
        return [kind(v.strip()) for v in str(text).split(",") if v.strip()]
    except ValueError as exc:
        raise ConfigError(f"{option}: expected a comma-separated list, got {text!r}") from exc


def closing(out: str | Path) -> None:
    """The last line of every command: where its outputs are."""
    typer.echo(f"outputs in {out}")
