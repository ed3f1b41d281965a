"""GDAS at the proxy's budget: how often each op is drawn (so how many updates its weights
get), per quarter of the budget, and where alpha ends (docs/nas_court.md, "Published
standing": the explanation measured before any verdict on GDAS).

GDAS' forward runs one op per edge, the argmax of log_softmax(alpha) + Gumbel noise, whose
distribution is softmax(alpha) whatever the temperature; the temperature only scales the
straight-through gradient. This script wraps the relaxation to count the drawn op of every
row in every training forward of a real `nas search --method gdas` (weight and alpha steps
alike: each bilevel step draws twice), at 1x and 3x the NB201 proxy budget.

    python experiments/nas_gdas_draws.py --out runs/gdas_draws --seeds 3 --budgets 1,3
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from genlab.nas.methods import gdas
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import get_space


def counted_search(cfg: SearchConfig, out: Path) -> dict:
    """Run ``cfg`` counting, per alpha row, the op each training forward draws; returns
    the summary's genotype and parameter-free edges, and the draws per quarter."""
    quarters = 4
    counts: dict[str, torch.Tensor] = {}
    calls = {"n": 0}
    real = gdas.Gumbel.__call__
    per_quarter: list[dict[str, torch.Tensor]] = [{} for _ in range(quarters)]

    def counting(self, name, alpha, training):
        weights = real(self, name, alpha, training)
        if training:
            drawn = weights.detach().argmax(-1)
            one_hot = torch.nn.functional.one_hot(drawn, alpha.shape[-1]).float().cpu()
            counts[name] = counts.get(name, 0) + one_hot
            q = min(quarters - 1, int(quarters * self.step_fraction))
            per_quarter[q][name] = per_quarter[q].get(name, 0) + one_hot
            calls["n"] += 1
        return weights

    real_at = gdas.Gumbel.at

    def at(self, step, total):
        self.step_fraction = step / max(total, 1)
        return real_at(self, step, total)

    gdas.Gumbel.__call__, gdas.Gumbel.at = counting, at
    gdas.Gumbel.step_fraction = 0.0
    try:
        summary = run_search(cfg, out, progress_bar=False)
    finally:
        gdas.Gumbel.__call__, gdas.Gumbel.at = real, real_at
    space = get_space(cfg.space)
    ops = list(space.ops) if hasattr(space, "ops") else None
    total = sum(c.sum(0) for c in counts.values())  # per op, over every row and forward
    rows = sum(c.shape[0] for c in counts.values())
    forwards = calls["n"] // max(len(counts), 1)
    return {"steps": cfg.steps, "seed": cfg.seed, "genotype": summary["genotype"],
            "param_free_ops": summary["param_free_ops"], "ops": ops,
            "training_forwards": forwards,
            "draws_per_row_per_op": (total / rows).tolist(),
            "share_per_quarter": [
                (sum(c.sum(0) for c in q.values()) / sum(c.sum() for c in q.values())).tolist()
                for q in per_quarter if q],
            "final_softmax_mean": torch.tensor(
                [torch.softmax(torch.tensor(a), -1).mean(0).tolist()
                 for a in summary["alpha"].values()]).mean(0).tolist()}


def markdown(results: list[dict]) -> str:
    """One row per search: the drawn share of each op in the first and the last quarter
    (percent of the training forwards), the weight updates a convolution got, the cell."""
    ops = results[0]["ops"]
    head = ["budget", "seed", *(f"{op} q1/q4 %" for op in ops), "conv draws (1x1, 3x3)",
            "p-free edges"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        first, last = r["share_per_quarter"][0], r["share_per_quarter"][-1]
        draws = dict(zip(ops, r["draws_per_row_per_op"], strict=True))
        cells = [f"{r['budget']}x ({r['steps']} steps)", str(r["seed"]),
                 *(f"{100 * a:.0f} / {100 * b:.0f}" for a, b in zip(first, last, strict=True)),
                 f"{draws['nor_conv_1x1']:.0f}, {draws['nor_conv_3x3']:.0f} of "
                 f"{r['training_forwards']}", str(r["param_free_ops"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seeds", default="3", help="Selection seeds (comma-separated).")
    p.add_argument("--budgets", default="1,3", help="Multiples of the proxy's steps.")
    p.add_argument("--table", action="store_true", help="Print the Markdown table of the "
                   "finished runs in --out (gdas_draws.json) and stop.")
    p.add_argument("--steps", type=int, default=None, help="The 1x budget (default: the "
                   "proxy's; a smoke test gives a few).")
    args = p.parse_args()
    if args.table:
        print(markdown(json.loads((args.out / "gdas_draws.json").read_text())))
        return
    space = get_space("nb201")
    results = []
    for budget in (int(b) for b in args.budgets.split(",")):
        for seed in (int(s) for s in args.seeds.split(",")):
            cfg = SearchConfig(space="nb201", method="gdas", seed=seed,
                               steps=budget * (args.steps or space.proxy.steps),
                               hessian_points=0)
            res = counted_search(cfg, args.out / f"x{budget}-s{seed}")
            res["budget"] = budget
            results.append(res)
            print(json.dumps(res))
    (args.out / "gdas_draws.json").write_text(json.dumps(results, indent=2))
    print(markdown(results))


if __name__ == "__main__":
    main()
