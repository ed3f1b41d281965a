"""When a court row's cells turn parameter-free: its searches' argmax through the budget.

For each search of the given rows in a `genlab nas bench` folder (the tuning searches and
the report searches), the parameter-free and skip edges of alpha's argmax and the mean edge
entropy at the logged step nearest each fraction of the budget; then the row's mean at each
fraction. Reads only:

    python experiments/nas_court_curves.py runs/court/nb201 --rows darts-minus,darts

Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

FRACTIONS = (0.125, 0.25, 0.5, 0.75, 1.0)


def curve(folder: Path) -> list[dict]:
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    last = records[-1]["step"]
    out = []
    for f in FRACTIONS:
        near = min(records, key=lambda r: abs(r["step"] - f * last))
        out.append({"step": near["step"], "p_free": near["param_free_ops"],
                    "skip": near["skip_ops"], "entropy": near["mean_entropy"]})
    return out


def row_searches(bench: Path, row: str) -> list[Path]:
    """The row's finished searches: its tuning settings' and its report seeds'."""
    found = [p for p in sorted((bench / "search").iterdir())
             if (p.name.startswith(f"tune-{row}-t") or p.name.rsplit("-s", 1)[0] == row)
             and (p / "summary.json").is_file()]
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench", type=Path)
    ap.add_argument("--rows", required=True)
    args = ap.parse_args()
    head = ("| row | searches | " + " | ".join(
        f"p-free / skip edges, entropy at {f:g} of the budget" for f in FRACTIONS) + " |\n"
        + "|---" * (2 + len(FRACTIONS)) + "|\n")
    lines = []
    for row in args.rows.split(","):
        curves = [curve(p) for p in row_searches(args.bench, row)]
        if not curves:
            lines.append(f"| {row} | 0 |" + " - |" * len(FRACTIONS))
            continue
        cells = []
        for k in range(len(FRACTIONS)):
            pf = statistics.fmean(c[k]["p_free"] for c in curves)
            sk = statistics.fmean(c[k]["skip"] for c in curves)
            en = statistics.fmean(c[k]["entropy"] for c in curves)
            cells.append(f"{pf:.1f} / {sk:.1f}, {en:.3f}")
        lines.append(f"| {row} | {len(curves)} | " + " | ".join(cells) + " |")
    print(head + "\n".join(lines))


if __name__ == "__main__":
    main()
