"""`genlab demo`: each method's main job on embedded data, one report."""

from __future__ import annotations

from pathlib import Path

import typer


def demo(out: Path = typer.Option(Path("runs/demo"), help="Output folder for the demo report.")):
    """Run every section of the demo and write report.html."""
    typer.echo(f"demo output: {out}")
