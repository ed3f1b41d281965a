"""Round four's premise, tested before any ber-pt selection (docs/ber.md, "Round four").

The reasoning says that at ber-pt's turn alpha's argmax is the noise of a near-uniform alpha,
and that the perturbation leaders (each edge's op whose masking raises the validation loss
most, on the supernet of the turn step) are not skip-biased. What would refute it: the
leaders holding as many skip edges as alpha's argmax there. For each space this runs one
ber-pt search on the calibration seed and records, at the turn, every edge of the primary
cell (NB201's cell, the DARTS spaces' normal cell): alpha's argmax, the leader, the rows'
entropies; then what the finished search derived:

    python experiments/nas_ber_pt_premise.py --spaces nb201,s2,s3 --seeds 9 --out runs/premise

Writes premise.json and premise.md under --out (one search folder per space, resumable).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

import genlab.nas.regularizers.perturb_commit as commit
from genlab.core.runs import read_json, write_json
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import get_space
from genlab.nas.supernet.ops import PARAM_FREE_OPS

SKIP = "skip_connect"
MEASURE = commit.perturbation_leaders  # the measurement itself (each space's spy wraps it)


def primary(space) -> tuple[str, object]:
    """The alpha tensor whose cell the space's counts read (normal cell, NB201's cell)."""
    specs = space.alpha_specs()
    name = "normal" if "normal" in specs else next(iter(specs))
    return name, specs[name]


def turn_spy(seen: dict, name_of):
    """perturbation_leaders wrapped: what alpha and the leaders were when it was called, and
    (what the signal resolves) each primary edge's masked losses on each batch alone."""
    def spy(net, batches):
        seen["alpha"] = {k: a.detach().cpu().clone() for k, a in net.alphas().items()}
        name = name_of(seen["alpha"])
        rows = seen["alpha"][name].shape[0]
        seen["per_batch"] = [[commit.masked_losses(net, name, r, [b]) for b in batches]
                             for r in range(rows)]  # [edge][batch][op]
        leaders = MEASURE(net, batches)
        seen["leaders"] = {k: v.cpu().clone() for k, v in leaders.items()}
        return leaders

    return spy


def resolution(per_batch: list) -> dict:
    """What the measurement resolves: per edge, the leader's margin over the runner-up (mean
    over batches) against its standard error over the batches (losses: [edge][batch][op]);
    an edge is resolved when the margin is over twice its standard error."""
    margins, ratios = [], []
    for edge in per_batch:
        losses = torch.tensor(edge, dtype=torch.float64)  # (batches, ops)
        top2 = losses.mean(0).topk(2).indices
        gap = losses[:, top2[0]] - losses[:, top2[1]]  # per batch
        margins.append(float(gap.mean()))
        se = float(gap.std() / len(gap) ** 0.5) if len(gap) > 1 else float("nan")
        ratios.append(float(gap.mean()) / se if se > 0 else float("inf"))
    ratios_t = torch.tensor(ratios)
    return {"margin_median": float(torch.tensor(margins).median()),
            "margin_over_se_median": float(ratios_t.median()),
            "resolved": int((ratios_t > 2).sum())}


def edge_counts(spec, picks: torch.Tensor) -> dict:
    ops = [spec.ops[r][int(k)] for r, k in enumerate(picks)]
    return {"skip": sum(op == SKIP for op in ops),
            "param_free": sum(op in PARAM_FREE_OPS for op in ops), "ops": ops}


def premise_row(space_name: str, seed: int, out: Path, batches: int | None = None) -> dict:
    space = get_space(space_name)
    folder = out / (f"{space_name}-s{seed}" + (f"-b{batches}" if batches else ""))
    done = folder / "premise.json"
    if done.is_file():  # read back; its resolution computed from its stored losses
        row = read_json(done)
        if row.get("per_batch"):
            row.update(resolution(row["per_batch"]))
        return {"batches": commit.VAL_BATCHES, **row}
    seen: dict = {}
    commit.perturbation_leaders = turn_spy(seen, lambda alphas: primary(space)[0])
    params = {"batches": float(batches)} if batches else {}
    summary = run_search(SearchConfig(space=space_name, reg="ber-pt", seed=seed, threads=1,
                                      reg_params=params),
                         folder / "search", resume=(folder / "search").exists())
    name, spec = primary(space)
    rows, width = spec.shape
    row = {"space": space_name, "seed": seed, "edges": rows, "ops": width,
           "batches": batches or commit.VAL_BATCHES,
           "uniform_skip": sum(o.count(SKIP) for o in spec.ops) / width,
           "final_skip": summary["skip_ops"], "final_param_free": summary["param_free_ops"],
           "final_entropy": summary["mean_entropy"], "genotype": summary["genotype"]}
    if "alpha" in seen:  # the turn was reached in this process (not in an earlier one)
        alpha = seen["alpha"][name]
        logp = torch.log_softmax(alpha, -1)
        entropy = -(logp.exp() * logp).sum(-1)
        row.update(turn=True,
                   entropy_share=float(entropy.mean() / math.log(width)),
                   argmax=edge_counts(spec, alpha.argmax(-1)),
                   leaders=edge_counts(spec, seen["leaders"][name]),
                   agree=int((alpha.argmax(-1) == seen["leaders"][name]).sum()),
                   **resolution(seen["per_batch"]), per_batch=seen["per_batch"])
    else:
        row.update(turn=False)
    write_json(done, row)
    return row


def markdown(rows: list[dict]) -> str:
    head = ("| space | seed | batches | edges x ops | entropy at the turn / log K | skip "
            "edges: argmax | skip edges: leaders | p-free: argmax | p-free: leaders | uniform "
            "draw's skip edges | argmax = leader | leader's margin (median) | margin / its "
            "standard error (median) | edges resolved (> 2 se) | final derived cell: skip, "
            "p-free | final entropy |\n" + "|---" * 16 + "|\n")
    lines = []
    for r in rows:
        if not r.get("turn"):
            lines.append(f"| {r['space']} | {r['seed']} | {r['batches']} | {r['edges']} x "
                         f"{r['ops']} | no turn "
                         f"| - | - | - | - | {r['uniform_skip']:.1f} | - | - | - | - | "
                         f"{r['final_skip']}, "
                         f"{r['final_param_free']} | {r['final_entropy']:.3f} |")
            continue
        lines.append(
            f"| {r['space']} | {r['seed']} | {r['batches']} | {r['edges']} x {r['ops']} | "
            f"{r['entropy_share']:.3f} | {r['argmax']['skip']} | {r['leaders']['skip']} | "
            f"{r['argmax']['param_free']} | {r['leaders']['param_free']} | "
            f"{r['uniform_skip']:.1f} | {r['agree']} of {r['edges']} | "
            f"{r['margin_median']:.4f} | {r['margin_over_se_median']:.1f} | "
            f"{r['resolved']} of {r['edges']} | {r['final_skip']}, "
            f"{r['final_param_free']} | {r['final_entropy']:.3f} |")
    return head + "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spaces", default="nb201,s2,s3")
    ap.add_argument("--seeds", default="9", help="comma-separated (default 9, the calibration "
                    "seed)")
    ap.add_argument("--batches", type=int, default=None,
                    help="ber-pt's validation batches at the turn (default: its own)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [premise_row(s, int(seed), args.out, args.batches) for seed in args.seeds.split(",")
            for s in args.spaces.split(",")]
    (args.out / "premise.json").write_text(json.dumps(rows, indent=1))
    text = markdown(rows)
    (args.out / "premise.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
