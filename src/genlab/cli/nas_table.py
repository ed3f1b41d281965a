"""`genlab nas table`: the NB201 accuracy table's formats (genlab.nas.spaces.nb201.official)."""

from __future__ import annotations

import typer

from genlab.cli.commands import config_command, lazy_app

table_app = lazy_app(no_args_is_help=True, rich_markup_mode=None)


def _convert(cfg) -> None:
    """Write an accuracy table as genlab's CSV, which later runs read without running code."""
    from genlab.nas.spaces.nb201.official import write_csv
    from genlab.nas.spaces.nb201.table import NB201Table

    table = NB201Table.load(cfg.src)  # all of SRC is read and checked before OUT is touched
    path = write_csv(table.rows, cfg.out)
    typer.echo(f"{len(table):,} architectures -> {path}")


config_command(table_app, "convert", "genlab.nas.spaces.nb201.table:ConvertConfig", _convert,
               run_folder=False)
