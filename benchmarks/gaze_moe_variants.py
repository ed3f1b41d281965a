"""MoEGaze variants chosen on held-out *source* subjects of the appearance world.

Each variant is trained on a source of the appearance-routing world (default app-e) for
several seeds, paired by seed with the baseline, and judged only on the held-out source
subjects (no target is rendered: the test set of every run is another population of the
source domain). Reported per variant: held-out source error, the seed-paired difference
to the baseline with its 95% bootstrap interval, and the router's selectivity for the
true appearance cluster (normalised mutual information between top-1 expert and
cluster; cluster purity; mean max weight). The oracle (one expert per true cluster) is
the upper reference of what routing can gain.

    python benchmarks/gaze_moe_variants.py --out runs/bench    # ~40 CPU-minutes

Writes DIR/gaze_moe_variants.json and .md; run folders in DIR/gaze_moe_variants/.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from genlab.core.report import markdown_table
from genlab.core.runs import write_json
from genlab.gaze.stats import Cell, Draws, fmt_ci, paired
from genlab.gaze.study import RunSpec, TrainExecutor, run_specs
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
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--source", default="app-e")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    base = GazeTrainConfig(model="moegaze", source=args.source, targets=[args.source],
                           steps=args.steps, train_count=3000, test_count=200)
    folder = args.out / "gaze_moe_variants"
    specs = [RunSpec(f"{i}_s{seed}", replace(base, seed=seed, **kw), folder / f"{i}_s{seed}")
             for seed in range(args.seeds) for i, kw in enumerate(VARIANTS.values())]
    results = run_specs(specs, TrainExecutor(args.out / "gaze_moe_variants_data", plots=False),
                        workers=args.workers, description="moegaze variants")
    per = {name: [results[f"{i}_s{s}"] for s in range(args.seeds)]
           for i, name in enumerate(VARIANTS)}
    cells = {n: Cell.from_runs([r["val"]["per_subject"] for r in rs], n) for n, rs in per.items()}
    draws = Draws.make(*cells["baseline"].m.shape, n_boot=2000)
    rows = []
    for name, rs in per.items():
        d = paired(cells["baseline"], cells[name], draws)
        router = [r["val"]["router"] for r in rs]
        mean = lambda k: float(np.mean([x[k] for x in router])) if router[0] else None  # noqa
        rows.append({"variant": name, "held-out source (deg)": cells[name].value,
                     "minus baseline [95%]": fmt_ci(d["diff"], d["diff_ci"], sign=True),
                     "expert-cluster NMI": mean("expert_cluster_nmi"),
                     "cluster purity": mean("cluster_purity"),
                     "mean max weight": mean("mean_max_weight")})
    md = (f"Held-out {args.source} subjects, {args.seeds} seeds, {args.steps} steps; "
          "differences paired by seed.\n\n" + markdown_table(rows, digits=3))
    print(md)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "gaze_moe_variants.json", {"rows": rows, "source": args.source,
                                                     "seeds": args.seeds,
                                                     "steps": args.steps})
    (args.out / "gaze_moe_variants.md").write_text(md)


if __name__ == "__main__":
    main()
