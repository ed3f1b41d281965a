"""Do the perturbation leaders stop preferring skip as the held supernet trains?

Round four's premise (docs/ber.md) failed in S3: at ber-pt's turn (step 89 of 600) the
leaders, resolved on 16 validation batches, hold as many skip edges as alpha's argmax. The
question this answers before any further variant: is the masking measurement skip-biased
because the turn is early (the convolutions young), or at every point of the budget? One
ber-pt search whose turn never fires (the entropy hinge holds alpha near uniform for the
whole budget); at the given steps, on the primary cell (NB201's cell, the normal cell of the
DARTS family): the leaders (``--batches`` validation batches), alpha's argmax, and how many
edges the measurement resolves (margin over two standard errors across the batches):

    python experiments/nas_ber_pt_leaders_over_time.py --space s3 --seed 9 \
        --at 89,200,300,450,599 --out runs/leaders_s3

Writes leaders.json and leaders.md under --out.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import genlab.nas.regularizers.perturb_commit as commit
from genlab.nas.regularizers.decay import PlateauTurn
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import get_space

_spec = importlib.util.spec_from_file_location(
    "premise", Path(__file__).with_name("nas_ber_pt_premise.py"))
premise = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(premise)


def measuring_penalty(at: set[int], space, rows: list[dict]):
    """PerturbationCommit.penalty that first measures the leaders at the steps in ``at``."""
    penalty = commit.PerturbationCommit.penalty
    name, spec = premise.primary(space)

    def measured(self, alphas, probe, val_loss=None, labels=None):
        if self.step in at and not any(r["step"] == self.step for r in rows):
            alpha = self.net.alphas()[name].detach().cpu()
            per_batch = [[commit.masked_losses(self.net, name, r, [b])
                          for b in self.val_batches] for r in range(alpha.shape[0])]
            leaders = commit.perturbation_leaders(self.net, self.val_batches)[name].cpu()
            rows.append({"step": self.step,
                         "argmax": premise.edge_counts(spec, alpha.argmax(-1)),
                         "leaders": premise.edge_counts(spec, leaders),
                         **premise.resolution(per_batch)})
            print(json.dumps(rows[-1]), flush=True)
        return penalty(self, alphas, probe, val_loss, labels)

    return measured


def markdown(space: str, seed: int, batches: int, rows: list[dict]) -> str:
    head = (f"{space}, seed {seed}, {batches} validation batches per measurement\n\n"
            "| step | skip edges: argmax | skip edges: leaders | p-free: argmax | p-free: "
            "leaders | leader's margin (median) | margin / its standard error (median) | "
            "edges resolved (> 2 se) |\n" + "|---" * 8 + "|\n")
    return head + "".join(
        f"| {r['step']} | {r['argmax']['skip']} | {r['leaders']['skip']} | "
        f"{r['argmax']['param_free']} | {r['leaders']['param_free']} | "
        f"{r['margin_median']:.4f} | {r['margin_over_se_median']:.1f} | {r['resolved']} |\n"
        for r in sorted(rows, key=lambda r: r["step"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--space", default="s3")
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--at", default="89,200,300,450,599", help="steps to measure at")
    ap.add_argument("--batches", type=int, default=16)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    space = get_space(args.space)
    rows: list[dict] = []
    PlateauTurn.fires = lambda self: False  # the hold for the whole budget
    commit.PerturbationCommit.penalty = measuring_penalty(
        {int(s) for s in args.at.split(",")}, space, rows)
    summary = run_search(SearchConfig(space=args.space, reg="ber-pt", seed=args.seed,
                                      threads=1, reg_params={"batches": float(args.batches)}),
                         args.out / "search")
    result = {"space": args.space, "seed": args.seed, "batches": args.batches, "rows": rows,
              "final_entropy": summary["mean_entropy"]}
    (args.out / "leaders.json").write_text(json.dumps(result, indent=1))
    text = markdown(args.space, args.seed, args.batches, rows)
    (args.out / "leaders.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
