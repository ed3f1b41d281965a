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

    python experiments/nas_proxy_choice.py [--docs docs/nas_proxy] [--results FILE]

A candidate whose stage 2 is partial gets the highest method tau its missing searches could
give (every missing seed's cell anywhere from 0 to 100 %): when that bound lies below a
complete candidate's tau, the court's stand-in is known before the partial one ends.

With ``--results`` the figures are also written as a results file (genlab.core.results:
each candidate's taus as recorded intervals, the choice as text), which the pages' claims
read.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from genlab.core.report import markdown_table
from genlab.core.results.files import current_commit, write_result
from genlab.core.storage.rows import read_rows
from genlab.nas.bench.records import read_records
from genlab.nas.bench.report import COLLAPSED_PFREE, aggregate
from genlab.nas.fidelity.train import CELLS, FIELDS, FidelityConfig, fidelity_report, planned
from genlab.nas.methods.reported import REPORTED_NB201, reachable_tau, standing
from genlab.nas.spaces import resolve_table

# stage 1's five candidates (the protocol's); digits is the reference, in stage 2 whatever
# stage 1 says
CANDIDATES = ("digits", "digits-clutter", "shapes16", "shapes32", "digits-deep")
REFERENCE = "digits"
COLLAPSE_SEEDS = 3  # DARTS collapses in at least this many of its seeds
KEEPS_EDGES = 1.0  # DrNAS and beta-DARTS keep at most this many parameter-free edges on average
SEEDS = 5  # stage 2's seeds per method


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
    methods = [m for m in REPORTED_NB201 if m != "optimum"]
    complete = all(len(per_seed.get(m, [])) >= SEEDS for m in methods)
    return {"searches": f"{len(records)} of {SEEDS * len(methods)}", "rank": rank,
            "collapsed": f"{collapsed} of {len(darts)}",
            "collapses": collapsed >= COLLAPSE_SEEDS, "keep": keep,
            "keeps": bool(keep) and max(keep) <= KEEPS_EDGES, "complete": complete,
            "missing": SEEDS * len(methods) - len(records),
            "bound": None if complete else reachable_tau(per_seed, methods, SEEDS)}


def interval(value: dict, key: str, n: int, test: str) -> dict:
    """A recorded interval of the results file ({effect, low, high, n, test})."""
    return {"effect": value[key], "low": value["low"], "high": value["high"], "n": n,
            "test": test}


def none_can_pass(one: dict) -> bool:
    """Every stage-1 candidate complete and none passing the cell criterion: no proxy can be
    chosen, whatever stage 2 finds."""
    return all(n in one and one[n]["complete"] and not one[n]["cells_pass"] for n in CANDIDATES)


def proxy_label(one: dict, two: dict, name: str = REFERENCE) -> str:
    """The words every NAS verdict of the README carries: the proxy it was measured on
    (``name``: the reference, digits, or the court's stand-in) with its taus against NB201's
    CIFAR-10, and whether it holds there only."""
    s1, s2 = one.get(name), two.get(name)
    if s1 is None:
        return f"measured on the {name} proxy, not yet calibrated"
    taus = f"cells tau {s1['tau']['tau']:.2f}"
    if s2 and s2["complete"] and s2["rank"]:
        taus += f", methods tau {s2['rank']['tau']:.2f}"
    if none_can_pass(one):
        return (f"holds on the {name} proxy only ({taus} against NB201's CIFAR-10; no "
                "candidate stand-in passes the calibration)")
    return f"measured on the {name} proxy ({taus}; its calibration is under way)"


def stage2_candidates(one: dict) -> list[str]:
    """Stage 2's candidates: the reference and the two other stage-1 candidates with the
    highest tau over the 200 cells."""
    best = sorted((n for n in CANDIDATES if n != REFERENCE), key=lambda n: -one[n]["tau"]["tau"])
    return [REFERENCE, *best[:2]]


def stand_in(one: dict, two: dict) -> str | None:
    """The court's stand-in when no candidate passes: the stage-2 candidate with the highest
    method tau, once it is known (every stage-2 candidate complete, or the partial ones unable
    to reach it); None before."""
    if not none_can_pass(one):
        return None
    candidates = stage2_candidates(one)
    done = [n for n in candidates if n in two and two[n]["complete"] and two[n]["rank"]]
    if not done:
        return None
    top = max(done, key=lambda n: two[n]["rank"]["tau"])
    rest = [n for n in candidates if n not in done]
    if all(n in two and two[n]["bound"] is not None
           and two[n]["bound"] < two[top]["rank"]["tau"] for n in rest):
        return top
    return None


def figures(one: dict, two: dict, choice: str) -> dict:
    """The results file's figures: per candidate its taus and criteria, the choice and the
    proxy label of the README's NAS verdicts."""
    out: dict = {"choice": choice, "proxy_label": proxy_label(one, two)}
    if (court := stand_in(one, two)) is not None:
        out["stand_in"] = court
        out["stand_in_label"] = proxy_label(one, two, court)
    for n, s1 in one.items():
        out[f"{n}_cell_tau"] = interval(s1["tau"], "tau", s1["tau"]["cells"],
                                        "bootstrap over cells, 95%")
        out[f"{n}_minus_params"] = interval(s1["minus_params"], "delta tau",
                                            s1["minus_params"]["cells"],
                                            "paired bootstrap over cells, 95%")
        out[f"{n}_stage1"] = s1["trainings"]
    for n, s2 in two.items():
        if s2["rank"] and "low" in s2["rank"]:
            out[f"{n}_method_tau"] = interval(s2["rank"], "tau", len(s2["rank"]["rows"]),
                                              "bootstrap over seeds, 90%")
        out[f"{n}_darts_collapsed"] = s2["collapsed"]
        if s2.get("bound") is not None:
            out[f"{n}_method_tau_bound"] = round(s2["bound"], 4)
    return out


def choice_lines(one: dict, two: dict) -> list[str]:
    """The choice in words, by the protocol's rule: stage 2's candidates, whether any proxy can
    be chosen, and which one (or the court's stand-in when none passes)."""
    lines, stage2_set = [], []
    if all(n in one and one[n]["complete"] for n in CANDIDATES):
        stage2_set = stage2_candidates(one)
        lines.append(f"Stage 2's candidates (the two best by tau over the 200, and "
                     f"{REFERENCE}): {', '.join(stage2_set[1:])}.")
    else:
        lines.append("Stage 1 is not complete: stage 2's candidates are not chosen yet.")
    if none_can_pass(one):
        lines.append("No stage-1 candidate passes the cell criterion, so none can be chosen: "
                     "every NAS verdict holds on the proxy only.")
    if not stage2_set or not all(n in two and two[n]["complete"] for n in stage2_set):
        if not none_can_pass(one):
            lines.append("Stage 2 is not complete: no proxy is chosen yet.")
        else:
            lines.append(stand_in_known(one, two) or
                         "Stage 2 is not complete: the court's stand-in, the candidate with "
                         "the highest method-level tau, is not known yet.")
    elif eligible := [n for n in stage2_set if one[n]["cells_pass"] and two[n]["collapses"]]:
        chosen = max(eligible, key=lambda n: two[n]["rank"]["tau"])
        lines.append(f"The chosen proxy: {chosen} (method tau "
                     f"{two[chosen]['rank']['tau']:.2f}).")
    else:
        best_rank = max(stage2_set, key=lambda n: two[n]["rank"]["tau"])
        lines.append(f"No candidate passes both criteria: the court runs on {best_rank}, the "
                     "highest method-level tau, and every NAS verdict holds on the proxy only.")
    return lines


def stand_in_known(one: dict, two: dict) -> str | None:
    """With stage 2 partial: the court's stand-in in words, with the partial candidates'
    highest reachable taus, when they cannot reach it (``stand_in``); else None."""
    court = stand_in(one, two)
    if court is None:
        return None
    rest = "; ".join(f"{n}'s cannot exceed {s['bound']:.2f}, whatever its {s['missing']} "
                     "missing searches give" for n, s in two.items() if not s["complete"])
    return (f"Stage 2 is not complete, but the court's stand-in is known: {court}, the highest "
            f"method-level tau ({two[court]['rank']['tau']:.2f}); {rest}.")


def ci(value: dict, key: str = "tau") -> str:
    return f"{value[key]:.3f} [{value['low']:.3f}, {value['high']:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", default="docs/nas_proxy", type=Path)
    parser.add_argument("--results", type=Path, help="also write the figures here")
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
            "stage-2 searches": "-" if not s2 else s2["searches"],
            "method tau": "-" if not rank else (f"{rank['tau']:.2f} [{rank['low']:.2f}, "
                                                 f"{rank['high']:.2f}]" if "low" in rank
                                                 else f"{rank['tau']:.2f}")
            + ("" if not s2 or s2["complete"] else " (partial)" if s2["bound"] is None
               else f" (partial; at most {s2['bound']:.2f})"),
            "DARTS collapsed seeds": "-" if not s2 else s2["collapsed"],
            "DrNAS / beta p-free": "-" if not (s2 and s2["keep"]) else
            " / ".join(f"{k:.1f}" for k in s2["keep"]),
        })
    columns = list(max(table, key=len))
    print(markdown_table([{c: r.get(c, "-") for c in columns} for r in table]))
    lines = choice_lines(one, two)
    print("\n" + "\n".join(lines))
    if args.results:
        commit = current_commit()
        if commit is None:
            raise SystemExit("--results: not run from a git checkout (a results file names "
                             "the commit that made it)")
        write_result(args.results, {
            "title": "The proxy choice of docs/nas_proxy.md: each candidate's taus and criteria",
            "command": f"python experiments/nas_proxy_choice.py --docs {docs} --results "
                       f"{args.results}", "commit": commit,
            "figures": figures(one, two, " ".join(lines))})


if __name__ == "__main__":
    main()
