"""MoEGaze variants chosen on held-out *source* subjects of the appearance world.

Each variant is trained on a source of the appearance-routing world (default app-e) for
several seeds, paired by seed with the baseline, and judged only on the held-out source
subjects (no target is rendered: the test set of every run is another population of the
source domain). Reported per variant: held-out source error, the seed-paired difference
to the baseline with its 95% bootstrap interval, and the router's selectivity for the
true appearance cluster (normalised mutual information between top-1 expert and
cluster; cluster purity; mean max weight). The oracle (one expert per true cluster) is
the upper reference of what routing can gain.

    python experiments/gaze_moe_variants.py --out runs/bench    # ~15 CPU-minutes
    python experiments/gaze_moe_variants.py --out runs/bench --variants 0,1,9   # a subset

``--variants`` picks rows by their index in VARIANTS (run folders keep the index, so a
subset reuses finished runs of a full invocation and vice versa).

Writes DIR/gaze_moe_variants.json and .md (a subset: gaze_moe_variants_0-1-9.json ...);
run folders in DIR/gaze_moe_variants/.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from genlab.core.report import markdown_table
from genlab.core.runs import write_json
from genlab.gaze.protocol import SyntheticCache
from genlab.gaze.studies.runs import run_study, train_spec
from genlab.gaze.studies.stats import Cell, Draws, fmt_ci, paired
from genlab.gaze.train import GazeTrainConfig

VARIANTS = {
    "baseline": {"model": "baseline"},
    "moegaze (default)": {},
    "re-fit router at 30%": {"reinit_router_at": 0.3},
    "temperature 0.02": {"temperature": 0.02},
    "gaze loss reaches appearance": {"appearance_grad": True},
    "hard-train-soft-infer": {"routing": "hard-train-soft-infer"},
    "oracle (true cluster)": {"routing": "oracle"},
    "gaze loss reaches the router": {"router_grad": True},
    "router from gaze loss only": {"router_grad": True, "appearance_weight": 0.0},
    "router learns residual groups at 30%": {"group_router_at": 0.3},
    "colour sub-datasets, own encoder": {"grouping": "colour", "router_input": "encoder"},
    "cross-fitted sub-datasets, own encoder": {"grouping": "crossfit",
                                               "router_input": "encoder"},
    "cross-fitted from colour start, own encoder": {"grouping": "crossfit",
                                                    "group_init": "colour",
                                                    "router_input": "encoder"},
    "cross-fitted sub-datasets, style router": {"grouping": "crossfit"},
    "own encoder, default training": {"router_input": "encoder"},
    "shared expert, default router": {"shared_expert": True},
    "shared expert, colour sub-datasets, own encoder": {"shared_expert": True,
                                                        "grouping": "colour",
                                                        "router_input": "encoder"},
    "oracle with the shared expert": {"routing": "oracle", "shared_expert": True},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--source", default="app-e")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds first..first+seeds-1 (selection seeds apart from a bench's)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--variants", default=None,
                    help="comma-separated indices into VARIANTS (default: all; 0 = baseline, "
                    "needed for the differences)")
    args = ap.parse_args()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    names = list(VARIANTS)
    pick = (range(len(names)) if args.variants is None
            else sorted({0, *(int(i) for i in args.variants.split(","))}))
    base = GazeTrainConfig(model="moegaze", source=args.source, targets=[args.source],
                           steps=args.steps, train_count=3000, test_count=200)
    folder = args.out / "gaze_moe_variants"
    cache = SyntheticCache(args.out / "gaze_moe_variants_data")
    specs = [train_spec(f"{i}_s{seed}", replace(base, seed=seed, **VARIANTS[names[i]]),
                        folder / f"{i}_s{seed}", cache=cache, plots=False)
             for seed in seeds for i in pick]
    results = run_study(specs, workers=args.workers, description="moegaze variants")
    per = {names[i]: [results[f"{i}_s{s}"] for s in seeds] for i in pick}
    cells = {n: Cell.from_runs([r["val"]["per_subject"] for r in rs], n) for n, rs in per.items()}
    draws = Draws.make(*cells["baseline"].m.shape, n_boot=2000)
    rows, default = [], cells.get("moegaze (default)")
    # sanity row: the constant predictor (the source training mean) on the same subjects
    constant = Cell.from_runs([r["val"]["constant"]["per_subject"] for r in per["baseline"]],
                              "constant")
    d = paired(cells["baseline"], constant, draws)
    rows.append({"variant": "constant (source training mean)",
                 "held-out source (deg)": constant.value,
                 "minus baseline [95%]": fmt_ci(d["diff"], d["diff_ci"], sign=True),
                 "minus default [95%]": "-", "expert-cluster NMI": None,
                 "cluster purity": None, "mean max weight": None,
                 "group-cluster NMI": None})
    for i in pick:
        name, rs = names[i], per[names[i]]
        d = paired(cells["baseline"], cells[name], draws)
        dd = paired(default, cells[name], draws) if default is not None else None
        router = [r["val"]["router"] for r in rs]
        mean = lambda k: float(np.mean([x[k] for x in router])) if router[0] else None  # noqa
        rows.append({"variant": name, "held-out source (deg)": cells[name].value,
                     "minus baseline [95%]": fmt_ci(d["diff"], d["diff_ci"], sign=True),
                     "minus default [95%]": fmt_ci(dd and dd["diff"], dd and dd["diff_ci"],
                                                   sign=True),
                     "expert-cluster NMI": mean("expert_cluster_nmi"),
                     "cluster purity": mean("cluster_purity"),
                     "mean max weight": mean("mean_max_weight"),
                     "group-cluster NMI": _group_nmi(folder, i, seeds)})
    md = (f"Held-out {args.source} subjects, seeds {','.join(map(str, seeds))}, "
          f"{args.steps} steps; "
          "differences paired by seed.\n\n" + markdown_table(rows, digits=3))
    print(md)
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.variants is None else "_" + "-".join(map(str, pick))
    write_json(args.out / f"gaze_moe_variants{suffix}.json", {"rows": rows, "source": args.source,
                                                     "seeds": seeds,
                                                     "steps": args.steps})
    (args.out / f"gaze_moe_variants{suffix}.md").write_text(md)


def _group_nmi(folder: Path, index: int, seeds: list[int]) -> float | None:
    """Mean over seeds of the final grouping's NMI with the true clusters (runs that group
    their subjects; the last such record of each run's metrics.jsonl)."""
    vals = []
    for seed in seeds:
        last = None
        for line in (folder / f"{index}_s{seed}" / "metrics.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if "group_cluster_nmi" in rec:
                last = rec["group_cluster_nmi"]
        if last is not None:
            vals.append(last)
    return float(np.mean(vals)) if vals else None


if __name__ == "__main__":
    main()
