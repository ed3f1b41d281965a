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

    genlab nas ber-select --out runs/ber_select --grid 'ber-op:0.798,2.66,7.98' \
        --proxy digits --shard 0/2 [--resume]   # and 1/2 in parallel: searches, retrainings
    genlab nas ber-select --out runs/ber_select --grid ... --proxy digits --resume
                                                # runs what is missing, writes selection.md/.json

Every search and retraining is its own run folder (finished ones reused, killed ones
resumed), so a study folder is always continued; shards share it.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from genlab.core.errors import ConfigError
from genlab.core.options import option
from genlab.core.runs import atomic_write_bytes, read_json, write_json
from genlab.core.studies import Study, register_study
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
        reg, sep, values = part.partition(":")
        try:
            if not (reg and sep):
                raise ValueError(part)
            out += [(reg, float(v)) for v in values.split(",")]
        except ValueError:
            raise ConfigError(f"--grid {text!r}: expected REG:S1,S2,...;REG2:... (a penalty, "
                              "then its strengths)") from None
    return out


def parse_shard(text: str) -> tuple[int, int]:
    """'i/n' -> (i, n) with 0 <= i < n."""
    try:
        i, n = (int(v) for v in text.split("/"))
        if not 0 <= i < n:
            raise ValueError(text)
    except ValueError:
        raise ConfigError(f"--shard {text!r}: expected I/N with 0 <= I < N") from None
    return i, n


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


@dataclass
class SelectConfig:
    """The options of `genlab nas ber-select`."""

    grid: str = option(None, required=True, help="The settings: REG:S1,S2,...;REG2:... (a "
                       "penalty, then its strengths).")
    proxy: str | None = option(None, choices=tuple(PROXIES), help="The retraining proxy that "
                               "scores the settings; without it only the searches run.")
    hmin: float | None = option(None, help="ber-lbe's h_min (the floor of its node targets).")
    shard: str | None = option(None, help="I/N: run every N-th job from I (searches, then "
                               "retrainings), no aggregate; the shards run in parallel.")
    score_eligible_only: bool = option(False, help="Retrain only the settings that are not "
                                       "already ineligible.")
    finished_only: bool = option(False, help="Start no search: use (and retrain) the finished "
                                 "searches only.")


def run_shard(cfg: SelectConfig, out: Path) -> dict:
    """One shard's searches (and, with a proxy, retrainings); no aggregate."""
    i, n = parse_shard(cfg.shard)
    jobs = [(reg, st, seed) for reg, st in parse_grid(cfg.grid) for seed in SEEDS]
    mine = [j for j in jobs[i::n] if not cfg.finished_only or finished(out, *j)]
    for reg, st, seed in mine:
        search_one(out, reg, st, seed, cfg.hmin)
    if cfg.proxy and not cfg.score_eligible_only:  # else the aggregate scores
        for reg, st, seed in mine:
            name = f"{setting_name(reg, st)}-s{seed}"
            arch = read_json(out / "search" / name / "summary.json")["genotype"]
            for r in RETRAIN_SEEDS:
                retrain_one(out, cfg.proxy, arch, name, r)
    return {"shard": cfg.shard, "jobs": len(mine)}


def run_select(cfg: SelectConfig, out: str | Path, *, resume: bool = False) -> dict:
    """The selection (a shard of it with ``cfg.shard``); the folder is always continued."""
    out = Path(out)
    grid = parse_grid(cfg.grid)
    if cfg.shard:
        return run_shard(cfg, out)
    if not cfg.proxy:
        raise ConfigError("--proxy is needed to score the settings (or run a --shard)")
    rows = [evaluate(out, cfg.proxy, reg, st, cfg.hmin, cfg.finished_only,
                     cfg.score_eligible_only) for reg, st in grid]
    winner = choose(rows)
    summary = {"proxy": cfg.proxy, "rows": rows, "winner": winner and winner["setting"]}
    write_json(out / "selection.json", summary)
    atomic_write_bytes(out / "selection.md", markdown(rows, winner, cfg.proxy).encode())
    return summary


def report(summary: dict, cfg: SelectConfig) -> list:
    if "shard" in summary:
        return [f"shard {summary['shard']}: {summary['jobs']} searches done"]
    winner = next((r for r in summary["rows"] if r["setting"] == summary["winner"]), None)
    return [markdown(summary["rows"], winner, summary["proxy"])]


STUDY = register_study(Study("ber-select", SelectConfig, run_select, report))
