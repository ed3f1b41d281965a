"""The court's power, as stage 3's protocol fixes it (docs/nas_proxy.md): from `ber`'s first
seeds, the minimum detectable effect of the primary comparison (`ber` minus its best rival,
CIFAR-10 through the table, paired by seed) at the court's planned seeds, 80 % power, the
exact sign-flip test at the comparison's level. Printed from a committed runs.csv, so that
the figure the protocol asks for before seeds 5-9 ran is read from those first seeds alone.

    python experiments/nas_court_power.py RUNS_CSV [--row ber] [--pilot-seeds 0-4] [--seeds 10]
"""

from __future__ import annotations

import argparse
import statistics

from genlab.core.report import markdown_table
from genlab.core.stats import minimum_detectable_effect
from genlab.nas.bench.records import read_records
from genlab.nas.bench.versus import VERSUS_LEVEL, per_seed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs")
    parser.add_argument("--row", default="ber")
    parser.add_argument("--pilot-seeds", default="0-4")
    parser.add_argument("--seeds", type=int, default=10, help="the court's planned seeds")
    args = parser.parse_args()
    first, last = (int(x) for x in args.pilot_seeds.split("-"))
    pilot = set(range(first, last + 1))
    records = [r for r in read_records(args.runs).values() if int(r["seed"]) in pilot]
    rows = sorted({r["reg"] for r in records} - {args.row})
    mine = per_seed(records, args.row, "cifar10")
    table = []
    for row in rows:
        theirs = per_seed(records, row, "cifar10")
        seeds = sorted(set(mine) & set(theirs))
        if len(seeds) < 2:
            continue
        d = [mine[s] - theirs[s] for s in seeds]
        table.append({"row": f"{args.row} - {row}", "pilot seeds": len(seeds),
                      "rival's mean": statistics.fmean(theirs[s] for s in seeds),
                      "sd of the difference": statistics.stdev(d),
                      f"MDE (80%, n={args.seeds})": minimum_detectable_effect(
                          statistics.stdev(d), args.seeds, alpha=1 - VERSUS_LEVEL,
                          test="sign-flip")})
    if not table:
        raise SystemExit(f"no row shares two of seeds {args.pilot_seeds} with {args.row}")
    best = max(table, key=lambda t: t["rival's mean"])
    print(markdown_table(table, digits=2).rstrip("\n"))
    print(f"\nThe primary comparison ({best['row']}, its best rival on seeds "
          f"{args.pilot_seeds}): minimum detectable effect at {args.seeds} seeds "
          f"{best[f'MDE (80%, n={args.seeds})']:.2f} points.")


if __name__ == "__main__":
    main()
