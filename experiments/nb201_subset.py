"""The rows of the NAS-Bench-201 accuracy CSV for the cells another CSV lists.

docs/nas_proxy.md's tables are printed from committed files alone: the cells' own results
(scores.csv, cells.csv) and, for the truth, the table's rows of the 200 drawn cells, in the
table's own format (genlab reads it as it reads the whole table):

    python experiments/nb201_subset.py nb201_accuracy.csv docs/nas_proxy/scores/scores.csv \
        docs/nas_proxy/nb201_draw.csv
"""

import argparse
import csv
from pathlib import Path

ARCH = "ArchitectureString"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", type=Path, help="the NB201 accuracy CSV (genlab's format)")
    ap.add_argument("cells", type=Path, help="a CSV with an `arch` column (the cells)")
    ap.add_argument("out", type=Path, help="where the table's rows of those cells go")
    args = ap.parse_args()
    wanted = {row["arch"] for row in csv.DictReader(args.cells.open())}
    with args.table.open() as f:
        reader = csv.DictReader(f)
        rows = [row for row in reader if row[ARCH] in wanted]
        header = reader.fieldnames
    missing = wanted - {row[ARCH] for row in rows}
    if missing:
        raise SystemExit(f"{len(missing)} cells are not in {args.table}, e.g. {min(missing)}")
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: r[ARCH]))
    print(f"{len(rows)} rows: {args.out}")


if __name__ == "__main__":
    main()
