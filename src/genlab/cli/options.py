"""Options and parsers every ``genlab`` command shares (docs/cli.md states the convention).

One meaning per option name across the three apps:

- ``--out DIR``: the run folder; ``--resume``: a flag that continues the run in ``--out``.
- ``--seed N``: one seed; ``--seeds LIST``: the seeds of a study, ``0,1,2`` or a range
  ``0-4`` (both ends included), mixed as ``0-2,7``.
- ``--size S``: an image size, ``32`` (square) or ``HEIGHTxWIDTH`` (``32x48``).
- ``--threads N``: torch's intra-op CPU threads, recorded in config.json; ``0`` leaves
  torch's default (the machine's cores), which makes the last bits machine-dependent.
- ``--device``: ``cpu``, ``cuda`` (or ``cuda:N``) or ``auto``.

Every command ends with the line ``outputs in PATH`` (``closing``). The spellings live
in genlab.core.options (each option is declared on its config's field); their parsers raise
ConfigError naming the option, so that the CLI prints one line and exits with 2.
"""

from __future__ import annotations

from pathlib import Path

import typer


def closing(out: str | Path) -> None:
    """The last line of every command: where its outputs are."""
    typer.echo(f"outputs in {out}")


def print_predictions(cfg) -> None:
    """Predict the classes of images with a trained classifier run; one line per image: the
    class and its probability."""
    for p in cfg.predictions():
        typer.echo(f"{p.image}: {p.label}  (probability {p.probability:.3f})")
