"""How many converged trainings does the paired tau difference need to be +-0.1 wide?

For every run folder of ``genlab optim correlate`` given, every gap and every pair (a
nonuniformity measure a, a sharpness measure b), on the run's models (every one under the
stopping rule; in a run made before it, the converged ones: training accuracy >= its
``min_train_acc``), two estimates of the number of trainings n* at
which the paired 95% interval of tau(a) - tau(b) has half-width ``--target``:

- bootstrap (measured): for each n of ``--sizes``, ``--draws`` samples of n trainings drawn
  with replacement from the converged ones (fewer or more than there are), each given its
  paired bootstrap interval (``paired_tau_difference``, ``--resamples``); the median
  half-width per n, and n* from the fit half-width = c / sqrt(n) over those medians;
- analytic: the jackknife standard error se of the difference on the N converged
  trainings (``jackknife_tau_difference``), half-width z * se * sqrt(N / n), so
  n* = N * (z * se / target)^2.

    python experiments/nonuniformity_sizing.py runs/correlate_mlp runs/correlate_tf \\
        --out runs/sizing

Beside them, the paired table (``paired_table``: plain and granulated differences, verdicts,
Jiang et al.'s K) of what each run decides now. Writes DIR/nonuniformity_sizing.json and
prints the tables (Markdown).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
from pathlib import Path

import numpy as np

from genlab.core.report import markdown_table
from genlab.optim.measures.correlation import (
    NONUNIFORMITY_MEASURES,
    SHARPNESS_MEASURES,
    VERDICT_MARGIN,
    jackknife_tau_difference,
    paired_table,
    paired_tau_difference,
    with_random_measure,
)
from genlab.optim.studies.correlate import GAPS

SIZES = (16, 24, 32, 48, 64, 96, 128, 192, 256)
TABLE_COLUMNS = ["a", "b", "tau_diff", "tau_lo", "tau_hi", "tau_verdict", "granulated_diff",
                 "granulated_lo", "granulated_hi", "granulated_verdict", "cmi_a", "cmi_b"]


#: the training accuracy (percent) that made a model "converged" in a run made before the
#: stopping rule (its config.json has ``min_train_acc``)
OLD_MIN_TRAIN_ACC = 99.0


def converged_records(run: Path) -> tuple[dict, list[dict], list[dict]]:
    """The run's summary, its finished trainings and those the tables count: every one in a
    run under the stopping rule (config ``stop_loss``), the converged ones (training accuracy
    >= ``min_train_acc``) in a run made before it."""
    summary = json.loads((run / "summary.json").read_text())
    config = json.loads((run / "config.json").read_text())
    finished = [r for r in summary["records"] if not r.get("diverged")]
    if config.get("stop_loss"):
        return summary, finished, finished
    threshold = config.get("min_train_acc", OLD_MIN_TRAIN_ACC)
    return summary, finished, [r for r in finished if r["train_acc"] >= threshold]


def half_width(res: dict) -> float | None:
    return None if res["low"] is None else (res["high"] - res["low"]) / 2


def size_pair(records: list[dict], a: str, b: str, gap: str, draws: dict[int, np.ndarray],
              args) -> dict:
    """Both estimates of n* for one pair on one run's converged trainings."""
    n = len(records)
    z = statistics.NormalDist().inv_cdf(0.5 + args.level / 2)
    now = paired_tau_difference(records, a, b, gap, resamples=args.resamples_full,
                                seed=args.seed, level=args.level)
    jack = jackknife_tau_difference(records, a, b, gap)
    curve = {}
    for size, rows in draws.items():
        halves = [half_width(paired_tau_difference(
            [records[i] for i in row], a, b, gap, resamples=args.resamples, seed=d,
            level=args.level)) for d, row in enumerate(rows)]
        halves = [h for h in halves if h is not None]
        curve[size] = statistics.median(halves) if halves else None
    fitted = [(s, h) for s, h in curve.items() if h]
    c = math.exp(statistics.fmean(math.log(h) + 0.5 * math.log(s) for s, h in fitted))
    reached = [s for s, h in curve.items() if h is not None and h <= args.target]
    return {"a": a, "b": b, "n": n, "difference": now["difference"], "low": now["low"],
            "high": now["high"], "half_width": half_width(now),
            "jackknife_se": jack["se"], "jackknife_half_width": z * jack["se"],
            "n_star_jackknife": math.ceil(n * (z * jack["se"] / args.target) ** 2),
            "n_star_bootstrap": math.ceil((c / args.target) ** 2),
            "first_size_reaching_target": min(reached) if reached else None,
            "bootstrap_half_width": curve}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", type=Path, nargs="+", help="folders of `genlab optim correlate`")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--gaps", default=",".join(GAPS))
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--draws", type=int, default=40, help="samples of n trainings per size")
    p.add_argument("--resamples", type=int, default=200, help="bootstrap of each sample")
    p.add_argument("--resamples-full", type=int, default=1000,
                   help="bootstrap of the run's own interval")
    p.add_argument("--target", type=float, default=VERDICT_MARGIN,
                   help="the half-width wanted (also the verdicts' margin)")
    p.add_argument("--level", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    report = {"options": vars(args), "runs": []}
    for run in args.runs:
        summary, finished, records = converged_records(run)
        rng = np.random.default_rng(args.seed)
        draws = {s: rng.integers(0, len(records), (args.draws, s)) for s in sizes}
        entry = {"run": run.name, "arch": summary["arch"], "trainings": len(summary["records"]),
                 "finished": len(finished), "converged": len(records), "gaps": {}}
        for gap in args.gaps.split(","):
            rows = [size_pair(records, a, b, gap, draws, args)
                    for a, b in itertools.product(NONUNIFORMITY_MEASURES, SHARPNESS_MEASURES)]
            entry["gaps"][gap] = rows
            print(f"\n### {summary['arch']} ({run.name}), {gap}: {len(records)} converged "
                  f"of {len(finished)} finished trainings\n")
            print(markdown_table(rows, ["a", "b", "difference", "low", "high", "half_width",
                                        "jackknife_half_width", "n_star_jackknife",
                                        "n_star_bootstrap", "first_size_reaching_target"],
                                 digits=2))
            table = paired_table(with_random_measure(records), gap,
                                 summary["hyperparameters"], seed=args.seed, level=args.level,
                                 margin=args.target)
            entry.setdefault("paired_table", {})[gap] = table
            print("\npaired table (what the run decides now)\n")
            print(markdown_table(table, TABLE_COLUMNS, digits=2))
            curve = [{"n": s, **{f"{r['a']} - {r['b']}": r["bootstrap_half_width"][s]
                                 for r in rows}} for s in sizes]
            print("\nmedian bootstrap half-width against n\n")
            print(markdown_table(curve, list(curve[0]), digits=3))
        report["runs"].append(entry)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "nonuniformity_sizing.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"\nwrote {args.out / 'nonuniformity_sizing.json'}")


if __name__ == "__main__":
    main()
