"""CSV files written a row at a time: what `nas score` and `nas fidelity` resume from.

A row is appended (one ``write`` of one line, flushed) as soon as its figure is known, so a
killed run keeps every finished row and a resumed one skips them; a last line cut short by
the kill is dropped when the file is read back. The header is written with the first row
and checked on every append: a file of another layout is refused (DataError), not mixed.
A run may begin from another run's file (:func:`start_from`: a copy of its complete rows),
so a committed file is reported, or continued, in a new folder without being touched.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from genlab.core.errors import DataError
from genlab.core.storage.files import append_line


def csv_line(values) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(values)
    return buf.getvalue()


def read_rows(path: Path, fields: list[str] | None = None) -> list[dict[str, str]]:
    """The complete rows of ``path`` (none when it does not exist); ``fields``: the header it
    must have."""
    path = Path(path)
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines = lines[:-1]  # a line cut short by a kill
    if not lines:
        return []
    reader = csv.DictReader(io.StringIO("".join(lines)))
    if fields is not None and reader.fieldnames != fields:
        raise DataError(f"{path}: columns {reader.fieldnames} are not this command's "
                        f"{fields}; use another --out")
    return list(reader)


def append_row(path: Path, fields: list[str], row: dict) -> None:
    """Append ``row`` (its values in ``fields`` order) to ``path``, header first if new."""
    path = Path(path)
    read_rows(path, fields)  # refuses another layout
    text = path.read_text() if path.exists() else ""
    if not text.strip():
        path.write_text(csv_line(fields) + "\n")
    elif not text.endswith("\n"):  # drop the line a kill cut short before appending
        path.write_text("".join(text.splitlines(keepends=True)[:-1]))
    append_line(path, csv_line([row.get(f, "") for f in fields]))


def start_from(path: Path, source: str | Path | None, fields: list[str]) -> None:
    """Begin ``path`` as a copy of the complete rows of ``source`` (checked against
    ``fields``) when ``source`` is given and ``path`` holds no row yet."""
    if not source or read_rows(path, fields):
        return
    source = Path(source)
    if not source.is_file():
        raise DataError(f"{source}: no such rows file to start from")
    rows = read_rows(source, fields)
    lines = [csv_line(fields), *(csv_line([r[f] for f in fields]) for r in rows)]
    Path(path).write_text("\n".join(lines) + "\n")
