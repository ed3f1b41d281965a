"""Selection of BER: the protocol of docs/ber.md ("Selection protocol"), run for a grid of settings.

Every setting (candidate, strength) searches with the selection seeds 3, 4, 5 at the search
defaults; each derived cell is retrained twice (retrain seeds 0 and 1) on the selection proxy
with ``eval_on="val"`` (fit the train half, score the val half; the test split and the NB201
table are never read). Then, per setting:

- eligible: seed-mean final edge entropy < 1.3; seed-mean parameter-free edges <= 2; on the
  seed-mean alpha-Hessian eigenvalue curve, the largest value at steps >= 2/3 of the budget is
  <= 1.3 x the value measured nearest to half the budget;
- score: mean of the 3 x 2 validation accuracies; SE: std of the 3 per-search means / sqrt(3);
- ties with the best eligible score: difference < 2 sqrt(SE_best^2 + SE^2); broken by fewer
  mean parameter-free edges, then higher agreement across the three seeds, then higher score.

    python experiments/nas_ber_select.py --out runs/ber_select --grid ber-op:0.798,2.66,7.98 \
        --proxy digits --shard 0/2        # and 1/2 in parallel: searches, then retrainings
    python experiments/nas_ber_select.py --out runs/ber_select --grid ... --proxy digits
                                          # runs what is missing, writes selection.md/.json

Every search and retraining is its own run folder (finished ones reused, killed ones resumed).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from genlab.core.runs import atomic_write_bytes, read_json, write_json
from genlab.nas.bench import retrain_once, search_once
from genlab.nas.bench.report import cell_agreement
from genlab.nas.retrain import RetrainConfig
from genlab.nas.search import SearchConfig

SEEDS, RETRAIN_SEEDS = (3, 4, 5), (0, 1)
MAX_ENTROPY, MAX_PFREE, HESSIAN_GROWTH = 1.3, 2.0, 1.3


def parse_grid(text: str) -> list[tuple[str, float]]:
    """'ber-op:0.8,2.66;ber-lbe:10' -> [(reg, strength), ...]."""
    out = []
    for part in text.split(";"):
        reg, values = part.split(":")
        out += [(reg, float(v)) for v in values.split(",")]
    return out


def setting_name(reg: str, strength: float) -> str:
    return f"{reg}-l{strength:g}"


# The retraining proxies the selection scores settings with (name -> RetrainConfig budget):
# the two digits proxies measured by the 30-cell fidelity study of docs/ber.md; genlab nas
# fidelity (docs/nas_proxy.md) measures any proxy the same way.
PROXIES = {
    "digits": {"dataset": "digits", "size": 8, "channels": 16, "cells": 1, "epochs": 30},
    "digits-clutter": {"dataset": "digits-clutter", "size": 16, "channels": 8, "cells": 1,
                       "epochs": 20},
}


def search_one(out: Path, reg: str, strength: float, seed: int, hmin: float | None) -> dict:
    cfg = SearchConfig(reg=reg, reg_strength=strength, reg_schedule="constant", seed=seed,
                       reg_params={} if hmin is None else {"h_min": hmin})
    return search_once(cfg, out / "search" / f"{setting_name(reg, strength)}-s{seed}")


def retrain_one(out: Path, proxy: str, arch: str, name: str, seed: int) -> float:
    cfg = RetrainConfig(arch=arch, seed=seed, eval_on="val", **PROXIES[proxy])
    return retrain_once(cfg, out / "retrain" / proxy / f"{name}-r{seed}")["val_acc"]


def hessian_check(summaries: list[dict]) -> tuple[bool, float | None]:
    """Late growth of the seed-mean Hessian eigenvalue curve (the searches share its steps)."""
    curves = [s["history_hessian"] for s in summaries]
    steps = [st for st, _ in curves[0]]
    mean = [statistics.fmean(c[i][1] for c in curves) for i in range(len(steps))]
    budget = summaries[0]["steps"]
    mid = min(range(len(steps)), key=lambda i: abs(steps[i] - budget / 2))
    late = [v for st, v in zip(steps, mean, strict=True) if st >= 2 * budget / 3]
    growth = max(late) / mean[mid] if late and mean[mid] > 0 else None
    return growth is not None and growth <= HESSIAN_GROWTH, growth


def hessian_history(folder: Path) -> list[tuple[int, float]]:
    rows = [json.loads(ln) for ln in (folder / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["hessian_eig"]) for r in rows if r.get("hessian_eig") is not None]


def finished(out: Path, reg: str, strength: float, seed: int) -> bool:
    return (out / "search" / f"{setting_name(reg, strength)}-s{seed}" / "summary.json").exists()


def evaluate(out: Path, proxy: str, reg: str, strength: float, hmin: float | None,
             finished_only: bool = False, score_eligible_only: bool = False) -> dict:
    """One row of the selection table. ``finished_only``: use the finished searches only; a
    setting with fewer than 3 is ineligible when its finished seeds alone already exceed the
    parameter-free budget (a 3-seed mean <= 2 needs a sum <= 6), else undecided (None).
    ``score_eligible_only``: retrain (score) only the settings that are not ineligible (the
    score decides among eligible settings only); the others get no score."""
    name = setting_name(reg, strength)
    seeds = [sd for sd in SEEDS if not finished_only or finished(out, reg, strength, sd)]
    summaries = []
    for seed in seeds:
        s = search_one(out, reg, strength, seed, hmin)
        s["history_hessian"] = hessian_history(out / "search" / f"{name}-s{seed}")
        summaries.append(s)
    entropy = statistics.fmean(s["mean_entropy"] for s in summaries)
    pfree = statistics.fmean(s["param_free_ops"] for s in summaries)
    hess_ok, growth = hessian_check(summaries)
    eligible = entropy < MAX_ENTROPY and pfree <= MAX_PFREE and hess_ok
    if len(seeds) < len(SEEDS):
        over = sum(s["param_free_ops"] for s in summaries) > MAX_PFREE * len(SEEDS)
        eligible = False if over else None
    per_search = []
    if not (score_eligible_only and eligible is False):
        per_search = [statistics.fmean(retrain_one(out, proxy, s["genotype"], f"{name}-s{sd}", r)
                                       for r in RETRAIN_SEEDS)
                      for sd, s in zip(seeds, summaries, strict=True)]
    return {"setting": name, "reg": reg, "strength": strength, "h_min": hmin,
            "seeds": seeds, "p_free_per_seed": [s["param_free_ops"] for s in summaries],
            "entropy": entropy, "p_free": pfree, "hessian_growth": growth,
            "eligible": eligible,
            "score": statistics.fmean(per_search) if per_search else None,
            "se": (statistics.stdev(per_search) / math.sqrt(len(per_search))
                   if len(per_search) > 1 else float("nan")),
            "agreement": cell_agreement([s["genotype"] for s in summaries]),
            "genotypes": [s["genotype"] for s in summaries], "per_search": per_search}


def choose(rows: list[dict]) -> dict | None:
    """The protocol's winner among eligible settings (None when none is eligible)."""
    eligible = [r for r in rows if r["eligible"] is True]
    if not eligible:
        return None
    best = max(eligible, key=lambda r: r["score"])
    tied = [r for r in eligible
            if best["score"] - r["score"] < 2 * math.sqrt(best["se"] ** 2 + r["se"] ** 2)]
    return min(tied, key=lambda r: (r["p_free"], -(r["agreement"] or 0), -r["score"]))


