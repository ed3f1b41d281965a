"""Study commands: one generated command per study module of an app's studies package.

Each study registers itself in its own module (genlab.core.studies); :func:`studies_app`
makes an app (`genlab nas`, `genlab optim`, `genlab gaze`) whose group adds a command for
every study module of its package when its commands are first listed or looked up (read from
the sources: no torch is imported), generated from the study's config; the run function made
here runs the study and prints what its ``report`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer
from typer import _click as click  # typer >= 0.26 carries its own click
from typer.core import TyperGroup

from genlab.cli import options
from genlab.cli.commands import config_command, lazy_app


def aligned_table(rows: Sequence[dict], columns: Sequence[str] | None = None,
                  digits: int = 5) -> str:
    """Rows as plain columns for a terminal: a header, numbers right-aligned, a missing
    cell as '-'."""
    from genlab.core.report import fmt

    columns = list(columns or rows[0])
    cells = [[fmt(row.get(c), digits) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row.get(c), (int, float)) or row.get(c) is None for row in rows)
               for c in columns]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths]), *map(line, cells)])


def show_report(study, summary: dict, cfg, out: Path) -> None:
    """What ``study`` (a genlab.core.studies Study) reports: lines, and (title, rows,
    columns) as aligned tables (table.md keeps the Markdown); then the closing line."""
    for block in study.report(summary, cfg):
        if isinstance(block, str):
            typer.echo(block)
            continue
        title, rows, columns = block
        if title:
            typer.echo(title)
        typer.echo(aligned_table(rows, columns, digits=study.digits) if rows else "(no rows)")
    options.closing(out)


def study_run(module: str, doc: str):
    """The run function of the command generated for the study that ``module`` registers:
    the study's run, then its report (``doc``: the command's help)."""
    def run(cfg, out: Path, resume: bool) -> None:
        from genlab.core.registry import import_path

        study = import_path(f"{module}:STUDY")
        show_report(study, study.run(cfg, out, resume=resume), cfg, out)
    run.__doc__ = doc
    return run


def add_studies(app: typer.Typer, package: str) -> None:
    """A command generated from its config for every study module of ``package`` (found by
    reading the sources, so no torch is imported)."""
    from genlab.core.studies import study_modules

    for name, (module, summary) in study_modules(package).items():
        config_command(app, name, f"{module}:STUDY.config", study_run(module, summary))


def studies_app(package: str, **kwargs) -> typer.Typer:
    """A lazy app (genlab.cli.commands.lazy_app, ``kwargs`` as for typer.Typer) that also
    holds a command for every study module of ``package``, added when its commands are first
    listed or looked up (``app.studies_package`` names the package; reassign it before then
    to read another)."""
    app: typer.Typer

    class StudiesGroup(TyperGroup):
        def _add(self) -> bool:
            if getattr(app, "studies_added", False):
                return False
            app.studies_added = True  # type: ignore[attr-defined]
            add_studies(app, app.studies_package)  # type: ignore[attr-defined]
            return True

        def list_commands(self, ctx: click.Context) -> list[str]:
            self._add()
            return super().list_commands(ctx)

        def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
            if self._add() and cmd_name in app.lazy_commands:  # type: ignore[attr-defined]
                return self.get_command(ctx, cmd_name)  # the lazy table now holds it
            return super().get_command(ctx, cmd_name)

    app = lazy_app(StudiesGroup, **kwargs)
    app.studies_package = package  # type: ignore[attr-defined]
    return app
