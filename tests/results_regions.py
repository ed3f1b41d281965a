"""A command's results file in place of a recovered one: the regions of docs/results/pages.json
that cite the recovered file, rendered from a copy of docs/results in which the command's
file took its name. tests/ is on the path: ``from results_regions import render_citing``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from genlab.core.results.files import SPEC_FILE, load_result, load_results
from genlab.core.results.render import render_region

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def _names(node, out: set) -> None:
    if isinstance(node, dict):
        out.update(str(node[k]) for k in ("file", "a_file", "b_file")
                   if isinstance(node.get(k), str))
        for v in node.values():
            _names(v, out)
    elif isinstance(node, list):
        for v in node:
            _names(v, out)


def regions_citing(name: str) -> tuple[dict, list[str]]:
    """(the regions' specification, the regions that cite results file ``name``, with the
    claims regions that read their rows from a citing one)."""
    spec = json.loads((RESULTS / SPEC_FILE).read_text())["regions"]
    citing = []
    for region, body in spec.items():
        found: set = set()
        _names(body, found)
        if name in found:
            citing.append(region)
    citing += [r for r, body in spec.items() if body.get("from") in citing and r not in citing]
    return spec, citing


def render_citing(written: Path, name: str, tmp: Path) -> dict[str, str]:
    """{region: Markdown} of every region citing ``name``, rendered with the file ``written``
    (a command's results.json) copied over docs/results/NAME.json in a copy under ``tmp``.
    Output regions are left out: they show what ``--record`` captured of the command's printing,
    which a command's own results.json never holds, and they read no figure."""
    load_result(written)
    folder = tmp / "results"
    shutil.copytree(RESULTS, folder)
    shutil.copy(written, folder / f"{name}.json")
    files = load_results(folder)
    spec, citing = regions_citing(name)
    assert citing, f"no region cites {name}"
    return {r: render_region(r, spec, files) for r in citing
            if spec[r].get("kind") != "output"}
