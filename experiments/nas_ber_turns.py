"""What ber-anchor decided at its entropy turn, read from a bench's finished searches.

For every search of the given rows (``ber`` and any turn-based candidate), the checkpoint's
turn step, the peak of the smoothed node batch entropy, the mean edge entropy and the
parameter-free edges of the argmax at the logged step nearest the turn, and whether the final
argmax is the set of ops that led at the turn (ber-anchor's "leaders"):

    python experiments/nas_ber_turns.py runs/ber3_nb201 --rows ber

Prints a markdown table; reads only, writes nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from genlab.core.runs import CHECKPOINT, load_checkpoint, read_json


def turn_row(folder: Path) -> dict:
    state = load_checkpoint(folder / CHECKPOINT).get("reg", {})
    summary = read_json(folder / "summary.json")
    turn = state.get("turn_step")
    row = {"run": folder.name, "turn": turn, "peak": state.get("peak"),
           "p_free_final": summary["param_free_ops"], "entropy_final": summary["mean_entropy"]}
    if turn is None:
        return row
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    near = min(records, key=lambda r: abs(r["step"] - turn))
    row.update(logged_step=near["step"], p_free_turn=near["param_free_ops"],
               entropy_turn=near["mean_entropy"])
    leaders = state.get("leaders")
    if leaders:
        row["leaders_kept"] = all(torch.equal(leaders[name], torch.tensor(a).argmax(-1))
                                  for name, a in summary["alpha"].items())
    return row


def markdown(rows: list[dict]) -> str:
    def cell(v, fmt="{}"):
        return "-" if v is None else fmt.format(v)

    head = ("| run | turn step | node entropy peak | logged step | edge entropy there | p-free "
            "there | final edge entropy | final p-free | final argmax = leaders at the turn |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {r['run']} | {cell(r['turn'])} | {cell(r['peak'], '{:.3f}')} | "
        f"{cell(r.get('logged_step'))} | {cell(r.get('entropy_turn'), '{:.3f}')} | "
        f"{cell(r.get('p_free_turn'))} | {r['entropy_final']:.3f} | {r['p_free_final']} | "
        f"{cell(r.get('leaders_kept'))} |\n" for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench", type=Path, help="a `genlab nas bench` run folder")
    ap.add_argument("--rows", default="ber", help="comma-separated rows (default: ber)")
    args = ap.parse_args()
    search = args.bench / "search"
    if not search.is_dir():
        raise SystemExit(f"{args.bench}: not a bench folder (no search/)")
    rows = []
    for name in args.rows.split(","):
        folders = sorted((f for f in search.glob(f"{name}-s*")
                          if f.name[len(name) + 2:].isdigit()),
                         key=lambda f: int(f.name[len(name) + 2:]))
        if not folders:
            raise SystemExit(f"{search}: no finished search of row {name!r}")
        rows += [turn_row(f) for f in folders if (f / "summary.json").exists()]
    print(markdown(rows), end="")


if __name__ == "__main__":
    main()
