"""Plots (matplotlib, no display needed) and the Markdown/HTML report of a run folder."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from genlab.core.runs import atomic_write_bytes  # noqa: E402

_CELL = re.compile(r"(?<!\\)\|")  # a table cell separator: a pipe not escaped as \|


def figure(*, ncols: int = 1, nrows: int = 1, width: float = 5.0, height: float = 3.6):
    """A new figure with a grid of axes (squeezed), sized per panel."""
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)


def fmt(value, digits: int = 3) -> str:
    """Format a cell: floats to ``digits`` decimals, None as an em dash."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(rows: Sequence[dict], columns: Sequence[str] | None = None,
                   digits: int = 3) -> str:
    """A GitHub Markdown table of dict rows (columns default to the first row's keys)."""
    if not rows:
        return "_(no rows)_\n"
    columns = list(columns or rows[0].keys())
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(fmt(row.get(c), digits) for c in columns) + " |")
    return "\n".join(lines) + "\n"


class Report:
    """Sections of text, tables and images, written as report.md and report.html."""

    def __init__(self, title: str):
        self.title = title
        self.blocks: list[tuple[str, str]] = []

    def heading(self, text: str) -> None:
        self.blocks.append(("h2", text))

    def text(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, rows: Sequence[dict], columns: Sequence[str] | None = None,
              digits: int = 3) -> None:
        self.blocks.append(("table", markdown_table(rows, columns, digits)))

    def image(self, relpath: str | Path, caption: str = "") -> None:
        self.blocks.append(("img", f"{relpath}|{caption}"))

    def markdown(self) -> str:
        out = [f"# {self.title}\n"]
        for kind, body in self.blocks:
            if kind == "h2":
                out.append(f"## {body}\n")
            elif kind == "p":
                out.append(body + "\n")
            elif kind == "table":
                out.append(body)
            else:
                path, caption = body.split("|", 1)
                out.append(f"![{caption}]({path})\n")
        return "\n".join(out)

    def html(self) -> str:
        parts = [f"<!doctype html><meta charset='utf-8'><title>{html.escape(self.title)}</title>",
                 "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}"
                 "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:2px 8px}"
                 "img{max-width:100%}</style>", f"<h1>{html.escape(self.title)}</h1>"]
        for kind, body in self.blocks:
            if kind == "h2":
                parts.append(f"<h2>{html.escape(body)}</h2>")
            elif kind == "p":
                parts.append(f"<p>{html.escape(body)}</p>")
            elif kind == "table":
                rows = [[c.replace("\\|", "|") for c in _CELL.split(r.strip()[1:-1])]
                        for r in body.strip().splitlines()]
                head, data = rows[0], rows[2:]
                parts.append("<table><tr>" + "".join(f"<th>{html.escape(c.strip())}</th>"
                                                     for c in head) + "</tr>")
                for r in data:
                    parts.append("<tr>" + "".join(f"<td>{html.escape(c.strip())}</td>"
                                                  for c in r) + "</tr>")
                parts.append("</table>")
            else:
                path, caption = body.split("|", 1)
                parts.append(f"<figure><img src='{html.escape(path)}'><figcaption>"
                             f"{html.escape(caption)}</figcaption></figure>")
        return "\n".join(parts) + "\n"

    def write(self, folder: str | Path, stem: str = "report") -> Path:
        folder = Path(folder)
        atomic_write_bytes(folder / f"{stem}.md", self.markdown().encode())
        atomic_write_bytes(folder / f"{stem}.html", self.html().encode())
        return folder / f"{stem}.html"
