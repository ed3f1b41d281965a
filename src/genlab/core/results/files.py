"""A results file: one table's figures as data, with the command that printed them.

A file is JSON with
- ``title``: what the table is;
- ``command``: the command that printed it (or writes the file);
- ``commit``: the commit whose run made it, or, for a file recovered from a page's table
  because the run folder is gone, the commit of that table, with ``recovered_from``
  (``"docs/<page>.md#<anchor>"``, or a list of them);
- ``metrics``: {metric: what it measures};
- ``values``: {metric: {row: {seed: value}}}, the per-seed figures (seeds as strings);
- optionally ``summaries``: {metric: {row: [mean, std, n]}} for figures recorded without
  their seeds, ``figures``: {key: value} for single recorded figures, ``chance``:
  ``{"metric", "population", "values", "counts"}``, an exact chance distribution (a value
  and how many members of the population have it), and ``output``: the lines a command
  printed (a page's example block), recorded by :func:`record_output` with its wall time
  and the machine (``figures``: ``wall_seconds``, ``machine``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from genlab.core.errors import DataError

REQUIRED = ("title", "command", "commit")
#: files of the results folder that are not results (the regions' specification)
SPEC_FILE = "pages.json"
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
_RECOVERED = re.compile(r"^docs/[\w./-]+\.md#[\w-]+$")


@dataclass(frozen=True)
class ResultFile:
    """One results file (see the module docstring); ``name`` is its file name's stem."""

    name: str
    title: str
    command: str
    commit: str
    recovered_from: tuple[str, ...] = ()
    metrics: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    summaries: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    chance: dict | None = None
    output: tuple[str, ...] = ()

    def seeds(self, metric: str, row: str) -> dict[str, float]:
        """{seed: value} of ``row`` for ``metric``."""
        try:
            return dict(self.values[metric][row])
        except KeyError:
            raise DataError(f"results file {self.name}: no per-seed values of row {row!r} "
                            f"for metric {metric!r}") from None

    def summary(self, metric: str, row: str) -> tuple[float, float | None, int]:
        """(mean, std, n) of ``row`` for ``metric``: from its seeds, else as recorded."""
        if row in self.values.get(metric, {}):
            vals = list(self.seeds(metric, row).values())
            n = len(vals)
            mean = sum(vals) / n
            std = (sum((v - mean) ** 2 for v in vals) / (n - 1)) ** 0.5 if n > 1 else None
            return mean, std, n
        try:
            mean, std, n = self.summaries[metric][row]
        except (KeyError, ValueError, TypeError):
            raise DataError(f"results file {self.name}: no values of row {row!r} for metric "
                            f"{metric!r}") from None
        return float(mean), None if std is None else float(std), int(n)

    def figure(self, key: str):
        if key not in self.figures:
            raise DataError(f"results file {self.name}: no figure {key!r}; it has "
                            f"{', '.join(sorted(self.figures)) or 'none'}")
        return self.figures[key]

    @property
    def source(self) -> str:
        """Where the figures come from, in one line of Markdown (links relative to docs/,
        where the tables of results files are generated)."""
        text = f"`{self.command}` at commit {self.commit}"
        if self.recovered_from:
            links = ", ".join(f"[{r}]({r.removeprefix('docs/')})" for r in self.recovered_from)
            text += f" (recovered from the table {links} of that commit: its run folder is gone)"
        return text


def _check_values(name: str, values) -> dict:
    if not isinstance(values, dict):
        raise DataError(f"results file {name}: values must be {{metric: {{row: {{seed: "
                        f"value}}}}}}, got {type(values).__name__}")
    for metric, rows in values.items():
        for row, seeds in (rows.items() if isinstance(rows, dict) else [(None, None)]):
            if not isinstance(seeds, dict) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool)
                    for v in seeds.values()):
                raise DataError(f"results file {name}: values[{metric!r}][{row!r}] must map "
                                "seeds to numbers")
    return values


