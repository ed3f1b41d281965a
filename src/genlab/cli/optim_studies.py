"""How `genlab optim` prints a study: its report's lines and aligned tables.

Each study registers itself in its own module (genlab.optim.studies); cli/optim.py
generates its command from its config, and the run function made here runs the study and
prints what its ``report`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer

from genlab.cli import options


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
    """What ``study`` (a genlab.optim.studies Study) reports: lines, and (title, rows,
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
