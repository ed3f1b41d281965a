"""The proxy choice of docs/nas_proxy.md, printed from the committed files by its fixed rule.

Stage 1 (each docs/nas_proxy/stage1/NAME: config.json, cells.csv): the candidate's tau over
the 200 cells against NB201's CIFAR-10 and the paired difference with the parameter count
(the cell criterion: that difference's interval above 0), and whether its trainings are all
in. Stage 2 (each docs/nas_proxy/stage2/NAME: runs.csv): the method-level tau against the six
published figures with its bootstrap interval over seeds, DARTS' collapsed seeds (at least 4
of 6 edges parameter-free; the criterion: at least 3 of 5) and DrNAS' and beta-DARTS' mean
parameter-free edges. The choice: among the candidates that pass both criteria, the highest
method-level tau; the two best stage-1 candidates by tau over the 200 (besides the digits
reference) are the ones stage 2 runs.

    python experiments/nas_proxy_choice.py [--docs docs/nas_proxy]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from genlab.core.report import markdown_table
from genlab.core.storage.rows import read_rows
from genlab.nas.bench.records import read_records
from genlab.nas.bench.report import COLLAPSED_PFREE, aggregate
from genlab.nas.fidelity.train import CELLS, FIELDS, FidelityConfig, fidelity_report, planned
from genlab.nas.methods.reported import REPORTED_NB201, standing
from genlab.nas.spaces import resolve_table

# stage 1's five candidates (the protocol's); digits is the reference, in stage 2 whatever
# stage 1 says
CANDIDATES = ("digits", "digits-clutter", "shapes16", "shapes32", "digits-deep")
REFERENCE = "digits"
COLLAPSE_SEEDS = 3  # DARTS collapses in at least this many of its seeds
KEEPS_EDGES = 1.0  # DrNAS and beta-DARTS keep at most this many parameter-free edges on average


def stage1(folder: Path, draw: Path, scores: Path) -> dict:
    """One candidate's stage-1 figures from its committed files."""
    config = json.loads((folder / "config.json").read_text())
    cfg = FidelityConfig(**{k: v for k, v in config.items() if k != "genlab_version"})
    rows = read_rows(folder / CELLS, FIELDS)
    report = fidelity_report(rows, resolve_table(str(draw)), str(scores))
    tau = next(t for t in report["taus"]
               if t["group"] == "all" and t["ranking"].startswith("proxy ("))
    diff = next(p for p in report["paired"]
                if p["group"] == "all" and p["difference"] == "proxy - parameter count")
    return {"trainings": f"{len(rows)} of {len(planned(cfg))}",
            "complete": len(rows) == len(planned(cfg)),
            "tau": tau, "minus_params": diff, "cells_pass": diff["low"] > 0}


def stage2(folder: Path) -> dict:
    """One candidate's stage-2 figures from its committed runs.csv."""
    records = list(read_records(folder / "runs.csv").values())
    rows = sorted({r["reg"] for r in records})
    per_seed = {row: [r["cifar10"] for r in records if r["reg"] == row] for row in rows}
    rank = standing(aggregate(records, rows), per_seed)
    pfree = {row: [r["param_free_ops"] for r in records if r["reg"] == row] for row in rows}
    darts = pfree.get("darts", [])
    collapsed = sum(p >= COLLAPSED_PFREE for p in darts)
    keep = [statistics.fmean(pfree[m]) for m in ("drnas", "beta") if pfree.get(m)]
    complete = all(len(per_seed.get(m, [])) >= 5 for m in REPORTED_NB201 if m != "optimum")
    return {"rank": rank, "collapsed": f"{collapsed} of {len(darts)}",
            "collapses": collapsed >= COLLAPSE_SEEDS, "keep": keep,
            "keeps": bool(keep) and max(keep) <= KEEPS_EDGES, "complete": complete}


def ci(value: dict, key: str = "tau") -> str:
    return f"{value[key]:.3f} [{value['low']:.3f}, {value['high']:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", default="docs/nas_proxy", type=Path)
    args = parser.parse_args()
    docs = args.docs
    names = [n for n in CANDIDATES if (docs / "stage1" / n / CELLS).exists()]
    one = {n: stage1(docs / "stage1" / n, docs / "nb201_draw.csv", docs / "scores" / "scores.csv")
           for n in names}
    two = {n: stage2(docs / "stage2" / n) for n in names
           if (docs / "stage2" / n / "runs.csv").exists()}
    table = []
    for n in CANDIDATES:
        if n not in one:
            table.append({"candidate": n, "stage-1 trainings": "not started"})
            continue
        s1, s2 = one[n], two.get(n)
        rank = s2 and s2["rank"]
        table.append({
            "candidate": n, "stage-1 trainings": s1["trainings"],
            "cell tau (200)": ci(s1["tau"]),
            "minus parameter count": ci(s1["minus_params"], "delta tau"),
            "cell criterion": "not read (partial)" if not s1["complete"]
            else "passes" if s1["cells_pass"] else "misses",
            "method tau": "-" if not rank else (f"{rank['tau']:.2f} [{rank['low']:.2f}, "
                                                 f"{rank['high']:.2f}]" if "low" in rank
                                                 else f"{rank['tau']:.2f}"),
            "DARTS collapsed seeds": "-" if not s2 else s2["collapsed"],
            "DrNAS / beta p-free": "-" if not (s2 and s2["keep"]) else
            " / ".join(f"{k:.1f}" for k in s2["keep"]),
        })
    columns = list(max(table, key=len))
    print(markdown_table([{c: r.get(c, "-") for c in columns} for r in table]))
    if all(n in one and one[n]["complete"] for n in CANDIDATES):
        best = sorted((n for n in CANDIDATES if n != REFERENCE),
                      key=lambda n: -one[n]["tau"]["tau"])[:2]
        print(f"\nStage 2's candidates (the two best by tau over the 200, and {REFERENCE}): "
              f"{', '.join(best)}.")
    else:
        print("\nStage 1 is not complete: stage 2's candidates are not chosen yet.")
    finished = [n for n in two if two[n]["complete"]]
    eligible = [n for n in finished if one[n]["cells_pass"] and two[n]["collapses"]]
    if not finished or len(finished) < len(two):
        print("Stage 2 is not complete: no proxy is chosen yet.")
    elif eligible:
        chosen = max(eligible, key=lambda n: two[n]["rank"]["tau"])
        print(f"The chosen proxy: {chosen} (method tau {two[chosen]['rank']['tau']:.2f}).")
    else:
        best = max(finished, key=lambda n: two[n]["rank"]["tau"])
        print(f"No candidate passes both criteria: the court runs on {best}, the highest "
              "method-level tau, and every NAS verdict holds on the proxy only.")


if __name__ == "__main__":
    main()
