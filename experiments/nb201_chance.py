"""The exact chance distribution of a random NAS-Bench-201 cell's accuracy, as a results file.

Every cell of the table counted once (code: `genlab.nas.spaces.nb201.table.chance_record`);
the claims table reads the file, so no test or page needs the table:

    python experiments/nb201_chance.py --nb201-table nb201_accuracy.csv \\
        --out docs/results/nb201_chance.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from genlab.nas.spaces.nb201.table import NB201Table, chance_record

COMMAND = ("python experiments/nb201_chance.py --nb201-table nb201_accuracy.csv "
           "--out docs/results/nb201_chance.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nb201-table", required=True, help="the NB201 accuracy CSV")
    parser.add_argument("--dataset", default="cifar10", help="cifar10, cifar100 or imagenet16")
    parser.add_argument("--out", required=True, help="the results file to write")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    record = chance_record(NB201Table.load(args.nb201_table), args.dataset, command=COMMAND,
                           commit=commit)
    head = json.dumps({k: v for k, v in record.items() if k != "chance"}, indent=1)
    # the distribution on one line: thousands of distinct values
    Path(args.out).write_text(head[:-2] + ',\n "chance": ' + json.dumps(record["chance"])
                              + "\n}\n")
    print(f"{args.out}: {len(record['chance']['values'])} distinct values over "
          f"{record['chance']['population']} cells")


if __name__ == "__main__":
    main()
