"""The court's power, as stage 3's protocol fixes it (docs/nas_proxy.md): from `ber`'s first
seeds, the minimum detectable effect of the primary comparison (`ber` minus its best rival,
CIFAR-10 through the table, paired by seed) at the court's planned seeds, 80 % power, the
exact sign-flip test at the comparison's level. Printed from a committed runs.csv, so that
the figure the protocol asks for before seeds 5-9 ran is read from those first seeds alone.

    python experiments/nas_court_power.py RUNS_CSV [--row ber] [--pilot-seeds 0-4] [--seeds 10]
"""

from __future__ import annotations

import argparse

from genlab.core.report import markdown_table
from genlab.nas.bench.records import read_records
from genlab.nas.bench.versus import primary_row, rival_row

MARGIN = 0.3  # the court's goal: the primary comparison's lower end above -0.3


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
    table = [t for row in rows if (t := rival_row(records, args.row, row, margin=MARGIN,
                                                   planned_seeds=args.seeds))]
    primary = primary_row(records, rows, args.row, margin=MARGIN, planned_seeds=args.seeds)
    if not table or primary is None:
        raise SystemExit(f"no row shares two of seeds {args.pilot_seeds} with {args.row}")
    best, mde = primary["rival"], primary[f"MDE (80%, n={args.seeds})"]
    shown = ("row", "seeds", "n", "effect", f"MDE (80%, n={args.seeds})")  # power, not verdicts
    print(markdown_table([{k: t[k] for k in shown} for t in table], digits=2).rstrip("\n"))
    print(f"\nThe primary comparison ({args.row} - {best}, its best rival on seeds "
          f"{args.pilot_seeds}): minimum detectable effect at {args.seeds} seeds {mde:.2f} "
          "points.")


if __name__ == "__main__":
    main()
