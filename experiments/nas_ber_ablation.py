"""Choose the BER variant and lambda_0 on digits VALIDATION data (never on the NB201 table).

For every candidate (variant, schedule, lambda_0) and seed: a search at the default
digits budget, then the derived cell retrained from scratch on the train half and
scored on the val half (`eval_on="val"`; the test split is not touched). The
candidate kept as `ber` has the best mean val accuracy among those whose search
committed (final mean edge entropy at least 0.1 below log 5). The NB201 table is
not read here.

    python experiments/nas_ber_ablation.py --out runs/ber_ablation [--shard 0/2]

Run shards in parallel processes, then once more without --shard to aggregate.
Writes ablation.json and ablation.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import torch

from genlab.core.report import markdown_table
from genlab.nas.bench import retrain_once, search_once
from genlab.nas.retrain import RetrainConfig
from genlab.nas.search import SearchConfig

CANDIDATES = [  # (variant, schedule, lambda_0)
    ("ber-kl", "down", 0.3), ("ber-kl", "down", 1.0), ("ber-kl", "down", 3.0),
    ("ber-kl", "up", 1.0), ("ber-batch", "down", 1.0),
]
COMMIT_MARGIN = 0.1


def job_name(variant, schedule, lam, seed):
    return f"{variant}-{schedule}-{lam:g}-s{seed}"


def run_job(out: Path, variant, schedule, lam, seed, steps, retrain_epochs) -> dict:
    name = job_name(variant, schedule, lam, seed)
    scfg = replace(SearchConfig(), reg=variant, reg_schedule=schedule, reg_strength=lam,
                   seed=seed, steps=steps, hessian_points=0, nb201_table=None)
    s = search_once(scfg, out / "search" / name)
    rcfg = RetrainConfig(arch=s["genotype"], epochs=retrain_epochs, seed=seed, eval_on="val")
    r = retrain_once(rcfg, out / "retrain" / name)
    return {"variant": variant, "schedule": schedule, "lambda_0": lam, "seed": seed,
            "genotype": s["genotype"], "mean_entropy": s["mean_entropy"],
            "param_free_ops": s["param_free_ops"], "val_acc": r["val_acc"]}


def aggregate(records: list[dict]) -> tuple[list[dict], dict | None]:
    rows = []
    for (v, sch, lam), grp in itertools.groupby(
            sorted(records, key=lambda r: (r["variant"], r["schedule"], r["lambda_0"])),
            key=lambda r: (r["variant"], r["schedule"], r["lambda_0"])):
        grp = list(grp)
        acc = [g["val_acc"] for g in grp]
        ent = statistics.fmean(g["mean_entropy"] for g in grp)
        rows.append({"variant": v, "schedule": sch, "lambda_0": lam, "seeds": len(grp),
                     "entropy": ent, "p-free": statistics.fmean(g["param_free_ops"] for g in grp),
                     "val_acc": statistics.fmean(acc),
                     "val_std": statistics.stdev(acc) if len(acc) > 1 else 0.0,
                     "committed": ent < math.log(5) - COMMIT_MARGIN})
    eligible = [r for r in rows if r["committed"]]
    best = max(eligible, key=lambda r: r["val_acc"]) if eligible else None
    return rows, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/ber_ablation"))
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--steps", type=int, default=SearchConfig().steps)
    ap.add_argument("--retrain-epochs", type=int, default=15)
    ap.add_argument("--shard", default=None, help="i/n: run every n-th job starting at i")
    args = ap.parse_args()
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = [(*c, s) for c in CANDIDATES for s in seeds]
    if args.shard:
        i, n = (int(v) for v in args.shard.split("/"))
        jobs = jobs[i::n]
    args.out.mkdir(parents=True, exist_ok=True)
    records = [run_job(args.out, *job, args.steps, args.retrain_epochs) for job in jobs]
    if args.shard:
        return
    rows, best = aggregate(records)
    result = {"records": records, "rows": rows, "chosen": best, "steps": args.steps,
              "retrain_epochs": args.retrain_epochs, "rule": "max mean val_acc among committed"}
    (args.out / "ablation.json").write_text(json.dumps(result, indent=2))
    md = markdown_table(rows, digits=3) + (
        f"\nChosen as `ber`: {best['variant']} schedule={best['schedule']} "
        f"lambda_0={best['lambda_0']:g}\n" if best else "\nNo candidate committed.\n")
    (args.out / "ablation.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