def markdown(rows: list[dict], winner: dict | None, proxy: str) -> str:
    lines = [f"Selection seeds {list(SEEDS)}, proxy `{proxy}` (val accuracy %, retrain seeds "
             f"{list(RETRAIN_SEEDS)}).", "",
             "| setting | seeds | entropy | p-free (per seed) | Hessian late/mid | eligible "
             "| score | SE | agreement |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g = "-" if r["hessian_growth"] is None else f"{r['hessian_growth']:.2f}"
        elig = "undecided" if r["eligible"] is None else r["eligible"]
        score = "not scored" if r["score"] is None else f"{r['score']:.2f}"
        lines.append(f"| {r['setting']} | {r['seeds']} | {r['entropy']:.3f} | {r['p_free']:.2f} "
                     f"({r['p_free_per_seed']}) | {g} | {elig} | {score} | "
                     f"{r['se']:.2f} | {(r['agreement'] or 0):.2f} |")
    lines += ["", f"Winner: {winner['setting'] if winner else 'none eligible'}", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--grid", required=True, help="reg:s1,s2,...;reg2:...")
    ap.add_argument("--proxy", default=None, help="retraining proxy (PROXIES); "
                                                  "without it only the searches run")
    ap.add_argument("--hmin", type=float, default=None)
    ap.add_argument("--shard", default=None, help="i/n: run every n-th job only, no aggregate")
    ap.add_argument("--score-eligible-only", action="store_true",
                    help="retrain only settings that are not already ineligible")
    ap.add_argument("--finished-only", action="store_true",
                    help="start no search: use (and retrain) the finished searches only")
    args = ap.parse_args()
    grid = parse_grid(args.grid)
    jobs = [(reg, st, seed) for reg, st in grid for seed in SEEDS]
    if args.shard:
        i, n = (int(v) for v in args.shard.split("/"))
        mine = [j for j in jobs[i::n] if not args.finished_only or finished(args.out, *j)]
        for reg, st, seed in mine:
            search_one(args.out, reg, st, seed, args.hmin)
        if args.proxy and not args.score_eligible_only:  # else the aggregate scores
            for reg, st, seed in mine:
                name = f"{setting_name(reg, st)}-s{seed}"
                arch = read_json(args.out / "search" / name / "summary.json")["genotype"]
                for r in RETRAIN_SEEDS:
                    retrain_one(args.out, args.proxy, arch, name, r)
        return
    if not args.proxy:
        raise SystemExit("--proxy is needed to score the settings")
    rows = [evaluate(args.out, args.proxy, reg, st, args.hmin, args.finished_only,
                     args.score_eligible_only) for reg, st in grid]
    winner = choose(rows)
    write_json(args.out / "selection.json", {"proxy": args.proxy, "rows": rows,
                                              "winner": winner and winner["setting"]})
    atomic_write_bytes(args.out / "selection.md", markdown(rows, winner, args.proxy).encode())
    print(markdown(rows, winner, args.proxy))


if __name__ == "__main__":
    main()
