"""Plots (matplotlib, no display needed) and the Markdown/HTML report of a run folder.

A :class:`Report` is written once as Markdown (report.md) and rendered to HTML from that
same Markdown with markdown-it-py (CommonMark plus tables, raw HTML off), so the two
files cannot disagree. Table cells are data: ``Report.table`` escapes them (a ``|`` in a
cell becomes ``\\|``); a :class:`Code` cell becomes a code span, ``<code>`` in HTML.
Headings and paragraphs are Markdown written by the caller.
"""

from __future__ import annotations

import html
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from genlab.core.runs import atomic_write_bytes  # noqa: E402

# Characters a table cell escapes with a backslash: those that could start inline markup
# (code, emphasis, links, autolinks, entities) or split the row. An underscore is escaped
# only where it could open or close emphasis (not inside a word such as lambda_max).
_MD_PUNCT = re.compile(r"[\\`*|\[\]<&]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# After these characters a code span may wrap in HTML (a <wbr> break opportunity): "+"
# separates the parts of long codes such as cell genotypes, "/" the parts of paths.
CODE_BREAKS = "+/"
STYLE = (
    "body{font-family:sans-serif;max-width:1250px;margin:2em auto;padding:0 1em;"
    "line-height:1.4}"
    "table{border-collapse:collapse;margin:0.6em 0;max-width:100%}"
    "td,th{border:1px solid #bbb;padding:2px 8px;vertical-align:top;text-align:left}"
    "th{background:#f2f2f2;white-space:nowrap}"
    "code{font-size:0.92em;overflow-wrap:anywhere}"
    "img{max-width:100%}p.reading{margin-top:0.2em}"
)


class Code(str):
    """A table cell shown as code (a Markdown code span, ``<code>`` in HTML)."""


def fmt(value, digits: int = 3) -> str:
    """Format a cell: floats to ``digits`` decimals, None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.{digits}f}"
    return str(value)


def mean_std_text(mean: float | None, std: float | None, n: int, digits: int = 2,
                  unit: str = "") -> str:
    """"mean ± std (n=N)" for n >= 2; the value alone for one run; "-" for none."""
    if mean is None or n < 1:
        return "-"
    if n == 1 or std is None:
        return f"{mean:.{digits}f}{unit}"
    return f"{mean:.{digits}f}{unit} ± {std:.{digits}f} (n={n})"


def mean_std(values: Sequence[float | None], digits: int = 2, unit: str = "") -> str:
    """The mean ± sample std of ``values`` (None dropped), as :func:`mean_std_text` writes it.

    One value is a value, not an interval: it is printed alone, without ``±``.
    """
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return "-"
    std = statistics.stdev(vals) if len(vals) > 1 else None
    return mean_std_text(statistics.fmean(vals), std, len(vals), digits, unit)


def md_escape(text: str) -> str:
    """Plain text as Markdown inline text: markup characters and pipes backslash-escaped."""
    return _MD_PUNCT.sub(lambda m: "\\" + m.group(0), text).replace("\n", " ")


def md_code(text: str, *, in_table: bool = True) -> str:
    """``text`` as a Markdown code span (fence longer than any backtick run inside)."""
    text = text.replace("\n", " ")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    body = text.replace("|", "\\|") if in_table else text  # a table splits cells first
    return f"{fence}{pad}{body}{pad}{fence}"


def md_cell(value, digits: int = 3) -> str:
    """One table cell as Markdown: :class:`Code` as a code span, everything else escaped."""
    if isinstance(value, Code):
        return md_code(str(value)) if value else ""
    return md_escape(fmt(value, digits))


def markdown_table(rows: Sequence[dict], columns: Sequence[str] | None = None,
                   digits: int | Mapping[str, int] = 3, *, escape: bool = False) -> str:
    """A GitHub Markdown table of dict rows (columns default to the first row's keys).

    Without ``escape`` the cells are written as they are (the caller's Markdown); with it
    each cell is data, escaped by :func:`md_cell` (:class:`Code` cells as code spans).
    ``digits`` is one number or a number per column (default 3).
    """
    if not rows:
        return "_(no rows)_\n"
    columns = list(columns or rows[0].keys())

    def cell(row: dict, col: str) -> str:
        d = digits.get(col, 3) if isinstance(digits, Mapping) else digits
        return md_cell(row.get(col), d) if escape else fmt(row.get(col), d)

    head = [md_escape(c) for c in columns] if escape else columns
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(cell(row, c) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def figure(*, ncols: int = 1, nrows: int = 1, width: float = 5.0, height: float = 3.6):
    """A new figure with a grid of axes (squeezed), sized per panel."""
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)


def _markdown_it():
    """The Markdown renderer: CommonMark plus tables; raw HTML in the source is text."""
    from markdown_it import MarkdownIt  # imported here: only writing HTML needs it

    md = MarkdownIt("commonmark", {"html": False}).enable("table")

    def code_inline(renderer, tokens, idx, options, env):
        text = html.escape(tokens[idx].content, quote=False)
        for ch in CODE_BREAKS:
            text = text.replace(ch, ch + "<wbr>")
        return f"<code>{text}</code>"

    md.add_render_rule("code_inline", code_inline)
    return md


class Report:
    """Sections of text, tables and images, written as report.md and report.html."""

    def __init__(self, title: str):
        self.title = title
        self.blocks: list[str] = []  # Markdown blocks, in order

    def heading(self, text: str) -> None:
        """A section heading (Markdown): what the section measured, not a claim."""
        self.blocks.append(f"## {text}\n")

    def text(self, text: str) -> None:
        """A paragraph of Markdown (code spans in backticks)."""
        self.blocks.append(text.strip() + "\n")

    def reading(self, text: str) -> None:
        """The one-line reading under a table (Markdown), computed from its numbers."""
        self.blocks.append("*Reading:* " + text.strip() + "\n")

    def table(self, rows: Sequence[dict], columns: Sequence[str] | None = None,
              digits: int | Mapping[str, int] = 3) -> None:
        """A table of data rows: cells escaped, :class:`Code` cells as code spans."""
        self.blocks.append(markdown_table(rows, columns, digits, escape=True))

    def bullets(self, items: Sequence[str]) -> None:
        """A bulleted list of Markdown items."""
        self.blocks.append("".join(f"- {item}\n" for item in items))

    def image(self, relpath: str | Path, caption: str = "") -> None:
        """An image (path relative to the report's folder) with its caption below it."""
        path = str(relpath).replace("\\", "/")
        if re.search(r"[\s()<>]", path):
            path = f"<{path}>"
        alt = md_escape(caption)
        self.blocks.append(f"![{alt}]({path})\\\n*{alt}*\n" if caption else f"![]({path})\n")

    def markdown(self) -> str:
        return "\n".join([f"# {md_escape(self.title)}\n", *self.blocks])

    def html(self) -> str:
        body = _markdown_it().render(self.markdown())
        body = body.replace("<p><em>Reading:</em>", "<p class='reading'><em>Reading:</em>")
        return ("<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
                f"<title>{html.escape(self.title)}</title><style>{STYLE}</style></head>\n"
                f"<body>\n{body}</body></html>\n")

    def write(self, folder: str | Path, stem: str = "report") -> Path:
        folder = Path(folder)
        atomic_write_bytes(folder / f"{stem}.md", self.markdown().encode())
        atomic_write_bytes(folder / f"{stem}.html", self.html().encode())
        return folder / f"{stem}.html"