def load_result(path: str | Path) -> ResultFile:
    """Read and check one results file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"results file {path}: cannot be read as JSON ({err})") from None
    if not isinstance(data, dict):
        raise DataError(f"results file {path}: expected a JSON object")
    missing = [k for k in REQUIRED if not isinstance(data.get(k), str) or not data[k]]
    if missing:
        raise DataError(f"results file {path}: missing {', '.join(missing)} (every results "
                        "file names its title, command and commit)")
    if not _COMMIT.match(data["commit"]):
        raise DataError(f"results file {path}: commit must be a hexadecimal hash, got "
                        f"{data['commit']!r}")
    recovered = data.get("recovered_from", ())
    recovered = (recovered,) if isinstance(recovered, str) else tuple(recovered)
    bad = [r for r in recovered if not _RECOVERED.match(str(r))]
    if bad:
        raise DataError(f"results file {path}: recovered_from must read "
                        f"'docs/<page>.md#<anchor>', got {bad[0]!r}")
    chance = data.get("chance")
    if chance is not None and (not isinstance(chance, dict) or len(chance.get("values", ()))
                               != len(chance.get("counts", [None])) or not chance["values"]):
        raise DataError(f"results file {path}: chance must hold equally long, non-empty "
                        "values and counts")
    output = data.get("output", [])
    if not isinstance(output, list) or not all(isinstance(x, str) for x in output):
        raise DataError(f"results file {path}: output must be a list of printed lines")
    return ResultFile(path.stem, data["title"], data["command"], data["commit"], recovered,
                      dict(data.get("metrics", {})),
                      _check_values(path.stem, data.get("values", {})),
                      dict(data.get("summaries", {})), dict(data.get("figures", {})), chance,
                      tuple(output))


def load_results(folder: str | Path) -> dict[str, ResultFile]:
    """Every results file of ``folder`` (``*.json`` but the regions' specification)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"results folder {folder} does not exist")
    return {p.stem: load_result(p) for p in sorted(folder.glob("*.json"))
            if p.name != SPEC_FILE}


def current_commit(where: str | Path | None = None) -> str | None:
    """The short hash of the checkout's HEAD (of the checkout holding this code when
    ``where`` is None); None outside a git checkout."""
    where = Path(__file__).parent if where is None else Path(where)
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where,
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and _COMMIT.match(commit) else None


def write_result(path: str | Path, data: dict) -> ResultFile:
    """Write a results file (see the module docstring) and read it back through the checks."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return load_result(path)


#: the file a command writes in its run folder (copied over docs/results/NAME.json on a rerun)
RUN_RESULTS = "results.json"
NO_CHECKOUT = f"no results file ({RUN_RESULTS}): not run from a git checkout"


def write_run_results(out: str | Path, data: dict) -> Path | None:
    """A command's results file, ``out/results.json``: ``data`` (title, command, metrics,
    values, ...) with the commit of this checkout; None, and nothing written, outside a git
    checkout (a run must not fail for want of git)."""
    commit = current_commit()
    if commit is None:
        return None
    path = Path(out) / RUN_RESULTS
    write_result(path, {**data, "commit": commit})
    return path


def merge_results(paths: Sequence[str | Path], out: str | Path, *, title: str) -> ResultFile:
    """One results file at ``out`` from several runs' files of one commit (a study run once
    per architecture, a row's seeds run in two folders): their commands joined by "; ",
    metrics, values (per metric, row and seed), summaries and figures united; a text figure
    that several files hold (a count per run) is joined by ", ", any other repeated figure,
    summary row or seed is refused."""
    files = [load_result(p) for p in paths]
    if not files:
        raise DataError("merge: give the results files to merge")
    commits = sorted({f.commit for f in files})
    if len(commits) > 1:
        raise DataError(f"merge: the files come from commits {', '.join(commits)}; a results "
                        "file names one commit, so rerun them at one")
    data: dict = {"title": title, "command": "; ".join(f.command for f in files),
                  "commit": commits[0], "metrics": {}, "values": {}, "summaries": {},
                  "figures": {}}
    for f in files:
        data["metrics"] |= f.metrics
        for metric, rows in f.values.items():  # a row's seeds may come from several runs
            for row, seeds in rows.items():
                known = data["values"].setdefault(metric, {}).setdefault(row, {})
                if set(known) & set(seeds):
                    raise DataError(f"merge: {f.name} repeats seeds of row {row!r} "
                                    f"({metric})")
                known |= seeds
        for metric, rows in f.summaries.items():
            known = data["summaries"].setdefault(metric, {})
            if set(known) & set(rows):
                raise DataError(f"merge: {f.name} repeats rows of summaries[{metric!r}]")
            known |= rows
        for key, value in f.figures.items():
            old = data["figures"].get(key)
            if old is not None and not (isinstance(old, str) and isinstance(value, str)):
                raise DataError(f"merge: figure {key!r} is in more than one file")
            data["figures"][key] = value if old is None else f"{old}, {value}"
    return write_result(out, {k: v for k, v in data.items() if v})


def machine_line() -> str:
    """The machine a command ran on, in words: its cores and the load average at the start."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    cores = f"{os.cpu_count()} cores"
    return cores + (f", load average {load:.1f} at the start" if load is not None else "")


def record_output(path: str | Path, command: Sequence[str], *, title: str,
                  workdir: str | Path = ".") -> ResultFile:
    """Run ``command`` in ``workdir`` and record what it printed (stdout), its wall time, the
    machine and the commit of this checkout as a results file at ``path``."""
    commit = current_commit()
    if commit is None:
        raise DataError("record: not a git checkout, so the commit cannot be named")
    machine = machine_line()
    start = time.perf_counter()
    done = subprocess.run(list(command), cwd=workdir, stdout=subprocess.PIPE, text=True,
                          check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise DataError(f"record: {shlex.join(command)} exited with {done.returncode}")
    return write_result(path, {
        "title": title, "command": shlex.join(command), "commit": commit,
        "output": done.stdout.rstrip("\n").split("\n"),
        "figures": {"wall_seconds": round(seconds, 2), "machine": machine}})
