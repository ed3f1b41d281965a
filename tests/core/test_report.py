"""The report: one Markdown source rendered by markdown-it, checked by parsing the HTML it
writes with the standard library's parser (the truth is the browser's view, not ours)."""

import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

import genlab.core.report
from genlab.core.report import Code, Report, md_code, md_escape, mean_std, mean_std_text


class Page(HTMLParser):
    """Tables as rows of cells (tag, text, code texts), every visible text node, all tags."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: list[list[list[dict]]] = []
        self.texts: list[str] = []
        self.tags: list[str] = []
        self._skip = 0
        self._cell: dict | None = None
        self._code = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in ("style", "title"):
            self._skip += 1
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = {"tag": tag, "text": "", "code": []}
            self.tables[-1][-1].append(self._cell)
        elif tag == "code":
            self._code = True
            if self._cell is not None:
                self._cell["code"].append("")

    def handle_endtag(self, tag):
        if tag in ("style", "title"):
            self._skip -= 1
        elif tag in ("td", "th"):
            self._cell = None
        elif tag == "code":
            self._code = False

    def handle_data(self, data):
        if self._skip:
            return
        self.texts.append(data)
        if self._cell is not None:
            self._cell["text"] += data
            if self._code:
                self._cell["code"][-1] += data


GENOTYPE = "|nor_conv_3x3~0|+|skip_connect~0|none~1|+|avg_pool_3x3~0|none~1|nor_conv_3x3~2|"
ROWS = [
    {"measure": "noise scale tr Sigma / ||g||^2", "value": 212.84, "code": Code(GENOTYPE),
     "runs": mean_std([0.5])},
    {"measure": "x <b>bold</b> & *star* _under_ [link](u) `tick`", "value": None,
     "code": Code("genlab demo --out runs/demo"), "runs": mean_std([0.5, 0.7])},
    {"measure": "back\\slash | and a\\|b", "value": 3, "code": Code("a`b"),
     "runs": mean_std([])},
]


def demo_report() -> Report:
    report = Report("demo | report")
    report.heading("What was measured: two runs")
    report.text("Run `genlab demo` to reproduce it.")
    report.table(ROWS, digits=2)
    report.reading("A reading computed from the table.")
    report.image("sub/plot.png", "a |caption|")
    return report


@pytest.fixture(scope="module")
def page() -> Page:
    return Page(demo_report().html())


def test_a_pipe_in_a_cell_keeps_the_row_as_wide_as_the_header(page):
    (table,) = page.tables
    head, *data = table
    assert [c["tag"] for c in head] == ["th"] * 4
    assert len(data) == len(ROWS)
    for row in data:
        assert len(row) == len(head)
    assert data[0][0]["text"] == "noise scale tr Sigma / ||g||^2"
    assert data[2][0]["text"] == "back\\slash | and a\\|b"


def test_code_cells_are_code_and_no_text_node_shows_a_backtick(page):
    data = page.tables[0][1:]
    assert [row[2]["code"] for row in data] == [[GENOTYPE], ["genlab demo --out runs/demo"],
                                                 ["a`b"]]
    assert data[0][2]["text"] == GENOTYPE  # <wbr> break opportunities add no text
    assert "genlab demo" in page.texts  # the paragraph's code span
    report = Report("no backticks in the data")  # so any backtick shown is leaked markup
    report.text("Run `genlab demo` or ``a | b``.")
    report.table([{"cell": Code(GENOTYPE), "cmd": Code("genlab demo --out x"), "n": 1}])
    shown = Page(report.html())
    assert not [t for t in shown.texts if "`" in t]
    assert [c["code"] for c in shown.tables[0][1]] == [[GENOTYPE], ["genlab demo --out x"], []]


def test_markup_in_cells_is_text(page):
    cell = page.tables[0][2][0]
    assert cell["text"] == "x <b>bold</b> & *star* _under_ [link](u) `tick`"
    assert "b" not in page.tags and "a" not in page.tags and "em" in page.tags  # caption
    assert "script" not in Page(Report("t").html()).tags


def test_single_values_have_no_plus_minus():
    assert mean_std([0.5]) == "0.50"
    assert mean_std([0.5, None]) == "0.50"
    assert mean_std([0.5, 0.7]) == "0.60 ± 0.14 (n=2)"
    assert mean_std([]) == "-"
    assert mean_std_text(1.0, 0.0, 1) == "1.00"
    assert mean_std_text(1.0, 0.25, 3, digits=1, unit="%") == "1.0% ± 0.2 (n=3)"
    cells = [row[3]["text"] for row in Page(demo_report().html()).tables[0][1:]]
    assert cells == ["0.50", "0.60 ± 0.14 (n=2)", "-"]


def test_markdown_source_round_trips_the_rows():
    report = demo_report()
    md = report.markdown()
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert len(lines) == 2 + len(ROWS)  # header, delimiter, one line per data row
    assert md.count(GENOTYPE.replace("|", "\\|")) == 1
    assert "![a \\|caption\\|](sub/plot.png)" in md
    page = Page(report.html())
    assert len(page.tables[0]) == 1 + len(ROWS)
    assert "img" in page.tags and "h2" in page.tags


def test_escape_helpers():
    assert md_escape("a|b_c *d* _e") == "a\\|b_c \\*d\\* \\_e"
    assert md_code("a`b") == "``a`b``"
    assert md_code("`x") == "`` `x ``"
    assert md_code("p|q") == "`p\\|q`"
    assert md_code("p|q", in_table=False) == "`p|q`"


def test_html_is_written_from_the_markdown(tmp_path):
    path = demo_report().write(tmp_path)
    assert path == tmp_path / "report.html"
    assert (tmp_path / "report.md").read_text() == demo_report().markdown()
    assert path.read_text().startswith("<!doctype html>")


def test_markdown_it_is_imported_only_to_write_html():
    code = ("import sys, genlab, genlab.core.report, genlab.cli.demo; "
            "assert 'markdown_it' not in sys.modules, 'imported at start'; "
            "genlab.core.report.Report('t').html(); "
            "assert 'markdown_it' in sys.modules")
    src = str(Path(genlab.core.report.__file__).parents[2])  # this checkout's genlab
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_timing_reading_names_total_and_longest():
    from genlab.cli.demo import timing_reading

    text = timing_reading([{"section": "a", "seconds": 10.2}, {"section": "b", "seconds": 30.0}])
    assert text == "2 section(s) in 40 s; the longest: b (30 s)."
    assert timing_reading([]) == "No section ran."
