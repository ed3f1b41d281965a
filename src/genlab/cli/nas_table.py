"""`genlab nas table`: the NB201 accuracy table's formats (genlab.nas.spaces.nb201.official)."""

from __future__ import annotations

from pathlib import Path

import typer

table_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None)

OFFICIAL_TABLES = ("also the official NATS-Bench topology file/dir or the NAS-Bench-201 v1.1 .pth "
                   "(through their packages: pip install 'genlab[nb201]'; those are pickles and "
                   "run code when loaded: only give a file you trust, or convert it once with "
                   "`genlab nas table convert`)")


@table_app.command()
def convert(
    src: Path = typer.Argument(..., help="The table to read: genlab's CSV, the official "
                               "NATS-Bench topology file/dir or the NAS-Bench-201 v1.1 .pth "
                               "(through their packages: pip install 'genlab[nb201]'; those are "
                               "pickles and run code when loaded: only give a file you trust)."),
    out: Path = typer.Option(..., help="The CSV to write (replaced as a whole, atomically)."),
):
    """Write an accuracy table as genlab's CSV, which later runs read without running code."""
    from genlab.nas.spaces.nb201.official import write_csv
    from genlab.nas.spaces.nb201.table import NB201Table

    table = NB201Table.load(src)  # all of SRC is read and checked before OUT is touched
    path = write_csv(table.rows, out)
    typer.echo(f"{len(table):,} architectures -> {path}")
