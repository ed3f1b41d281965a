"""`genlab demo`: each method's main job on embedded data, one report (report.html / .md)."""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from pathlib import Path

import typer

from genlab.cli.options import closing
from genlab.core.options import check_options, option

# (section key, module with demo_section, title)
SECTIONS = [
    ("nas", "genlab.nas.demo", "BER architecture search"),
    ("transfer", "genlab.nas.transfer.detection.demo", "A searched cell as a detection backbone"),
    ("optim", "genlab.optim.demo", "Nonuniformity"),
    ("gaze", "genlab.gaze.demo", "MoEGaze"),
]


def timing_reading(timings: list[dict]) -> str:
    """The timing table's reading: the total and the longest section."""
    if not timings:
        return "No section ran."
    longest = max(timings, key=lambda t: t["seconds"])
    total = sum(t["seconds"] for t in timings)
    return (f"{len(timings)} section(s) in {total:.0f} s; the longest: {longest['section']} "
            f"({longest['seconds']:.0f} s).")


@dataclass
class DemoConfig:
    """The options of `genlab demo`."""

    out: str = option("runs/demo", help="Output folder of the demo report.")
    nb201_table: str | None = option(None, help="NB201 accuracy CSV to judge searched cells.")
    only: list[str] = option(factory=list, parse="list", choices=[k for k, _, _ in SECTIONS],
                             help="Sections to run (default: all).")
    full: bool = option(False, help="Full budgets instead of the quick demo ones.")


def demo(cfg: DemoConfig) -> None:
    """Run every method on embedded data (digits, rendered eyes) and write one report."""
    from genlab.core.report import Report

    check_options(cfg)
    out, wanted = Path(cfg.out), set(cfg.only) or {k for k, _, _ in SECTIONS}
    out.mkdir(parents=True, exist_ok=True)
    report = Report("genlab demo")
    report.text("Every figure below was produced by `genlab demo` on embedded data; rerun it to "
                "reproduce them. Sub-run folders hold config.json, metrics.jsonl and plots.")
    timings = []
    for key, module, title in SECTIONS:
        if key not in wanted:
            continue
        t0 = time.perf_counter()
        typer.echo(f"== {title} ==")
        section = importlib.import_module(module).demo_section
        kwargs = {"nb201_table": cfg.nb201_table} if key == "nas" else {}
        section(out / key, report, quick=not cfg.full, **kwargs)
        timings.append({"section": title, "seconds": time.perf_counter() - t0})
        report.write(out)  # keep a readable report after each section
    report.heading("Wall-clock time of this invocation per section (seconds; runs that an "
                   "earlier invocation finished are reused, not rerun)")
    report.table(timings, digits=0)
    report.reading(timing_reading(timings))
    path = report.write(out)
    typer.echo(f"report: {path} (and {out / 'report.md'})")
    closing(out)
